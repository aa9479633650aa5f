"""PostgreSQL backend (psycopg 3) for ``postgresql://user:pass@host:port/db`` URLs.

One connection per store in autocommit mode; every write runs in an explicit transaction.
JSON columns are JSONB, timestamps TIMESTAMPTZ. Concurrent writers are safe through the
unique keys and ``INSERT ... ON CONFLICT``; concurrent first opens are serialised by a
transaction-scoped advisory lock around the migrations. A connection lost between calls is
re-opened on the next call. The schema lives in the connection's ``search_path`` (add
``?options=-csearch_path%3Dmyschema`` to the URL to use another schema).

Error messages name the server by a redacted URL and are scrubbed of the password.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, ClassVar

import psycopg
from psycopg.conninfo import conninfo_to_dict

from goldeval.core.settings import is_credential_name, mask_secrets
from goldeval.store.base import SqlStore, StoreError, Tx, redact_url, url_password
from goldeval.store.migrations import Backend

# pg_advisory_xact_lock key serialising migrations ("goldeval" in ASCII, fits a bigint).
_MIGRATION_LOCK = 0x676F6C646576616C
# pg_advisory_xact_lock key of content garbage collection ("goldgc" in ASCII).
_GC_LOCK = 0x676F6C646763


@functools.lru_cache(maxsize=64)
def _pg_sql(sql: str) -> str:
    """``?`` placeholders -> psycopg's ``%s`` (our SQL has no other ``?`` or ``%``)."""
    return sql.replace("%", "%%").replace("?", "%s")


class _PgTx(Tx):
    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cur = cursor

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        self._cur.execute(_pg_sql(sql), params)
        return self._cur.rowcount

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        self._cur.executemany(_pg_sql(sql), rows)
        return self._cur.rowcount

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self._cur.execute(_pg_sql(sql), params)
        return [tuple(row) for row in self._cur.fetchall()]

    def insert_new(
        self,
        insert: str,
        upsert: str,
        rows: Sequence[Sequence[Any]],
        on_conflict: Callable[[], None] | None = None,
    ) -> int:
        try:
            with self._cur.connection.transaction():  # nested: a savepoint
                return self.executemany(insert, rows)
        except psycopg.errors.UniqueViolation:
            if on_conflict is not None:
                on_conflict()
            return self.executemany(upsert, rows)


class PostgresStore(SqlStore):
    """A run store in a PostgreSQL database."""

    backend: ClassVar[Backend] = "postgresql"

    def __init__(self, url: str, *, connect_timeout: float = 10.0) -> None:
        super().__init__()
        self._dsn = url
        self.url = redact_url(url)
        self._secrets: set[str] = {url}
        self._connect_timeout = max(1, int(connect_timeout))
        raw_password = url_password(url)
        if raw_password:
            self._secrets.add(raw_password)
        try:
            # Every credential keyword (password, sslpassword, ...), URL or key=value form.
            params = conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise StoreError(
                f"invalid PostgreSQL URL {self.url}: {self._scrub(str(exc))}"
            ) from None
        self._secrets.update(
            str(value) for name, value in params.items() if value and is_credential_name(name)
        )
        self._conn = self._connect()
        try:
            self._migrate()
        except BaseException:
            self.close()
            raise

    def _scrub(self, text: str) -> str:
        """``text`` with the URL redacted and every form of the password masked."""
        text = text.replace(self._dsn, self.url)
        # Longest first, so a password containing another secret is masked whole.
        ordered: list[str] = sorted(self._secrets - {self._dsn}, key=len, reverse=True)
        return mask_secrets(text, ordered)

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(
                self._dsn,
                autocommit=True,
                connect_timeout=self._connect_timeout,
                application_name="goldeval",
                # Text back as str even from SQL_ASCII databases (psycopg returns bytes there).
                client_encoding="utf8",
            )
        except psycopg.Error as exc:
            # No exception chaining: the driver's exception is not ours to scrub.
            raise StoreError(
                f"cannot connect to PostgreSQL store {self.url}: {self._scrub(str(exc))}"
            ) from None

    @contextmanager
    def _errors(self, op: str) -> Iterator[None]:
        try:
            yield
        except psycopg.Error as exc:
            message = self._scrub(str(exc).strip())
            raise StoreError(f"{op} failed on PostgreSQL store {self.url}: {message}") from None

    def _live(self) -> psycopg.Connection[Any]:
        if self._conn.closed or self._conn.broken:
            self._conn.close()
            self._conn = self._connect()
        return self._conn

    @contextmanager
    def _transaction(self, op: str) -> Iterator[Tx]:
        with self._guard(op), self._errors(op):
            conn = self._live()
            with conn.transaction(), conn.cursor() as cursor:
                yield _PgTx(cursor)

    @contextmanager
    def _read(self, op: str) -> Iterator[Tx]:
        with self._guard(op), self._errors(op):
            with self._live().cursor() as cursor:
                yield _PgTx(cursor)

    def _migration_lock(self, tx: Tx) -> None:
        tx.query("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))

    def _lock_run(self, tx: Tx, run_id: str) -> bool:
        # Shared against delete_runs' garbage collection (which must not delete a content
        # this transaction is about to refer to), then the run row: one writer per run.
        tx.query("SELECT pg_advisory_xact_lock_shared(?)", (_GC_LOCK,))
        return bool(tx.query("SELECT 1 FROM runs WHERE run_id = ? FOR UPDATE", (run_id,)))

    def _gc_lock(self, tx: Tx) -> None:
        tx.query("SELECT pg_advisory_xact_lock(?)", (_GC_LOCK,))

    def _release_space(self) -> None:
        # After a run gave its rows up (or runs were deleted): their space made reusable and
        # the heap's empty tail cut now, not when autovacuum gets to it (ten runs back to
        # back otherwise left ten runs' dead rows behind). Outside any transaction (the
        # connection autocommits), skipped if another VACUUM holds the tables, best effort:
        # the run's write has committed already.
        with self._guard("release_space"):
            try:
                # Twice: the first empties the index pages of the rows given up, which a
                # B-tree can hand out again only once no snapshot older than that VACUUM is
                # left; the second puts them in the free space map. With one, the next run's
                # index entries could not use them yet (each index grew by one run per run
                # for the first runs: 2.7x for ten runs, 1.9x with the second VACUUM).
                for _ in range(2):
                    self._live().execute("VACUUM (SKIP_LOCKED) attempts, run_cases")
            except psycopg.Error:
                pass

    def compact(self) -> None:
        """Nothing to do: autovacuum reuses the space of deleted rows (``VACUUM FULL``
        would give it back to the file system, but locks every table while it runs)."""

    def size_bytes(self) -> int:
        with self._read("size") as tx:
            rows = tx.query(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = current_schema() AND c.relkind = 'r'"
            )
        return int(rows[0][0])

    def ts_param(self, value: datetime) -> Any:
        return value

    def ts_value(self, raw: Any) -> datetime:
        if isinstance(raw, datetime):
            return raw.astimezone(timezone.utc)
        return datetime.fromisoformat(str(raw)).astimezone(timezone.utc)

    def _close(self) -> None:
        self._conn.close()
