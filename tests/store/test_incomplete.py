"""Run status INCOMPLETE in the store (issue 31: a cut-short run is named the same everywhere).

Schema 9 lets ``runs`` and ``service_runs`` hold INCOMPLETE: a store at schema 8 with rows is
upgraded in place (SQLite rebuilds both tables, PostgreSQL replaces their CHECK), every row,
index and foreign key kept. The recorder stores the status the run document's outcome gives
(``verdict.run_status``): the same word summary.json says.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from goldeval.store import LATEST_VERSION, StoreError, open_store
from goldeval.store.migrations import (
    MIGRATIONS,
    RUN_STATUSES,
    SCHEMA_VERSION_DDL,
    rebuilt_table_sql,
)
from goldeval.store.queue import FINISHED, RESUMABLE, RunQueue
from goldeval.store.recorder import RunRecorder
from tests.store.conftest import Target

TS = "2026-01-01T00:00:00.000000+00:00"
TABLES = ("datasets", "runs", "run_cases", "attempts", "contents", "artifacts", "service_runs")


# --------------------------------------------------------------------------- migration 9


def _v8_store(target: Target) -> None:
    """A store at schema 8 made by its own steps (empty tables: the data hooks move nothing),
    then rows in every table a run touches, as schema 8 held them."""
    target.execute(SCHEMA_VERSION_DDL[target.backend])
    for step in MIGRATIONS[target.backend][:8]:
        for statement in (*step.statements, *step.after):
            target.execute(statement)
        target.execute("INSERT INTO schema_version VALUES (?, ?, ?)", (step.version, "x", TS))
    target.execute("INSERT INTO datasets VALUES (?, ?, ?, ?)", ("demo-v1", "h1", None, TS))
    for run_id, key, status in (
        ("old-done", None, "COMPLETED"),
        ("old-stopped", "ci-7", "INTERRUPTED"),
    ):
        target.execute(
            "INSERT INTO runs (run_id, run_key, dataset_id, dataset_hash, mode, model, protocol,"
            " configuration, status, started_at, finished_at, summary)"
            " VALUES (?, ?, 'demo-v1', 'h1', 'fixture', NULL, '{}', '{}', ?, ?, ?, ?)",
            (run_id, key, status, TS, TS, json.dumps({"status": status})),
        )
        target.execute(
            "INSERT INTO contents (sha256, body) VALUES (?, ?)",
            (run_id.encode().ljust(32, b"."), json.dumps({"caseId": "a", "prompt": "p"})),
        )
        (content_id,) = target.query(
            "SELECT id FROM contents WHERE sha256 = ?", (run_id.encode().ljust(32, b"."),)
        )[0]
        target.execute("INSERT INTO run_cases VALUES (?, 'a', ?)", (run_id, content_id))
        target.execute(
            "INSERT INTO attempts (run_id, case_id, attempt_index, model, status, error_kind,"
            " duration_ms, tokens, content_id, fields)"
            " VALUES (?, 'a', 1, '', 'PASS', NULL, 12.5, 7, ?, ?)",
            (run_id, content_id, json.dumps({"caseId": "a", "index": 1, "status": "PASS"})),
        )
        target.execute(
            "INSERT INTO artifacts VALUES (?, 'run.json', ?, 10, ?)", (run_id, "ab" * 32, TS)
        )
    target.execute(
        "INSERT INTO service_runs (id, idempotency_key, status, dataset_id, request, run_key,"
        " run_id, run_dir, worker, claims, cancel_requested, exit_code, error, created_at,"
        " started_at, heartbeat_at, finished_at, idempotency_owner)"
        " VALUES ('svc-1', 'idem-1', 'INTERRUPTED', 'demo-v1', '{\"dataset\": \"demo-v1\"}',"
        " 'ci-7', 'old-stopped', NULL, 'w0', 1, 0, 75, 'stopped', ?, ?, ?, ?, 'owner')",
        (TS, TS, TS, TS),
    )


def _indexes(target: Target, table: str) -> set[str]:
    if target.backend == "sqlite":
        rows = target.query(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", (table,)
        )
    else:
        rows = target.query(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
            " AND tablename = ?",
            (table,),
        )
    return {str(name) for (name,) in rows}


def _contents(target: Target) -> dict[str, list[tuple[Any, ...]]]:
    order = {
        "datasets": "id",
        "runs": "run_id",
        "run_cases": "run_id",
        "attempts": "run_id",
        "contents": "id",
        "artifacts": "run_id",
        "service_runs": "id",
    }
    return {t: target.query(f"SELECT * FROM {t} ORDER BY {order[t]}") for t in TABLES}


def test_schema_8_store_is_upgraded_in_place_keeping_rows_indexes_and_keys(
    target: Target,
) -> None:
    _v8_store(target)
    before = _contents(target)
    indexes = {t: _indexes(target, t) for t in ("runs", "service_runs")}
    assert all(before.values()) and all(indexes.values())

    with open_store(target.url) as store:
        assert store.schema_version() == LATEST_VERSION  # 9 and every later step
        after = _contents(target)
        # Schema 15 appends service_runs.queued_at, each old row's created_at.
        queued = target.query("SELECT queued_at, created_at FROM service_runs")
        assert queued and all(q == c for q, c in queued), queued
        after["service_runs"] = [row[:-1] for row in after["service_runs"]]
        # Schema 11 appends service_runs.exit_decision, schema 12 attempts.variant and
        # schema 13 runs.rows_of, NULL on the rows written before them.
        for table in ("service_runs", "attempts", "runs"):
            assert [row[-1] for row in after[table]] == [None] * len(before[table])
            after[table] = [row[:-1] for row in after[table]]
        assert after == before  # every row, every column, in place
        indexes["runs"].add("runs_rows_of")  # schema 13: the runs reading another's rows
        indexes["service_runs"].add("service_runs_queued")  # schema 15: the oldest queued
        assert {t: _indexes(target, t) for t in indexes} == indexes
        old = store.get_run("ci-7")
        assert old is not None and (old.run_id, old.status) == ("old-stopped", "INTERRUPTED")
        (attempt,) = store.attempts("old-done")
        assert (attempt["caseId"], attempt["index"], attempt["status"]) == ("a", 1, "PASS")
        assert [c["caseId"] for c in store.cases("old-stopped")] == ["a"]

        # INCOMPLETE is a run status now, in both tables; a made-up one is still refused.
        store.finish_run("old-done", "INCOMPLETE", {"status": "INCOMPLETE"})
        row = store.get_run("old-done")
        assert row is not None and row.status == "INCOMPLETE"
        queue = RunQueue(store)
        target.execute("UPDATE service_runs SET status = 'RUNNING' WHERE id = 'svc-1'")
        assert queue.finish("svc-1", None, "INCOMPLETE", exit_code=1, error=None)
        job = queue.get("svc-1")
        assert job is not None and job.status == "INCOMPLETE"
        for table, key in (("runs", "run_id = 'old-done'"), ("service_runs", "id = 'svc-1'")):
            with pytest.raises(Exception, match=r"(?i)check"):
                target.execute(f"UPDATE {table} SET status = 'MAYBE' WHERE {key}")

        # The foreign keys still hold both ways: deleting a run takes its attempts, cases and
        # artifacts with it (ON DELETE CASCADE on the rebuilt table), and a row of a missing
        # run is refused (on SQLite: the store's connection has its keys on again).
        assert store.delete_runs(["old-done"]) == 1
        for child in ("attempts", "run_cases", "artifacts"):
            assert target.query(f"SELECT run_id FROM {child}") == [("old-stopped",)], child
        with pytest.raises(StoreError):
            store.record_artifacts("no-such-run", [("run.json", "cd" * 32, 1)])

    versions = [v for (v,) in target.query("SELECT version FROM schema_version ORDER BY 1")]
    assert versions == list(range(1, LATEST_VERSION + 1))
    with open_store(target.url) as again:  # re-opening applies nothing twice
        assert [r.run_id for r in again.runs()] == ["old-stopped"]


def test_sqlite_rebuild_keeps_columns_added_by_later_steps() -> None:
    stored = (
        'CREATE TABLE "runs" ( run_id TEXT PRIMARY KEY,'
        " status TEXT NOT NULL CHECK (status IN ('QUEUED', 'RUNNING')),"
        " FOREIGN KEY (a) REFERENCES datasets (id), run_key TEXT)"
    )
    rebuilt = rebuilt_table_sql(stored, "runs", "runs_v9")
    assert rebuilt.startswith("CREATE TABLE runs_v9 ( run_id TEXT PRIMARY KEY,")
    assert rebuilt.endswith("REFERENCES datasets (id), run_key TEXT)")
    assert "CHECK (status IN (" + ", ".join(f"'{s}'" for s in RUN_STATUSES) + "))" in rebuilt
    with pytest.raises(ValueError, match="unexpected definition"):
        rebuilt_table_sql("CREATE TABLE runs (run_id TEXT)", "runs", "runs_v9")


def test_the_queue_finishes_and_resumes_incomplete_runs() -> None:
    assert "INCOMPLETE" in FINISHED and "INCOMPLETE" in RESUMABLE
    assert set(RESUMABLE) < set(FINISHED) and "COMPLETED" not in RESUMABLE
    assert set(FINISHED) < set(RUN_STATUSES)


def test_an_incomplete_service_run_is_requeued(store: Any) -> None:
    queue = RunQueue(store)
    job, _ = queue.enqueue("svc-2", dataset_id="demo-v1", request={}, idempotency_key=None)
    assert queue.claim("w0", lease_seconds=30) is not None
    assert queue.finish(job.id, "w0", "INCOMPLETE", exit_code=1, error=None)
    again = queue.requeue(job.id)
    assert again is not None and again.status == "QUEUED" and again.claims == 0
    assert queue.finish(job.id, None, "COMPLETED", exit_code=0, error=None) is False  # not RUNNING
    assert queue.claim("w1", lease_seconds=30) is not None
    assert queue.finish(job.id, "w1", "COMPLETED", exit_code=0, error=None)
    assert queue.requeue(job.id) is not None
    done = queue.get(job.id)
    assert done is not None and done.status == "COMPLETED"  # a whole run is not resumed
    # ... unless its verdict is 75 (retry): a COMPLETED run whose attempts errored.
    errored, _ = queue.enqueue("svc-3", dataset_id="demo-v1", request={}, idempotency_key=None)
    assert queue.claim("w2", lease_seconds=30) is not None
    assert queue.finish(errored.id, "w2", "COMPLETED", exit_code=75, error="provider down")
    retried = queue.requeue(errored.id)
    assert retried is not None and retried.status == "QUEUED"


# --------------------------------------------------------------------------- the recorder

PROTOCOL = {"datasetId": "demo-v1", "datasetHash": "h1", "mode": "DETERMINISTIC", "attempts": 1}
DATASET = {"dataset_id": "demo-v1", "dataset_hash": "h1", "dataset_source": "golden/demo.jsonl"}


@pytest.mark.parametrize(
    "document,status",
    [
        ({"status": "COMPLETED"}, "COMPLETED"),
        # Errors are the verdict's (exit 75), not a status: the store says what run.json says.
        ({"status": "COMPLETED", "attemptsError": 1}, "COMPLETED"),
        (
            {"status": "INCOMPLETE", "stoppedEarly": {"reason": "-x", "attemptsNotRun": 4}},
            "INCOMPLETE",
        ),
        ({"status": "INCOMPLETE", "notStartedBeforeDeadline": 3}, "INCOMPLETE"),
        ({"status": "INCOMPLETE", "notStartedOverBudget": 2, "attemptsError": 1}, "INCOMPLETE"),
        ({"status": "INCOMPLETE", "duplicateAttempts": ["a attempt 1"]}, "INCOMPLETE"),
        ({"status": "INTERRUPTED", "interruptedBy": "SIGTERM"}, "INTERRUPTED"),
        ({"status": "INTERRUPTED", "pytestStatus": 2}, "INTERRUPTED"),
    ],
    ids=[
        "complete",
        "complete-with-errors",
        "stopped-by-x",
        "deadline",
        "budget",
        "duplicates",
        "sigterm",
        "ctrl-c",
    ],
)
def test_recorder_stores_the_status_of_the_documents_outcome(
    target: Target, document: dict[str, Any], status: str
) -> None:
    rec = RunRecorder(target.url, run_key=None, immediate=True, case_info=lambda c: {})
    rec.begin(PROTOCOL, {}, run_id="run-1", **DATASET)
    rec.finish({**document, "runId": "run-1"}, [])
    rec.close()
    assert rec.error is None
    with open_store(target.url) as store:
        row = store.get_run("run-1")
        assert row is not None and row.status == status


# --------------------------------------------------------------------------- a real session

FAILING_ONE = """
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "golden" / "generation" / "fixtures"


@pytest.fixture(scope="session")
def golden_provider():
    def answer(case):
        if case.id == "api-login-wrong-password-401":
            return "no test here"  # a contract FAIL: -x stops the session here
        return (FIXTURES / f"{case.id}.out.md").read_text(encoding="utf-8")

    return answer
"""


def test_a_session_cut_short_by_x_is_incomplete_in_summary_json_and_the_store(
    pytester: pytest.Pytester, golden_project: Path, target: Target
) -> None:
    pytester.makeconftest(FAILING_ONE)
    shutil.rmtree(golden_project / "baselines")  # a partial run against it would be 65
    result = pytester.runpytest(
        "--golden=generation-v1",
        "--golden-attempts=3",
        "-p",
        "no:cacheprovider",
        "-x",
        f"--golden-store={target.url}",
    )
    assert result.ret == 1, result.stdout.str()[-3000:]
    (summary_json,) = (golden_project / ".goldeval" / "runs").glob("*/summary.json")
    summary = json.loads(summary_json.read_text(encoding="utf-8"))
    run = json.loads((summary_json.parent / "run.json").read_text(encoding="utf-8"))
    assert run["stoppedEarly"]["attemptsNotRun"] > 0
    assert summary["status"] == run["status"] == "INCOMPLETE"
    with open_store(target.url) as store:
        (row,) = store.runs()
        assert row.status == "INCOMPLETE"
        assert row.summary is not None and row.summary["status"] == "INCOMPLETE"
