"""A run's attempts by status (``run_counts``, schema 14): kept as attempts are written, so
``attempt_counts`` reads a few rows instead of counting the run's attempts (issue 33), and
always equal to that count — fresh, resumed, rerun, sharing another run's rows, after its
owner is deleted, and after the migration fills them for runs written before it."""

from __future__ import annotations

from typing import Any

from goldeval.store import LATEST_VERSION, Store, open_store
from tests.store.conftest import UNDO_SCHEMA_13, Target
from tests.store.test_sharing import CASES, _owner, _records, _resume, _run


def _counted(target: Target, run_id: str) -> dict[str, int]:
    """The count ``attempt_counts`` used to make: every attempt of the run, shared or not."""
    rows = target.query(
        "SELECT status, COUNT(*) FROM run_attempts WHERE run_id = ? GROUP BY status", (run_id,)
    )
    return {str(s): int(n) for s, n in rows}


def _check(store: Store, target: Target, *run_ids: str) -> None:
    for run_id in run_ids:
        assert store.attempt_counts(run_id) == _counted(target, run_id), run_id


def test_counts_follow_writes_reruns_sharing_and_deletes(store: Store, target: Target) -> None:
    first = _records(100)
    _resume(store, "run-1")
    store.record_cases("run-1", [{"caseId": c, "prompt": f"p {c}"} for c in CASES])
    store.record_attempts("run-1", first[:300])
    _check(store, target, "run-1")  # while running
    store.record_attempts("run-1", first[200:])  # a re-sent batch overlapping the first
    store.finish_run("run-1", "COMPLETED", {"status": "COMPLETED"})
    _check(store, target, "run-1")
    assert sum(store.attempt_counts("run-1").values()) == len(first)

    _run(store, "run-2", _records(5000))  # the same rows: run-2 shares run-1's
    assert _owner(target, "run-2") == "run-1"
    _check(store, target, "run-1", "run-2")
    assert store.attempt_counts("run-2") == store.attempt_counts("run-1")

    # A rerun of run-2's errors: it gets its own rows back, ERROR attempts become PASS; a
    # FAIL re-sent as PASS stays FAIL (the store keeps it).
    errors = [r for r in _records(7000) if r["status"] in ("ERROR", "FAIL")]
    _resume(store, "run-2")
    store.record_attempts("run-2", [{**r, "status": "PASS"} for r in errors])
    _check(store, target, "run-1", "run-2")
    assert "ERROR" not in store.attempt_counts("run-2")
    assert store.attempt_counts("run-2")["FAIL"] == store.attempt_counts("run-1")["FAIL"]

    _run(store, "run-3", _records(9000))  # shares run-1's rows again
    assert _owner(target, "run-3") == "run-1"
    assert store.delete_runs(["run-1"]) == 1  # run-3 is handed the rows
    _check(store, target, "run-2", "run-3")
    assert store.attempt_counts("run-3") == _counts_of(_records(0))
    assert target.query("SELECT COUNT(*) FROM run_counts WHERE run_id = 'run-1'") == [(0,)]


def _counts_of(records: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        out[r["status"]] = out.get(r["status"], 0) + 1
    return out


def test_the_migration_fills_the_counts_of_runs_written_before(target: Target) -> None:
    with open_store(target.url) as store:
        _run(store, "run-1", _records(100))
        _resume(store, "run-3")
        store.record_attempts("run-3", _records(0)[:100])  # still running
    # Back to schema 12 (no run counts, no shared rows), then opened again: 13 and 14 run.
    for statement in UNDO_SCHEMA_13:
        target.execute(statement)
    target.execute("DELETE FROM schema_version WHERE version >= ?", (13,))
    with open_store(target.url) as store:
        assert store.schema_version() == LATEST_VERSION
        for run_id in ("run-1", "run-3"):
            expected = _counts_of(_records(0)) if run_id != "run-3" else None
            counts = store.attempt_counts(run_id)
            assert counts == _counted(target, run_id)
            if expected is not None:
                assert counts == expected
        assert sum(store.attempt_counts("run-3").values()) == 100
