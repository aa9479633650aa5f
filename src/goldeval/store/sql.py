"""Connection plumbing every SQL store shares: the cursor protocol (:class:`Tx`), the SQL
statements written once with ``?`` placeholders, content lookups by hash, and :class:`SqlCore`:
the backend hooks, the instance lock, the migration runner and ``close``.

The store class is split by concern into mixins over :class:`SqlCore` (``run_writes``,
``reads``, ``page_migrations``), put together as the one concrete
:class:`goldeval.store.base.SqlStore`: each concern is a module of its own while callers
still see one class with one set of methods (no delegation layer repeating every signature).
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any, ClassVar

from goldeval.store.encoding import json_value, utcnow
from goldeval.store.errors import StoreError
from goldeval.store.migrations import LATEST_VERSION, SCHEMA_VERSION_DDL, Backend, pending
from goldeval.store.pages import marks
from goldeval.store.rows import RUN_COLUMNS, RunColumns


class Tx(ABC):
    """A backend cursor inside a transaction (or a read) with ``?`` placeholders."""

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a statement; returns the number of rows it changed."""

    @abstractmethod
    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """Run a statement once per row; returns the total number of rows changed."""

    @abstractmethod
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run a query and fetch every row."""

    def insert_new(
        self,
        insert: str,
        upsert: str,
        rows: Sequence[Sequence[Any]],
        on_conflict: Callable[[], None] | None = None,
    ) -> int:
        """``executemany(upsert, rows)``, tried first as a plain ``insert`` of all rows.

        A fresh run conflicts with nothing, and PostgreSQL's ``ON CONFLICT`` costs about a
        third more per row even when nothing conflicts. When a row does conflict (a resumed
        run, a rerun of errors, a re-sent report) the insert is rolled back to a savepoint
        and the batch is written with the upsert, so the result is the same either way.
        ``on_conflict`` runs just before the upsert (only then): the attempt counters read
        what the upsert is about to replace.
        """
        if on_conflict is not None:
            on_conflict()
        return self.executemany(upsert, rows)


UPSERT_DATASET = (
    "INSERT INTO datasets (id, hash, source, first_seen) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (id, hash) DO UPDATE SET source = COALESCE(datasets.source, excluded.source)"
)

INSERT_RUN = (
    "INSERT INTO runs (run_id, run_key, dataset_id, dataset_hash, mode, model, protocol,"
    " configuration, status, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'RUNNING', ?)"
    " ON CONFLICT DO NOTHING"
)

INSERT_CONTENT = "INSERT INTO contents (sha256, body) VALUES (?, ?)"
UPSERT_CONTENT = INSERT_CONTENT + " ON CONFLICT (sha256) DO NOTHING"
INSERT_PAGE = (
    "INSERT INTO run_pages (run_id, page_no, kind, body, created_at) VALUES (?, ?, ?, ?, ?)"
)
INSERT_CASE = "INSERT INTO run_cases (run_id, case_id, content_id) VALUES (?, ?, ?)"
NEW_CASE_ONLY = " ON CONFLICT (run_id, case_id) DO NOTHING"
#: Schema 8's attempts row (what migration 8 writes when it moves pages back into rows).
INSERT_ATTEMPT_SCHEMA8 = (
    "INSERT INTO attempts (run_id, case_id, attempt_index, model, status, error_kind,"
    " duration_ms, tokens, content_id, fields) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: Since schema 12: with ``variant`` (the manifest variant a variant session's attempt ran).
INSERT_ATTEMPT = (
    "INSERT INTO attempts (run_id, case_id, attempt_index, model, status, error_kind,"
    " duration_ms, tokens, content_id, fields, variant)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# Each (run, case, index, model) is written once, except that a stored ERROR attempt is
# replaced by a later non-ERROR one (how "rerun errors" lands its retries).
UPSERT_ATTEMPT = (
    INSERT_ATTEMPT + " ON CONFLICT (run_id, case_id, attempt_index, model) DO UPDATE SET"
    " status = excluded.status, error_kind = excluded.error_kind,"
    " duration_ms = excluded.duration_ms, tokens = excluded.tokens,"
    " content_id = excluded.content_id, fields = excluded.fields, variant = excluded.variant"
    " WHERE attempts.status = 'ERROR' AND excluded.status <> 'ERROR'"
)
#: Distinct contents whose error kind and tokens a store keeps parsed (then starts afresh).
COLUMN_CACHE = 50_000
#: Ids per ``IN (...)`` list (well under SQLite's and PostgreSQL's parameter limits).
IN_CHUNK = 500


def contents_where_in(
    tx: Tx, columns: str, column: str, values: Sequence[Any]
) -> Iterator[tuple[Any, ...]]:
    """``SELECT columns FROM contents WHERE column IN (values)``, ``IN_CHUNK`` values a query
    (one statement may bind only so many parameters)."""
    for i in range(0, len(values), IN_CHUNK):
        chunk = values[i : i + IN_CHUNK]
        marks = ", ".join("?" * len(chunk))
        yield from tx.query(f"SELECT {columns} FROM contents WHERE {column} IN ({marks})", chunk)


def statuses_by_key(
    tx: Tx, run_rows: str, run_id: str, case_ids: Sequence[str]
) -> dict[tuple[str, int, str], str]:
    """The status of every stored attempt of ``case_ids`` in the run, by attempt key;
    ``run_rows``: the SQL naming the run's rows (``?`` for its own, or a subquery reading a
    shared owner's), bound to ``run_id``. ``IN_CHUNK`` cases a query, each a range of the
    primary key: O(cases), whatever the run's size."""
    cases = sorted(set(case_ids))
    out: dict[tuple[str, int, str], str] = {}
    for i in range(0, len(cases), IN_CHUNK):
        chunk = cases[i : i + IN_CHUNK]
        rows = tx.query(
            "SELECT case_id, attempt_index, model, status FROM attempts"
            f" WHERE run_id = {run_rows} AND case_id IN ({', '.join('?' * len(chunk))})",
            (run_id, *chunk),
        )
        out.update({(str(c), int(n), str(m)): str(st) for c, n, m, st in rows})
    return out


#: Entries per page when the v5 migration moves old rows (the plugin writes 500 a batch).
PAGE_ROWS = 500

UPSERT_ARTIFACT = (
    "INSERT INTO artifacts (run_id, path, sha256, size, created_at) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (run_id, path) DO UPDATE SET"
    " sha256 = excluded.sha256, size = excluded.size, created_at = excluded.created_at"
)


class SqlCore(ABC):
    """What every concern of the SQL store builds on; backends supply the hooks below."""

    backend: ClassVar[Backend]
    url: str

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._closed = False
        #: content digest -> (error kind, total tokens, cost): each distinct content parsed once
        self._columns: dict[bytes, tuple[str | None, int | None, float | None]] = {}

    # ---- backend hooks

    @abstractmethod
    def _transaction(self, op: str) -> AbstractContextManager[Tx]:
        """A write transaction holding the backend's writer lock; errors -> StoreError."""

    @abstractmethod
    def _read(self, op: str) -> AbstractContextManager[Tx]:
        """A cursor for reads (no explicit transaction); errors -> StoreError."""

    @abstractmethod
    def _migration_lock(self, tx: Tx) -> None:
        """Serialise concurrent migrations (inside the migration transaction)."""

    @abstractmethod
    def _lock_run(self, tx: Tx, run_id: str) -> bool:
        """Serialise writers of one run's pages (inside the write transaction) and hold off
        a concurrent garbage collection of contents; False if there is no such run."""

    @abstractmethod
    def _release_space(self) -> None:
        """Give the space of deleted rows back (after a run shared another's rows, or runs
        were deleted), best effort, after the commit."""

    @abstractmethod
    def _gc_lock(self, tx: Tx) -> None:
        """Exclusive against every page writer (inside the garbage collection)."""

    @abstractmethod
    def ts_param(self, value: datetime) -> Any:
        """A timestamp as the backend stores it."""

    @abstractmethod
    def ts_value(self, raw: Any) -> datetime:
        """A stored timestamp back as an aware UTC datetime."""

    @abstractmethod
    def _close(self) -> None:
        """Close the connection."""

    def run_identity(self, row: RunColumns) -> dict[str, Any]:
        """The fields a stored run and a listed run share, decoded from a ``runs`` row (one
        place for :class:`~goldeval.store.rows.StoredRun` and
        :class:`~goldeval.store.rows.RunRow`)."""
        return {
            "run_id": row.run_id,
            "run_key": row.run_key,
            "dataset_id": row.dataset_id,
            "dataset_hash": row.dataset_hash,
            "mode": row.mode,
            "model": row.model,
            "protocol": json_value(row.protocol),
            "configuration": json_value(row.configuration),
            "status": row.status,
            "started_at": self.ts_value(row.started_at),
        }

    # ---- public transactions (for the service queue, :mod:`goldeval.store.queue`)

    def transaction(self, op: str) -> AbstractContextManager[Tx]:
        """A write transaction holding the backend's writer lock (``op`` names it in errors);
        committed when the block ends, rolled back when it raises; errors -> StoreError."""
        return self._transaction(op)

    def read(self, op: str) -> AbstractContextManager[Tx]:
        """A cursor for reads outside a write transaction; errors -> StoreError."""
        return self._read(op)

    # ---- helpers

    @contextmanager
    def _guard(self, op: str) -> Iterator[None]:
        """Hold the instance lock and refuse use after close."""
        with self._lock:
            if self._closed:
                raise StoreError(f"{op}: {self.url} store is closed")
            yield

    def _migrate(self) -> None:
        with self._transaction("migrate") as tx:
            self._migration_lock(tx)
            tx.execute(SCHEMA_VERSION_DDL[self.backend])
            current = int(tx.query("SELECT MAX(version) FROM schema_version")[0][0] or 0)
            if current > LATEST_VERSION:
                raise StoreError(
                    f"{self.url} has schema version {current}, newer than this goldeval "
                    f"understands ({LATEST_VERSION}); upgrade pytest-goldeval"
                )
            for step in pending(self.backend, current):
                for statement in step.statements:
                    tx.execute(statement)
                if step.hook is not None:
                    getattr(self, step.hook)(tx)
                for statement in step.after:
                    tx.execute(statement)
                tx.execute(
                    "INSERT INTO schema_version (version, description, applied_at)"
                    " VALUES (?, ?, ?)",
                    (step.version, step.description, self.ts_param(utcnow())),
                )

    def _stand_in_texts(self, tx: Tx, values: Iterable[Any]) -> dict[str, str]:
        """hex digest -> JSON text of every content the stand-ins in ``values`` refer to,
        also those within those contents (a large value inside a large value)."""
        texts: dict[str, str] = {}
        wanted: set[str] = set()
        for value in values:
            wanted |= marks(value)
        while wanted:
            keys = sorted(wanted)
            found: dict[str, str] = {}
            digests = [bytes.fromhex(k) for k in keys]
            for key, body in contents_where_in(tx, "sha256, body", "sha256", digests):
                found[bytes(key).hex()] = str(body)
            if set(found) != wanted:
                raise StoreError(f"{self.url}: a run summary refers to missing contents")
            texts.update(found)
            wanted = set()
            for text in found.values():
                wanted |= marks(json.loads(text))
            wanted -= set(texts)
        return texts

    @staticmethod
    def _find(tx: Tx, column: str, value: str) -> RunColumns | None:
        rows = tx.query(f"SELECT {RUN_COLUMNS} FROM runs WHERE {column} = ?", (value,))
        return RunColumns(*rows[0]) if rows else None

    # ---- contents (each stored once, by hash)

    def _content_ids(self, tx: Tx, texts: Mapping[bytes, str]) -> dict[bytes, int]:
        """Ids of the contents (by digest), inserting those not stored yet."""
        ids = self._known_contents(tx, list(texts))
        missing = [(key, texts[key]) for key in texts if key not in ids]
        if missing:
            # A fresh dataset conflicts with nothing (a plain insert is cheaper); another
            # process may have stored the same content since the lookup (then the upsert).
            tx.insert_new(INSERT_CONTENT, UPSERT_CONTENT, missing)
            ids.update(self._known_contents(tx, [key for key, _ in missing]))
        return ids

    @staticmethod
    def _known_contents(tx: Tx, keys: Sequence[bytes]) -> dict[bytes, int]:
        return {
            bytes(key): int(content_id)
            for content_id, key in contents_where_in(tx, "id, sha256", "sha256", keys)
        }

    @staticmethod
    def _content_texts(tx: Tx, ids: Iterable[int]) -> dict[int, str]:
        wanted = sorted(set(ids))
        return {
            int(content_id): str(body)
            for content_id, body in contents_where_in(tx, "id, body", "id", wanted)
        }

    # ---- Store API shared by every concern

    def schema_version(self) -> int:
        with self._read("schema_version") as tx:
            return int(tx.query("SELECT MAX(version) FROM schema_version")[0][0] or 0)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._close()
