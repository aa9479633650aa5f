"""The evaluation service's run queue (``service_runs``) and the paged reads it serves.

One row per run requested over HTTP (``goldeval serve``). The row is the service's view of the
run — QUEUED → RUNNING → COMPLETED / FAILED / INTERRUPTED, who runs it, its idempotency key,
its cancellation flag — and points at the store run the pytest plugin writes through
``run_key`` (``svc-<id>``), so the attempts, cases, summary and artifact inventory are the
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

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, cast

from goldeval.store.base import (
    ATTEMPT_ROW_COLUMNS,
    ATTEMPT_ROW_JOIN,
    SqlStore,
    Store,
    StoreError,
    json_text,
)

FINISHED = ("COMPLETED", "FAILED", "INTERRUPTED")

_COLUMNS = (
    "id, idempotency_key, status, dataset_id, request, run_key, run_id, run_dir, worker,"
    " claims, cancel_requested, exit_code, error, created_at, started_at, heartbeat_at,"
    " finished_at"
)


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


@dataclass(frozen=True)
class ResultRow:
    """One stored attempt (a page of ``GET .../results``)."""

    case_id: str
    index: int
    model: str
    status: str
    record: dict[str, Any]


def encode_cursor(*parts: str) -> str:
    """An opaque page cursor (URL-safe base64 of a JSON list)."""
    raw = json.dumps(list(parts), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, size: int) -> list[str]:
    """The parts of a cursor made by :func:`encode_cursor`; ValueError when it is not one."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        parts = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise ValueError("cursor is not one this server returned") from None
    if (
        not isinstance(parts, list)
        or len(parts) != size
        or not all(isinstance(p, str) for p in parts)
    ):
        raise ValueError("cursor is not one this server returned")
    return cast(list[str], parts)


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

    def _row(self, row: Sequence[Any]) -> ServiceRun:
        ts = self.store.ts_value
        request = row[4]
        if isinstance(request, (str, bytes, bytearray)):
            request = json.loads(request)
        return ServiceRun(
            id=row[0],
            idempotency_key=row[1],
            status=row[2],
            dataset_id=row[3],
            request=cast(dict[str, Any], request),
            run_key=row[5],
            run_id=row[6],
            run_dir=row[7],
            worker=row[8],
            claims=int(row[9]),
            cancel_requested=bool(row[10]),
            exit_code=None if row[11] is None else int(row[11]),
            error=row[12],
            created_at=ts(row[13]),
            started_at=ts(row[14]) if row[14] is not None else None,
            heartbeat_at=ts(row[15]) if row[15] is not None else None,
            finished_at=ts(row[16]) if row[16] is not None else None,
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
        with self.store._transaction("enqueue") as tx:
            inserted = tx.execute(
                f"INSERT INTO service_runs ({_COLUMNS}, idempotency_owner) VALUES"
                " (?, ?, 'QUEUED', ?, ?, ?, NULL, NULL, NULL, 0, 0, NULL, NULL, ?, NULL, NULL,"
                " NULL, ?) ON CONFLICT DO NOTHING",
                (
                    run_id,
                    idempotency_key,
                    dataset_id,
                    json_text(request),
                    f"svc-{run_id}",
                    now,
                    scope,
                ),
            )
            values: tuple[str, ...]
            if inserted == 1:
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
        with self.store._transaction("claim") as tx:
            rows = tx.query(
                "SELECT id FROM service_runs WHERE status = 'QUEUED'"
                " OR (status = 'RUNNING' AND heartbeat_at < ?)"
                f" ORDER BY created_at, id LIMIT 1{lock}",
                (stale,),
            )
            if not rows:
                return None
            run_id = rows[0][0]
            tx.execute(
                "UPDATE service_runs SET status = 'RUNNING', worker = ?, claims = claims + 1,"
                " started_at = COALESCE(started_at, ?), heartbeat_at = ? WHERE id = ?",
                (worker, self._ts(now), self._ts(now), run_id),
            )
            got = tx.query(f"SELECT {_COLUMNS} FROM service_runs WHERE id = ?", (run_id,))
        return self._row(got[0])

    def heartbeat(self, run_id: str, worker: str) -> tuple[bool, bool]:
        """Renew the claim: (still ours, cancellation requested)."""
        with self.store._transaction("heartbeat") as tx:
            changed = tx.execute(
                "UPDATE service_runs SET heartbeat_at = ?"
                " WHERE id = ? AND worker = ? AND status = 'RUNNING'",
                (self._ts(_utcnow()), run_id, worker),
            )
            rows = tx.query("SELECT cancel_requested FROM service_runs WHERE id = ?", (run_id,))
        return changed == 1, bool(rows and rows[0][0])

    def link(self, run_id: str, store_run_id: str, run_dir: str | None) -> None:
        """Record the store run (and its artifact folder) the plugin created for ``run_id``."""
        with self.store._transaction("link") as tx:
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
    ) -> bool:
        """Set the final status (only while ``worker`` still owns the run, if given)."""
        if status not in FINISHED:
            raise ValueError(f"finish: {status!r} is not one of {FINISHED}")
        sql = (
            "UPDATE service_runs SET status = ?, exit_code = ?, error = ?, finished_at = ?"
            " WHERE id = ? AND status = 'RUNNING'"
        )
        params: tuple[Any, ...] = (status, exit_code, error, self._ts(_utcnow()), run_id)
        if worker is not None:
            sql += " AND worker = ?"
            params = (*params, worker)
        with self.store._transaction("finish") as tx:
            return tx.execute(sql, params) == 1

    def request_cancel(self, run_id: str, by: str = "") -> ServiceRun | None:
        """Cancel: a QUEUED run ends INTERRUPTED at once, a RUNNING one is flagged for its
        worker (which stops the run within a heartbeat). Finished runs are left as they are.

        ``by`` (an API key's label, ``key#N``) is kept in ``error`` as "cancelled by key#N": the
        worker reports it when the run ends (no column of its own: the row has one reason)."""
        now = self._ts(_utcnow())
        who = f"cancelled by {by}" if by else "cancelled"
        with self.store._transaction("cancel") as tx:
            tx.execute(
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
        return self._row(rows[0]) if rows else None

    def requeue(self, run_id: str) -> ServiceRun | None:
        """Put an INTERRUPTED or FAILED run back in the queue (it resumes by its run key)."""
        with self.store._transaction("requeue") as tx:
            tx.execute(
                "UPDATE service_runs SET status = 'QUEUED', cancel_requested = 0, error = NULL,"
                " exit_code = NULL, finished_at = NULL, worker = NULL, claims = 0"
                " WHERE id = ? AND status IN ('INTERRUPTED', 'FAILED')",
                (run_id,),
            )
            rows = tx.query(f"SELECT {_COLUMNS} FROM service_runs WHERE id = ?", (run_id,))
        return self._row(rows[0]) if rows else None

    def delete(self, run_id: str) -> bool:
        """Delete a finished run: its queue row, then its store runs (pages, inventory and the
        contents no other run uses) through the store's own :meth:`delete_runs`."""
        with self.store._transaction("delete") as tx:
            rows = tx.query("SELECT run_key, status FROM service_runs WHERE id = ?", (run_id,))
            if not rows or rows[0][1] not in FINISHED:
                return False
            run_key = rows[0][0]
            store_runs = [
                str(r[0]) for r in tx.query("SELECT run_id FROM runs WHERE run_key = ?", (run_key,))
            ]
            if tx.execute("DELETE FROM service_runs WHERE id = ?", (run_id,)) != 1:
                return False
        # A crash here leaves a store run without its queue row: `goldeval prune` removes it.
        self.store.delete_runs(store_runs)
        return True

    # ---- reads

    def get(self, run_id: str) -> ServiceRun | None:
        with self.store._read("get") as tx:
            rows = tx.query(f"SELECT {_COLUMNS} FROM service_runs WHERE id = ?", (run_id,))
        return self._row(rows[0]) if rows else None

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
        with self.store._read("page") as tx:
            rows = tx.query(
                f"SELECT {_COLUMNS} FROM service_runs{clause}"
                " ORDER BY created_at DESC, id DESC LIMIT ?",
                (*params, int(limit)),
            )
        return [self._row(r) for r in rows]

    def store_run_id(self, run_key: str) -> str | None:
        with self.store._read("store_run_id") as tx:
            rows = tx.query("SELECT run_id FROM runs WHERE run_key = ?", (run_key,))
        return str(rows[0][0]) if rows else None

    def results(
        self,
        store_run_id: str,
        *,
        limit: int,
        status: str | None = None,
        after: tuple[str, int, str] | None = None,
    ) -> list[ResultRow]:
        """A page of stored attempts in (case id, attempt index, model) order: the attempts
        after the key ``after``, of ``status`` when given (keyset paging in SQL: one index
        range of ``limit`` rows, however many attempts the run has)."""
        records = self.store.attempts_page(store_run_id, limit=limit, status=status, after=after)
        out = []
        for record in records:
            key = (str(record["caseId"]), int(record["index"]), str(record.get("model") or ""))
            out.append(ResultRow(key[0], key[1], key[2], str(record.get("status")), record))
        return out

    def count_attempts(self, store_run_id: str) -> dict[str, int]:
        return self.store.attempt_counts(store_run_id)

    def runs_by_status(self) -> dict[str, int]:
        with self.store._read("runs_by_status") as tx:
            rows = tx.query("SELECT status, COUNT(*) FROM service_runs GROUP BY status")
        return {str(s): int(n) for s, n in rows}

    def attempts_by_status(self) -> dict[str, int]:
        """Attempts of the service's runs, by status."""
        with self.store._read("attempts_by_status") as tx:
            rows = tx.query(
                "SELECT a.status, COUNT(*) FROM attempts a"
                " JOIN runs r ON r.run_id = a.run_id"
                " JOIN service_runs s ON s.run_key = r.run_key"
                " GROUP BY a.status"
            )
        return {str(st): int(n) for st, n in rows}

    def error_records(self, limit: int = 10_000) -> list[dict[str, Any]]:
        """ERROR attempt records of the service's runs, most recent runs first (provider
        errors)."""
        with self.store._read("error_records") as tx:
            rows = tx.query(
                f"SELECT {ATTEMPT_ROW_COLUMNS} FROM {ATTEMPT_ROW_JOIN}"
                " JOIN runs r ON r.run_id = a.run_id"
                " JOIN service_runs s ON s.run_key = r.run_key"
                " WHERE a.status = 'ERROR'"
                " ORDER BY r.started_at DESC, a.run_id, a.case_id, a.attempt_index, a.model"
                " LIMIT ?",
                (int(limit),),
            )
        return self.store.records_of(rows)
