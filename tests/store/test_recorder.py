"""store.recorder.RunRecorder driven directly (no pytest session) on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from goldeval.store import open_store
from goldeval.store.recorder import RunRecorder

PROTOCOL = {"datasetId": "demo-v1", "datasetHash": "h1", "mode": "DETERMINISTIC", "attempts": 1}
DATASET = {"dataset_id": "demo-v1", "dataset_hash": "h1", "dataset_source": "golden/demo.jsonl"}


def case(case_id: str) -> dict[str, Any]:
    return {"caseId": case_id, "kinds": ["GENERATION"], "prompt": f"prompt of {case_id}", "line": 1}


def payload(case_id: str, index: int = 1, status: str = "PASS") -> dict[str, Any]:
    return {
        "attempt": {"caseId": case_id, "index": index, "status": status, "model": None},
    }


def recorder(url: str, run_key: str | None = None, immediate: bool = False) -> RunRecorder:
    infos = {c: case(c) for c in ("a", "b", "c")}
    return RunRecorder(url, run_key=run_key, immediate=immediate, case_info=infos.__getitem__)


def test_records_attempts_in_batches_and_finishes(target) -> None:  # type: ignore[no-untyped-def]
    rec = recorder(target.url)
    assert rec.begin(PROTOCOL, {}, run_id="run-1", **DATASET) == "run-1"
    rec.add(payload("a"))
    rec.add(payload("b", status="FAIL"))
    with open_store(target.url) as store:
        assert store.attempts("run-1") == []  # batched: nothing written before a flush
    rec.finish({"status": "COMPLETED", "runId": "run-1"}, [])
    rec.close()
    assert rec.error is None
    with open_store(target.url) as store:
        row = store.get_run("run-1")
        assert row is not None and row.status == "COMPLETED"
        attempts = store.attempts("run-1")
        assert {(a["caseId"], a["status"]) for a in attempts} == {("a", "PASS"), ("b", "FAIL")}
        assert {c["caseId"] for c in store.cases("run-1")} == {"a", "b"}


def test_immediate_mode_writes_each_attempt_at_once(target) -> None:  # type: ignore[no-untyped-def]
    rec = recorder(target.url, immediate=True)
    rec.begin(PROTOCOL, {}, run_id="run-2", **DATASET)
    rec.add(payload("a"))
    with open_store(target.url) as store:
        assert [a["caseId"] for a in store.attempts("run-2")] == ["a"]
    rec.close()


def test_run_key_resumes_and_reports_previous_attempts(target) -> None:  # type: ignore[no-untyped-def]
    first = recorder(target.url, run_key="k1")
    first.begin(PROTOCOL, {}, run_id="run-3", **DATASET)
    first.add(payload("a"))
    first.flush()
    first.close()
    second = recorder(target.url, run_key="k1")
    assert second.begin(PROTOCOL, {}, run_id="run-4", **DATASET) == "run-4"
    assert second.resumed and second.run_id == "run-3"
    cases, attempts = second.previous_attempts()
    assert [c["caseId"] for c in cases] == ["a"] and [a["caseId"] for a in attempts] == ["a"]
    second.close()


def test_run_key_under_another_protocol_is_a_conflict(target) -> None:  # type: ignore[no-untyped-def]
    first = recorder(target.url, run_key="k2")
    first.begin(PROTOCOL, {}, run_id="run-5", **DATASET)
    first.close()
    other = recorder(target.url, run_key="k2")
    other.begin({**PROTOCOL, "attempts": 3}, {}, run_id="run-6", **DATASET)
    assert other.conflict is not None and "attempts" in other.conflict
    assert other.store is None  # nothing of this session is written into the key's run
    other.close()


def test_same_id_without_a_key_gets_a_distinct_id(target) -> None:  # type: ignore[no-untyped-def]
    first = recorder(target.url)
    first.begin(PROTOCOL, {}, run_id="run-7", **DATASET)
    first.close()
    second = recorder(target.url)
    new_id = second.begin(PROTOCOL, {}, run_id="run-7", **DATASET)
    assert new_id.startswith("run-7-") and second.run_id == new_id and not second.resumed
    second.close()


def test_a_broken_store_sets_an_error_instead_of_raising(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "store.sqlite3"
    bad.write_bytes(b"not a database, just bytes" * 100)
    rec = recorder(str(bad))
    assert rec.begin(PROTOCOL, {}, run_id="run-8", **DATASET) == "run-8"
    assert rec.error is not None and "run store" in rec.error
    rec.add(payload("a"))  # ignored once failed
    rec.finish({"status": "COMPLETED"}, [])
    rec.close()


def test_no_store_records_nothing() -> None:
    rec = recorder(None)  # type: ignore[arg-type]
    assert rec.begin(PROTOCOL, {}, run_id="run-9", **DATASET) == "run-9"
    rec.add(payload("a"))
    rec.finish({"status": "COMPLETED"}, [])
    assert rec.run_id is None and rec.error is None
