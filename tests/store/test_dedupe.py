"""The store keeps case texts and graded records once, however many runs repeat them.

Real SQLite files and a real PostgreSQL schema (tests/store/conftest.py). Size figures for
large datasets are in benchmarks/bench_store.py (not timed or sized here beyond row counts).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from goldeval.core.models import AttemptRecord, CaseInfo, ContractResult, Status
from goldeval.results.attempt_payloads import attempt_payload, without_raw_text
from goldeval.store import LATEST_VERSION, Store, open_store
from goldeval.store.migrations import MIGRATIONS, SCHEMA_VERSION_DDL
from goldeval.store.pages import MARK
from tests.helpers import RunFiles
from tests.store.conftest import Target

CASES = 40
TS = "2026-01-01T00:00:00.000000+00:00"


def _infos() -> list[dict[str, Any]]:
    return [
        CaseInfo(
            case_id=f"case-{n:03d}",
            kinds=["GENERATION"],
            prompt=f"Напиши тест {n}: " + "подробности " * 20,
            tags=["api"],
            line=n + 1,
        ).dump()
        for n in range(CASES)
    ]


def _records(run: int) -> list[AttemptRecord]:
    """The same answers graded the same way in every run; only the timings differ."""
    return [
        AttemptRecord(
            case_id=f"case-{n:03d}",
            index=1,
            status=Status.PASS if n % 4 else Status.FAIL,
            contract=ContractResult(passed=bool(n % 4), violations=[] if n % 4 else [f"v{n}"]),
            duration_ms=100 + run * 7 + n,
            tries=1,
            output=f"answer {n}",
        )
        for n in range(CASES)
    ]


def _rows(records: list[AttemptRecord]) -> list[tuple[str, int, str | None, str, str]]:
    rows = []
    for record in records:
        p = attempt_payload(record, keep_passing_output=False)
        rows.append(
            (p["caseId"], p["index"], p["model"], p["status"], without_raw_text(p["record"]))
        )
    return rows


def _expected(records: list[AttemptRecord]) -> list[dict[str, Any]]:
    out = []
    for r in records:
        dumped = r.dump()
        dumped.pop("judgeOutput", None)
        dumped.pop("output", None)  # never stored (raw model text)
        out.append(dumped)
    return out


def _write_run(store: Store, run_id: str, run: int) -> list[AttemptRecord]:
    store.begin_run(
        run_id,
        dataset_id="generation-v1",
        dataset_hash="d4e8",
        mode="fixture",
        protocol={"attempts": 1},
        configuration={},
    )
    records = _records(run)
    store.record_cases(run_id, _infos())
    rows = _rows(records)
    for first in range(0, len(rows), 15):  # in batches, as the plugin writes
        store.record_attempt_texts(run_id, rows[first : first + 15])
    store.finish_run(run_id, "COMPLETED", {"n": run})
    return records


def _count(target: Target, table: str) -> int:
    return int(target.query(f"SELECT COUNT(*) FROM {table}")[0][0])


def test_ten_runs_of_one_dataset_store_each_text_once(store: Store, target: Target) -> None:
    first = _write_run(store, "run-0", 0)
    contents_after_one = _count(target, "contents")
    # every case info, and each distinct graded record without its timings
    assert (
        contents_after_one == CASES + len({(n % 4 == 0, n) for n in range(CASES) if n % 4 == 0}) + 1
    )
    written = {0: first}
    for run in range(1, 10):
        written[run] = _write_run(store, f"run-{run}", run)
    assert _count(target, "contents") == contents_after_one  # nothing stored twice
    # Every run still reads back as its own records (its own durations) and cases.
    for run, records in written.items():
        assert store.attempts(f"run-{run}") == _expected(records)
        assert store.cases(f"run-{run}") == _infos()
        assert store.graded_keys(f"run-{run}", include_errors=True) == {
            (f"case-{n:03d}", 1, "") for n in range(CASES)
        }


def test_a_changed_answer_adds_only_its_own_content(store: Store, target: Target) -> None:
    _write_run(store, "run-0", 0)
    before = _count(target, "contents")
    store.begin_run(
        "run-1",
        dataset_id="generation-v1",
        dataset_hash="d4e8",
        mode="fixture",
        protocol={},
        configuration={},
    )
    store.record_cases("run-1", _infos())
    records = _records(1)
    records[3] = records[3].model_copy(
        update={"status": Status.FAIL, "contract": ContractResult(passed=False, violations=["new"])}
    )
    store.record_attempt_texts("run-1", _rows(records))
    assert _count(target, "contents") == before + 1
    assert store.attempts("run-1")[3]["contract"]["violations"] == ["new"]
    assert store.attempts("run-0")[3]["contract"]["violations"] == []


def test_delete_runs_keeps_contents_other_runs_use(store: Store, target: Target) -> None:
    _write_run(store, "run-0", 0)
    kept = _write_run(store, "run-1", 1)
    store.begin_run(
        "run-2",
        dataset_id="other-v1",
        dataset_hash="ffff",
        mode="fixture",
        protocol={},
        configuration={},
    )
    store.record_cases("run-2", [{"caseId": "only-here", "prompt": "unique text", "line": 1}])
    shared = _count(target, "contents")
    assert store.delete_runs(["run-0", "run-2", "no-such-run"]) == 2
    store.compact()
    assert [r.run_id for r in store.runs()] == ["run-1"]
    assert _count(target, "contents") == shared - 1  # only the text no run refers to any more
    assert store.attempts("run-1") == _expected(kept)
    assert store.cases("run-1") == _infos()
    assert store.attempts("run-0") == [] and store.cases("run-2") == []
    assert target.query("SELECT DISTINCT run_id FROM attempts") == [("run-1",)]
    assert target.query("SELECT DISTINCT run_id FROM run_cases") == [("run-1",)]
    assert [r[0] for r in target.query("SELECT id FROM datasets")] == ["generation-v1"]


def _v4_store(target: Target) -> None:
    """A store as goldeval wrote it before migration 5 (one row per case and attempt)."""
    target.execute(SCHEMA_VERSION_DDL[target.backend])
    for step in MIGRATIONS[target.backend][:4]:
        for statement in step.statements:
            target.execute(statement)
        target.execute("INSERT INTO schema_version VALUES (?, ?, ?)", (step.version, "x", TS))
    target.execute("INSERT INTO datasets VALUES (?, ?, ?, ?)", ("generation-v1", "d4e8", None, TS))


def test_migration_5_moves_old_rows_and_reads_the_same(target: Target) -> None:
    _v4_store(target)
    old: dict[str, list[AttemptRecord]] = {}
    for run in range(3):
        run_id = f"old-{run}"
        target.execute(
            "INSERT INTO runs (run_id, dataset_id, dataset_hash, mode, protocol, configuration,"
            " status, started_at) VALUES (?, 'generation-v1', 'd4e8', 'fixture', '{}', '{}',"
            " 'COMPLETED', ?)",
            (run_id, f"2026-01-0{run + 1}T00:00:00+00:00"),
        )
        for info in _infos():
            target.execute(
                "INSERT INTO cases VALUES (?, ?, ?)", (run_id, info["caseId"], json.dumps(info))
            )
        old[run_id] = _records(run)
        for case_id, index, _, status, text in _rows(old[run_id]):
            target.execute(
                "INSERT INTO attempts VALUES (?, ?, ?, '', ?, ?, ?)",
                (run_id, case_id, index, status, text, TS),
            )
    with open_store(target.url) as store:
        assert store.schema_version() == LATEST_VERSION
        for run_id, records in old.items():
            assert store.attempts(run_id) == _expected(records)
            assert store.cases(run_id) == _infos()
        assert not {"cases", "run_pages"} & target.tables()  # rows since migration 8
        contents = _count(target, "contents")
        # A resumed old run takes new attempts, and a re-sent one is still a no-op.
        extra = AttemptRecord(case_id="case-000", index=2, status=Status.PASS).dump()
        assert store.record_attempt("old-0", extra)
        assert not store.record_attempt("old-0", old["old-0"][0].dump())
    # three runs of the same texts were moved into one copy of each
    assert contents == CASES + 10 + 1
    assert target.query("SELECT COUNT(*) FROM attempts WHERE run_id = 'old-1'") == [(CASES,)]


def _page_contents(target: Target) -> set[int]:
    """Ids of the contents the newest run's rows refer to (cases and attempts)."""
    (run_id,) = target.query("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1")[0]
    # A run that repeats an earlier one reads its rows (schema 13): run_attempts has them
    # under its own id; its cases are the owner's.
    rows = target.query(
        "SELECT content_id FROM run_attempts WHERE run_id = ?"
        " UNION SELECT content_id FROM run_cases WHERE run_id ="
        " (SELECT COALESCE(rows_of, run_id) FROM runs WHERE run_id = ?)",
        (run_id, run_id),
    )
    return {int(r[0]) for r in rows}


@pytest.mark.parametrize("runs", [3])
def test_plugin_runs_of_one_dataset_share_their_texts(
    pytester: pytest.Pytester, golden_project: Path, target: Target, run_files: RunFiles, runs: int
) -> None:
    """Real pytest runs in fixture mode: the second and later runs add no case or record
    content, and their summaries share the values that do not change (selected case ids)."""
    seen = []
    for _ in range(runs):
        result = pytester.runpytest("--golden=generation-v1", f"--golden-store={target.url}")
        assert result.ret == 0, result.stdout.str()
        seen.append(_page_contents(target))
    assert seen[0] and seen == [seen[0]] * runs
    raw = [r[0] for r in target.query("SELECT summary FROM runs")]
    texts = [r if isinstance(r, str) else json.dumps(r) for r in raw]
    assert all(MARK in t for t in texts)  # the case id list is a shared content
    with open_store(target.url) as store:
        latest = run_files.latest()
        row = store.get_run(latest["runId"])
        assert row is not None and row.summary is not None
        recorded = row.summary["runDocument"]
        assert recorded["protocol"] == latest["protocol"]  # put back in place
        cases = store.cases(latest["runId"])
        assert [c["caseId"] for c in cases] == [c["caseId"] for c in latest["cases"]]
        assert len(store.attempts(latest["runId"])) == latest["attemptsTotal"]
