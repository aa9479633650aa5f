"""Schema 11: the exit decision recorded on the service's queue row (issue 33: after a refused
resume ``exitDecision.code`` said 75 while ``exitCode`` was 65, because the API rebuilt the
decision from the exit code and the log instead of reading one recorded fact).

On SQLite and on PostgreSQL (the fixture starts it)."""

from __future__ import annotations

import pytest

from goldeval.store import LATEST_VERSION, open_store
from goldeval.store.queue import RunQueue
from tests.store.conftest import UNDO_SCHEMA_13, Target


def _ran(queue: RunQueue, run_id: str) -> None:
    queue.enqueue(run_id, dataset_id="demo-v1", request={}, idempotency_key=None)
    claimed = queue.claim("w1", lease_seconds=30)
    assert claimed is not None and claimed.id == run_id


def test_the_decision_is_written_with_the_status_and_cleared_by_a_resume(target: Target) -> None:
    with open_store(target.url) as store:
        queue = RunQueue(store)
        _ran(queue, "q1")
        decision = {"code": 65, "reason": "the run key's protocol differs: dataset hash"}
        assert queue.finish("q1", "w1", "FAILED", exit_code=65, error="x", decision=decision)
        job = queue.get("q1")
        assert job is not None and (job.exit_code, job.exit_decision) == (65, decision)
        # A decision whose code is not the exit code is refused: the row never says two things.
        _ran(queue, "q2")
        with pytest.raises(ValueError, match="not exit code"):
            queue.finish("q2", "w1", "FAILED", exit_code=65, error=None, decision={"code": 75})
        # Resumed: the old decision goes with the old exit code.
        again = queue.requeue("q1")
        assert again is not None and again.exit_decision is None and again.exit_code is None


def test_schema_10_rows_upgrade_with_no_decision_and_new_ends_record_one(target: Target) -> None:
    with open_store(target.url) as store:
        queue = RunQueue(store)
        _ran(queue, "old")
        assert queue.finish("old", "w1", "COMPLETED", exit_code=0, error=None)
        _ran(queue, "pending")
    # Back to schema 10: no exit_decision column (nor schema 12's attempts.variant, nor
    # schema 13's sharing: its view first, which refers to attempts.variant).
    for statement in UNDO_SCHEMA_13:
        target.execute(statement)
    target.execute("ALTER TABLE service_runs DROP COLUMN exit_decision")
    target.execute("ALTER TABLE attempts DROP COLUMN variant")
    target.execute("DELETE FROM schema_version WHERE version >= ?", (11,))
    assert LATEST_VERSION == 15
    with open_store(target.url) as store:
        assert store.schema_version() == LATEST_VERSION
        queue = RunQueue(store)
        old = queue.get("old")
        assert old is not None and old.status == "COMPLETED" and old.exit_code == 0
        assert old.exit_decision is None  # ended before: the API rebuilds its decision
        decision = {"code": 0, "reason": "all 2 attempts graded, gate passed"}
        assert queue.finish(
            "pending", "w1", "COMPLETED", exit_code=0, error=None, decision=decision
        )
        job = queue.get("pending")
        assert job is not None and job.exit_decision == decision
