"""The evaluation service's run queue (``service_runs``) and the paged reads it serves.

One row per run requested over HTTP (``goldeval serve``). The row is the service's view of the
run — QUEUED → RUNNING → COMPLETED / INCOMPLETE / FAILED / INTERRUPTED, who runs it, its
idempotency key, its cancellation flag — and points at the store run the pytest plugin writes
through ``run_key`` (``svc-<id>``), so the attempts, cases, summary and artifact inventory are the
plugin's own records, never a copy.

Claiming is safe across processes: on PostgreSQL ``SELECT ... FOR UPDATE SKIP LOCKED`` lets
several workers on several machines take different rows at once; on SQLite every write is a
``BEGIN IMMEDIATE`` transaction, so claims are serialised by the file's write lock. A worker
renews its claim (``heartbeat_at``) while the run executes; a row RUNNING whose heartbeat is
older than the lease belonged to a worker that died and is claimed again (the run key makes
the plugin skip every attempt already graded).

A pure library (no pytest, no web framework).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple, cast

from goldeval.store import counters
from goldeval.store.base import (
    SqlStore,
    Store,
    StoreError,
    json_text,
)
from goldeval.verdict.exit_codes import INFRA
from goldeval.verdict.run_status import UNFINISHED

#: Statuses a run ends with (INCOMPLETE: cut short by -x/--maxfail, its deadline or budget).
FINISHED = ("COMPLETED", "INCOMPLETE", "FAILED", "INTERRUPTED")
#: Finished statuses that ``requeue`` (``POST .../resume``) always puts back in the queue; a
#: run of another status is requeued when its exit decision is 75 (retry). The rule is the
#: verdict's (:func:`goldeval.verdict.run_status.resumable`); each resumes by its run key,
#: grading only the attempts not graded yet and retrying the retryable ERROR ones.
RESUMABLE = UNFINISHED


class _Columns(NamedTuple):
    """One ``service_runs`` row as :data:`_COLUMNS` selects it, read by name."""

    id: str
    idempotency_key: str | None
    status: str
    dataset_id: str
    request: Any
    run_key: str
    run_id: str | None
    run_dir: str | None
    worker: str | None
    claims: int
    cancel_requested: int
    exit_code: int | None
    error: str | None
    created_at: Any
    started_at: Any
    heartbeat_at: Any
    finished_at: Any
    exit_decision: Any


_COLUMNS = ", ".join(_Columns._fields)


def _marks(values: tuple[str, ...]) -> str:
    return ", ".join("?" for _ in values)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class ServiceRun:
    """One row of ``service_runs``."""

    id: str
    idempotency_key: str | None
    status: str
    dataset_id: str
    request: dict[str, Any]
    run_key: str
    run_id: str | None
    """The store run the plugin created (None until the run began)."""
    run_dir: str | None
    worker: str | None
    claims: int
    """How many times a worker took the run since it was queued (more than 1: taken over
    after a worker died)."""
    cancel_requested: bool
    exit_code: int | None
    error: str | None
    created_at: datetime
    started_at: datetime | None
    heartbeat_at: datetime | None
    finished_at: datetime | None
    exit_decision: dict[str, Any] | None = None
    """The exit decision (``{"code", "reason"}``, as run.json's ``exitDecision``) recorded
    when the run ended (schema 11); None while it runs, and for runs ended before schema 11."""


@dataclass(frozen=True)
class QueueMetrics:
    """The store's side of a ``/metrics`` scrape (:meth:`RunQueue.metrics`)."""

    counters: dict[tuple[str, str], float]
    """(name, labels) -> value, see :mod:`goldeval.store.counters`."""
    oldest_queued: datetime | None
    busy_workers: int


class RunQueue:
    """Queue operations over an opened SQL store (SQLite or PostgreSQL)."""

    def __init__(self, store: Store) -> None:
        if not isinstance(store, SqlStore):
            raise StoreError(
                f"{store!r} is not a SQL store: the service needs SQLite or PostgreSQL"
            )
        self.store = store
        self._pg = store.backend == "postgresql"

    # ---- helpers

    def _ts(self, value: datetime) -> Any:
        return self.store.ts_param(value)

    def _row(self, raw: tuple[Any, ...]) -> ServiceRun:
        row = _Columns(*raw)
        ts = self.store.ts_value
        request = row.request
        if isinstance(request, (str, bytes, bytearray)):
            request = json.loads(request)
        decision = row.exit_decision
        if isinstance(decision, (str, bytes, bytearray)):
            decision = json.loads(decision)

        def when(value: Any) -> datetime | None:
            return ts(value) if value is not None else None

        return ServiceRun(
            id=row.id,
            idempotency_key=row.idempotency_key,
            status=row.status,
            dataset_id=row.dataset_id,
            request=cast(dict[str, Any], request),
            run_key=row.run_key,
            run_id=row.run_id,
            run_dir=row.run_dir,
            worker=row.worker,
            claims=int(row.claims),
            cancel_requested=bool(row.cancel_requested),
            exit_code=None if row.exit_code is None else int(row.exit_code),
            error=row.error,
            created_at=ts(row.created_at),
            started_at=when(row.started_at),
            heartbeat_at=when(row.heartbeat_at),
            finished_at=when(row.finished_at),
            exit_decision=cast(dict[str, Any], decision) if isinstance(decision, dict) else None,
        )

    # ---- writes

    def enqueue(
        self,
        run_id: str,
        *,
        dataset_id: str,
        request: dict[str, Any],
        idempotency_key: str | None,
        owner: str = "",
    ) -> tuple[ServiceRun, bool]:
        """Queue a run; with an idempotency key ``owner`` already used, the existing run
        (created False). ``owner`` names who may reuse the key (the API key's stable digest):
        the same key from another owner is another run.

        The unique index on ``(idempotency_owner, idempotency_key)`` decides races: of any
        number of concurrent identical requests exactly one inserts, the others read its row.
        """
        now = self._ts(_utcnow())
        scope = owner if idempotency_key is not None else None
        with self.store.transaction("enqueue") as tx:
            inserted = tx.execute(
                f"INSERT INTO service_runs ({_COLUMNS}, idempotency_owner, queued_at) VALUES"
                " (?, ?, 'QUEUED', ?, ?, ?, NULL, NULL, NULL, 0, 0, NULL, NULL, ?, NULL, NULL,"
                " NULL, NULL, ?, ?) ON CONFLICT DO NOTHING",
                (
                    run_id,
                    idempotency_key,
                    dataset_id,
                    json_text(request),
                    f"svc-{run_id}",
                    now,
                    scope,
                    now,
                ),
            )
            values: tuple[str, ...]
            if inserted == 1:
                counters.bump(tx, counters.run_moved(dataset_id, None, "QUEUED"))
                where, values = "id = ?", (run_id,)
            elif idempotency_key is not None:
                where = "idempotency_owner = ? AND idempotency_key = ?"
                values = (owner, idempotency_key)
            else:
                raise StoreError(f"enqueue: run id {run_id!r} exists already")
            rows = tx.query(f"SELECT {_COLUMNS} FROM service_runs WHERE {where}", values)
        if not rows:
            raise StoreError("enqueue: the run vanished while it was created")
        return self._row(rows[0]), inserted == 1

    def claim(self, worker: str, *, lease_seconds: float) -> ServiceRun | None:
        """Take the oldest QUEUED run (or one whose worker stopped renewing its lease)."""
        now = _utcnow()
        stale = self._ts(now - timedelta(seconds=lease_seconds))
        lock = " FOR UPDATE SKIP LOCKED" if self._pg else ""
        with self.store.transaction("claim") as tx:
            rows = tx.query(
                "SELECT id, status, dataset_id FROM service_runs WHERE status = 'QUEUED'"
                " OR (status = 'RUNNING' AND heartbeat_at < ?)"
                f" ORDER BY created_at, id LIMIT 1{lock}",
                (stale,),
            )
            if not rows:
                return None
            run_id, old, dataset_id = rows[0]
            tx.execute(
                "UPDATE service_runs SET status = 'RUNNING', worker = ?, claims = claims + 1,"
                " started_at = COALESCE(started_at, ?), heartbeat_at = ? WHERE id = ?",
                (worker, self._ts(now), self._ts(now), run_id),
            )
            counters.bump(tx, counters.run_moved(str(dataset_id), str(old), "RUNNING"))
            got = tx.query(f"SELECT {_COLUMNS} FROM service_runs WHERE id = ?", (run_id,))
        return self._row(got[0])

    def heartbeat(self, run_id: str, worker: str) -> tuple[bool, bool]:
        """Renew the claim: (still ours, cancellation requested)."""
        with self.store.transaction("heartbeat") as tx:
            changed = tx.execute(
                "UPDATE service_runs SET heartbeat_at = ?"
                " WHERE id = ? AND worker = ? AND status = 'RUNNING'",
                (self._ts(_utcnow()), run_id, worker),
            )
            rows = tx.query("SELECT cancel_requested FROM service_runs WHERE id = ?", (run_id,))
        cancel = False
        if rows:
            (flag,) = rows[0]
            cancel = bool(flag)
        return changed == 1, cancel

    def link(self, run_id: str, store_run_id: str, run_dir: str | None) -> None:
        """Record the store run (and its artifact folder) the plugin created for ``run_id``."""
        with self.store.transaction("link") as tx:
            tx.execute(
                "UPDATE service_runs SET run_id = ?, run_dir = ? WHERE id = ?",
                (store_run_id, run_dir, run_id),
            )

    def finish(
        self,
        run_id: str,
        worker: str | None,
        status: str,
        *,
        exit_code: int | None,
        error: str | None,
        decision: dict[str, Any] | None = None,
    ) -> bool:
        """Set the final status (only while ``worker`` still owns the run, if given), with the
        exit decision (``{"code", "reason"}``) the run ended with, when one was made."""
        if status not in FINISHED:
            raise ValueError(f"finish: {status!r} is not one of {FINISHED}")
        if decision is not None and decision.get("code") != exit_code:
            raise ValueError(f"finish: decision {decision!r} is not exit code {exit_code}")
        now = _utcnow()
        sql = (
            "UPDATE service_runs SET status = ?, exit_code = ?, error = ?, finished_at = ?,"
            " exit_decision = ? WHERE id = ? AND status = 'RUNNING'"
        )
        recorded = json_text(decision) if decision is not None else None
        params: tuple[Any, ...] = (status, exit_code, error, self._ts(now), recorded, run_id)
        if worker is not None:
            sql += " AND worker = ?"
            params = (*params, worker)
        with self.store.transaction("finish") as tx:
            if tx.execute(sql, params) != 1:
                return False
            rows = tx.query(
                "SELECT dataset_id, started_at FROM service_runs WHERE id = ?", (run_id,)
            )
            dataset_id, started = rows[0]
            deltas = counters.run_moved(str(dataset_id), "RUNNING", status)
            if started is not None:
                seconds = (now - self.store.ts_value(started)).total_seconds()
                deltas.update(counters.run_duration(seconds))
            counters.bump(tx, deltas)
            return True

    def request_cancel(self, run_id: str, by: str = "") -> ServiceRun | None:
        """Cancel: a QUEUED run ends INTERRUPTED at once, a RUNNING one is flagged for its
        worker (which stops the run within a heartbeat). Finished runs are left as they are.

        ``by`` (an API key's label, ``key#N``) is kept in ``error`` as "cancelled by key#N": the
        worker reports it when the run ends (no column of its own: the row has one reason)."""
        now = self._ts(_utcnow())
        who = f"cancelled by {by}" if by else "cancelled"
        with self.store.transaction("cancel") as tx:
            stopped = tx.execute(
                "UPDATE service_runs SET status = 'INTERRUPTED', cancel_requested = 1,"
                " error = ?, finished_at = ?"
                " WHERE id = ? AND status = 'QUEUED'",
                (f"{who} before it started", now, run_id),
            )
            tx.execute(
                "UPDATE service_runs SET cancel_requested = 1, error = ?"
                " WHERE id = ? AND status = 'RUNNING'",
                (who, run_id),
            )
            rows = tx.query(f"SELECT {_COLUMNS} FROM service_runs WHERE id = ?", (run_id,))
            if stopped == 1:
                dataset_id = str(rows[0][3])
                counters.bump(tx, counters.run_moved(dataset_id, "QUEUED", "INTERRUPTED"))
        return self._row(rows[0]) if rows else None

    def requeue(self, run_id: str) -> ServiceRun | None:
        """Put a finished run back in the queue (it resumes by its run key) when the verdict
        says resuming can change it (:func:`~goldeval.verdict.run_status.resumable`, here in
        SQL so the check and the change are one statement): :data:`RESUMABLE`, or exit 75."""
        where = (
            f"id = ? AND status IN ({_marks(FINISHED)})"
            f" AND (status IN ({_marks(RESUMABLE)}) OR exit_code = ?)"
        )
        params = (run_id, *FINISHED, *RESUMABLE, INFRA)
        with self.store.transaction("requeue") as tx:
            before = tx.query(f"SELECT status, dataset_id FROM service_runs WHERE {where}", params)
            # Queued again now (the queue's age counts from here, not from its creation),
            # and started again when claimed (the run duration measures this execution, not
            # the time it spent finished before the resume).
            changed = tx.execute(
                "UPDATE service_runs SET status = 'QUEUED', cancel_requested = 0, error = NULL,"
                " exit_code = NULL, exit_decision = NULL, finished_at = NULL, worker = NULL,"
                f" claims = 0, queued_at = ?, started_at = NULL WHERE {where}",
                (self._ts(_utcnow()), *params),
            )
            rows = tx.query(f"SELECT {_COLUMNS} FROM service_runs WHERE id = ?", (run_id,))
            if changed == 1 and before:
                old, dataset_id = before[0]
                counters.bump(tx, counters.run_moved(str(dataset_id), str(old), "QUEUED"))
        return self._row(rows[0]) if rows else None

    def delete(self, run_id: str) -> bool:
        """Delete a finished run: its queue row, then its store runs (pages, inventory and the
        contents no other run uses) through the store's own :meth:`delete_runs`."""
        with self.store.transaction("delete") as tx:
            rows = tx.query(
                "SELECT run_key, status, dataset_id FROM service_runs WHERE id = ?", (run_id,)
            )
            if not rows or rows[0][1] not in FINISHED:
                return False
            run_key, status, dataset_id = rows[0]
            store_runs = [
                str(store_run)
                for (store_run,) in tx.query(
                    "SELECT run_id FROM runs WHERE run_key = ?", (run_key,)
                )
            ]
            if tx.execute("DELETE FROM service_runs WHERE id = ?", (run_id,)) != 1:
                return False
            counters.bump(tx, counters.run_moved(str(dataset_id), str(status), None))
        # A crash here leaves a store run without its queue row: `goldeval prune` removes it.
        self.store.delete_runs(store_runs)
        return True

    # ---- reads

    def get(self, run_id: str) -> ServiceRun | None:
        with self.store.read("get") as tx:
            rows = tx.query(f"SELECT {_COLUMNS} FROM service_runs WHERE id = ?", (run_id,))
        return self._row(rows[0]) if rows else None

    def idempotency_owners(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        """Who used each run's idempotency key (the API key's stable digest; None: no key):
        a key is shown only to its owner."""
        if not run_ids:
            return {}
        marks = ", ".join("?" for _ in run_ids)
        with self.store.read("idempotency_owners") as tx:
            rows = tx.query(
                f"SELECT id, idempotency_owner FROM service_runs WHERE id IN ({marks})",
                tuple(run_ids),
            )
        return {str(i): (str(o) if o is not None else None) for i, o in rows}

    def page(
        self,
        *,
        limit: int,
        dataset_id: str | None = None,
        status: str | None = None,
        since: datetime | None = None,
        before: tuple[datetime, str] | None = None,
    ) -> list[ServiceRun]:
        """Newest first: at most ``limit`` runs created before the cursor ``before``."""
        where: list[str] = []
        params: list[Any] = []
        if dataset_id is not None:
            where.append("dataset_id = ?")
            params.append(dataset_id)
        if status is not None:
            where.append("status = ?")
            params.append(status)
        if since is not None:
            where.append("created_at >= ?")
            params.append(self._ts(since))
        if before is not None:
            where.append("(created_at, id) < (?, ?)")
            params.extend((self._ts(before[0]), before[1]))
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        with self.store.read("page") as tx:
            rows = tx.query(
                f"SELECT {_COLUMNS} FROM service_runs{clause}"
                " ORDER BY created_at DESC, id DESC LIMIT ?",
                (*params, int(limit)),
            )
        return [self._row(r) for r in rows]

    def change_marker(self) -> str:
        """A value that changes whenever the run index (``/ui/``) could: a run queued or deleted
        (the row count), the newest queued, the newest finished (a run that finishes, again
        after a resume too, is the newest finished). The key of the service's page cache."""
        with self.store.read("change_marker") as tx:
            ((count, created, finished),) = tx.query(
                "SELECT COUNT(*), MAX(created_at), MAX(finished_at) FROM service_runs"
            )
        return f"{int(count)}|{created}|{finished}"

    def store_run_id(self, run_key: str) -> str | None:
        with self.store.read("store_run_id") as tx:
            rows = tx.query("SELECT run_id FROM runs WHERE run_key = ?", (run_key,))
        if not rows:
            return None
        (store_run,) = rows[0]
        return str(store_run)

    def count_attempts(self, store_run_id: str) -> dict[str, int]:
        return self.store.attempt_counts(store_run_id)

    def runs_by_status(self) -> dict[str, int]:
        with self.store.read("runs_by_status") as tx:
            rows = tx.query("SELECT status, COUNT(*) FROM service_runs GROUP BY status")
        return {str(s): int(n) for s, n in rows}

    def metrics(self) -> QueueMetrics:
        """What ``/metrics`` shows, in three small reads: the counters table, the oldest QUEUED
        row (the status index's first entry) and the RUNNING rows (one per busy worker). None
        of them reads attempts, so a scrape costs the same at 100 or 1,000,000 attempts."""
        with self.store.read("metrics") as tx:
            values = counters.read(tx)
            oldest = tx.query(
                "SELECT queued_at FROM service_runs WHERE status = 'QUEUED'"
                " ORDER BY queued_at, id LIMIT 1"
            )
            running = tx.query(
                "SELECT DISTINCT worker FROM service_runs WHERE status = 'RUNNING'"
                " AND worker IS NOT NULL"
            )
        return QueueMetrics(
            counters=values,
            oldest_queued=self.store.ts_value(oldest[0][0]) if oldest else None,
            busy_workers=len(running),
        )
