"""The run queue (``service_runs``) on SQLite and PostgreSQL: concurrent claims and creations
from several connections, lease take-over, ownership, paging."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from goldeval.server.settings import ServiceSettings
from goldeval.server.worker import MAX_CLAIMS, Worker
from goldeval.store import open_store
from goldeval.store.cursors import decode_cursor, encode_cursor
from goldeval.store.migrations import MIGRATIONS, SCHEMA_VERSION_DDL
from goldeval.store.queue import RunQueue
from tests.store.conftest import Target, target  # noqa: F401  (the store tests' fixture)

TS = "2026-01-01T00:00:00+00:00"


def _enqueue(queue: RunQueue, n: int, key: str | None = None) -> str:
    job, _ = queue.enqueue(
        f"run-{n:03d}", dataset_id="demo-v1", request={"n": n}, idempotency_key=key
    )
    return job.id


def test_concurrent_claims_take_every_run_exactly_once(target: Target) -> None:  # noqa: F811
    with open_store(target.url) as store:
        queue = RunQueue(store)
        ids = [_enqueue(queue, n) for n in range(30)]
    taken: list[tuple[str, str]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(6)

    def worker(name: str) -> None:
        with open_store(target.url) as own:  # one connection per worker, as in production
            q = RunQueue(own)
            barrier.wait()
            while (job := q.claim(name, lease_seconds=60)) is not None:
                with lock:
                    taken.append((job.id, name))

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(job_id for job_id, _ in taken) == sorted(ids)  # each once, none lost
    with open_store(target.url) as store:
        rows = RunQueue(store).page(limit=100)
    assert all(r.status == "RUNNING" and r.claims == 1 for r in rows)
    assert {r.worker for r in rows} == {name for _, name in taken}


def test_concurrent_identical_creations_make_one_run(target: Target) -> None:  # noqa: F811
    with open_store(target.url):
        pass  # migrate once, so the threads race on the insert, not on the migration
    results: list[tuple[str, bool]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(20)

    def create(n: int) -> None:
        with open_store(target.url) as own:
            barrier.wait()
            job, created = RunQueue(own).enqueue(
                f"candidate-{n}", dataset_id="demo-v1", request={}, idempotency_key="build-1"
            )
        with lock:
            results.append((job.id, created))

    threads = [threading.Thread(target=create, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(created for _, created in results) == 1
    assert len({job_id for job_id, _ in results}) == 1
    assert target.query("SELECT COUNT(*) FROM service_runs")[0][0] == 1


def test_a_dead_workers_run_is_taken_over_and_the_old_owner_loses_it(
    target: Target,  # noqa: F811
) -> None:
    with open_store(target.url) as store:
        queue = RunQueue(store)
        run_id = _enqueue(queue, 1)
        first = queue.claim("dead", lease_seconds=60)
        assert first is not None and first.id == run_id
        assert queue.claim("other", lease_seconds=60) is None  # the lease is fresh
        time.sleep(0.05)
        again = queue.claim("successor", lease_seconds=0.01)  # the lease ran out
        assert again is not None and again.id == run_id
        assert again.claims == 2 and again.worker == "successor"
        assert again.started_at == first.started_at
        assert queue.heartbeat(run_id, "dead") == (False, False)
        assert not queue.finish(run_id, "dead", "COMPLETED", exit_code=0, error=None)
        assert queue.heartbeat(run_id, "successor") == (True, False)
        queue.request_cancel(run_id)
        assert queue.heartbeat(run_id, "successor") == (True, True)
        assert queue.finish(run_id, "successor", "INTERRUPTED", exit_code=75, error="cancelled")
        done = queue.get(run_id)
        assert done is not None and done.status == "INTERRUPTED" and done.exit_code == 75
        with pytest.raises(ValueError):
            queue.finish(run_id, None, "RUNNING", exit_code=None, error=None)


def test_a_run_that_keeps_killing_its_workers_is_abandoned(
    target: Target,  # noqa: F811
    tmp_path: Path,
) -> None:
    settings = ServiceSettings.build(
        store_url=target.url, root=tmp_path, datasets=None, lease_seconds=0.001
    )
    with open_store(target.url) as store:
        queue = RunQueue(store)
        run_id = _enqueue(queue, 1)
        for n in range(MAX_CLAIMS):  # each worker "died": its lease ran out
            assert queue.claim(f"w{n}", lease_seconds=0) is not None
            time.sleep(0.01)
        time.sleep(0.01)
    worker = Worker(settings, "last", threading.Event())
    try:
        assert worker.run_once() is True  # took it, and gave up on it without running pytest
    finally:
        worker.close()
    with open_store(target.url) as store:
        queue = RunQueue(store)
        job = queue.get(run_id)
        assert job is not None and job.status == "FAILED"
        assert job.error is not None and "stopped 3 times" in job.error
        again = queue.requeue(run_id)
        assert again is not None and again.status == "QUEUED" and again.claims == 0


def test_a_resumed_run_is_queued_and_timed_from_its_resume(target: Target) -> None:  # noqa: F811
    """``/metrics``' oldest queued age counted a resumed run from its creation (a days-old
    run resumed fired a queue-age alert at once), and its run duration included the time it
    spent finished before the resume."""
    with open_store(target.url) as store:
        queue = RunQueue(store)
        run_id = _enqueue(queue, 1)
        assert queue.claim("w1", lease_seconds=60) is not None
        assert queue.finish(run_id, "w1", "INTERRUPTED", exit_code=75, error="stopped")
        time.sleep(1.2)
        before = queue.metrics().counters
        assert queue.requeue(run_id) is not None
        oldest = queue.metrics().oldest_queued
        job = queue.get(run_id)
        assert job is not None and oldest is not None
        assert (oldest - job.created_at).total_seconds() > 1.0  # queued again, now
        assert job.started_at is None
        claimed = queue.claim("w2", lease_seconds=60)
        assert claimed is not None and claimed.started_at is not None
        assert (claimed.started_at - job.created_at).total_seconds() > 1.0
        assert queue.finish(run_id, "w2", "COMPLETED", exit_code=0, error=None)
        after = queue.metrics().counters
        assert after[("run_duration_count", "")] == before[("run_duration_count", "")] + 1
        # The resumed execution took well under the second the run sat finished.
        sum_key = ("run_duration_sum", "")
        assert after[sum_key] - before[sum_key] < 1.0
        fast = ("run_duration_bucket", "1.0")
        assert after[fast] == before[fast] + 1


def test_pages_are_newest_first_and_filtered(target: Target) -> None:  # noqa: F811
    with open_store(target.url) as store:
        queue = RunQueue(store)
        ids = [_enqueue(queue, n) for n in range(5)]
        queue.claim("w", lease_seconds=60)
        newest_first = list(reversed(ids))
        first = queue.page(limit=2)
        assert [r.id for r in first] == newest_first[:2]
        cursor = (first[-1].created_at, first[-1].id)
        assert [r.id for r in queue.page(limit=10, before=cursor)] == newest_first[2:]
        assert [r.id for r in queue.page(limit=10, status="RUNNING")] == [ids[0]]
        assert queue.page(limit=10, dataset_id="other") == []
        later = datetime.now(timezone.utc) + timedelta(hours=1)
        assert queue.page(limit=10, since=later) == []
        assert queue.runs_by_status() == {"QUEUED": 4, "RUNNING": 1}


def test_cursors_round_trip_and_reject_garbage() -> None:
    assert decode_cursor(encode_cursor("a", "b/c"), 2) == ["a", "b/c"]
    for bad in ("!!", "e30", encode_cursor("only-one")):
        with pytest.raises(ValueError, match="cursor"):
            decode_cursor(bad, 2)


def test_migration_7_scopes_idempotency_keys(target: Target) -> None:  # noqa: F811
    """A store made before migration 7: its runs keep their keys (one shared owner), and new
    keys are scoped to the API key (owner) that used them."""
    target.execute(SCHEMA_VERSION_DDL[target.backend])
    for step in MIGRATIONS[target.backend][:6]:
        for statement in (*step.statements, *step.after):
            target.execute(statement)
        target.execute("INSERT INTO schema_version VALUES (?, ?, ?)", (step.version, "x", TS))
    target.execute(
        "INSERT INTO service_runs (id, idempotency_key, status, dataset_id, request, run_key,"
        " created_at) VALUES ('old', 'ci-1', 'COMPLETED', 'demo-v1', '{}', 'svc-old', ?)",
        (TS,),
    )
    with open_store(target.url) as store:
        assert store.schema_version() == MIGRATIONS[target.backend][-1].version
        queue = RunQueue(store)
        again, created = queue.enqueue(
            "new-1", dataset_id="demo-v1", request={}, idempotency_key="ci-1"
        )
        assert (again.id, created) == ("old", False)
        mine, created = queue.enqueue(
            "new-2", dataset_id="demo-v1", request={}, idempotency_key="ci-1", owner="key-a"
        )
        assert (mine.id, created) == ("new-2", True)
        same, created = queue.enqueue(
            "new-3", dataset_id="demo-v1", request={}, idempotency_key="ci-1", owner="key-a"
        )
        assert (same.id, created) == ("new-2", False)
        theirs, created = queue.enqueue(
            "new-4", dataset_id="demo-v1", request={}, idempotency_key="ci-1", owner="key-b"
        )
        assert (theirs.id, created) == ("new-4", True)
