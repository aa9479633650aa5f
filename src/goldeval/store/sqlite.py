"""SQLite backend (stdlib ``sqlite3``): one file, safe for several writing processes.

The database runs in WAL mode (readers never block the writer), with a busy timeout so a
writer waits for another process's transaction instead of failing. Every write is a
``BEGIN IMMEDIATE`` transaction: it takes the file's write lock up front, so two processes
never both read, then both try to upgrade to a write lock (which SQLite would refuse
immediately, without waiting). JSON columns hold compact JSON text, timestamps ISO 8601 UTC
text with microseconds (which sorts chronologically).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

from goldeval.core.safe_files import link_on_the_way
from goldeval.store.base import SqlStore, StoreError, Tx
from goldeval.store.migrations import RUN_STATUS_TABLES, Backend, rebuilt_table_sql

DEFAULT_PATH = Path(".goldeval") / "goldeval.sqlite3"
MEMORY = ":memory:"


class _SqliteTx(Tx):
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._conn.execute(sql, params).rowcount

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        return self._conn.executemany(sql, rows).rowcount

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self._conn.execute(sql, params).fetchall())

    def insert_new(
        self,
        insert: str,
        upsert: str,
        rows: Sequence[Sequence[Any]],
        on_conflict: Callable[[], None] | None = None,
    ) -> int:
        self._conn.execute("SAVEPOINT goldeval_insert_new")
        try:
            count = self._conn.executemany(insert, rows).rowcount
        except sqlite3.IntegrityError as exc:
            self._conn.execute("ROLLBACK TO goldeval_insert_new")
            self._conn.execute("RELEASE goldeval_insert_new")
            if "UNIQUE" not in str(exc).upper():
                raise  # a CHECK or foreign key failure is not a duplicate: the upsert fails too
            if on_conflict is not None:
                on_conflict()
            return self._conn.executemany(upsert, rows).rowcount
        self._conn.execute("RELEASE goldeval_insert_new")
        return count


class SqliteStore(SqlStore):
    """A run store in one SQLite file (default ``.goldeval/goldeval.sqlite3``).

    ``busy_timeout`` (seconds) is how long a write waits for another process's lock.
    """

    backend: ClassVar[Backend] = "sqlite"

    def __init__(
        self, path: str | os.PathLike[str] = DEFAULT_PATH, *, busy_timeout: float = 30.0
    ) -> None:
        super().__init__()
        self.path = os.fspath(path)
        self.url = self.path
        if self.path != MEMORY:
            # Opening migrates and writes (WAL, change counters): never through a link (the
            # file itself, or a folder on the way inside the working directory), which the
            # plugin and the CLI refuse for every other file they write.
            link = link_on_the_way(Path(self.path).absolute(), Path.cwd())
            if link is not None:
                raise StoreError(
                    f"SQLite store {self.path}: {link} is a symbolic link; goldeval writes "
                    "nothing through links (name the real file)"
                )
            parent = Path(self.path).parent
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create the directory of SQLite store {self.path}: {exc}"
                ) from exc
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store {self.path}: {exc}") from exc
        try:
            self._configure(busy_timeout)
            self._migrate()
        except BaseException:
            self._closed = True
            self._conn.close()
            raise

    def _configure(self, busy_timeout: float) -> None:
        with self._guard("open"), self._errors("open"):
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            self._conn.execute("PRAGMA foreign_keys = ON")
            # Takes effect only on a new, empty file (a no-op on one with tables): the pages a
            # run frees when it shares another's rows (goldeval.store.sharing) go back to the
            # file system (_release_space) instead of staying in the file as free pages.
            self._conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            if self.path != MEMORY:
                self._set_wal(busy_timeout)
            self._conn.execute("PRAGMA synchronous = NORMAL")

    def _set_wal(self, busy_timeout: float) -> None:
        # Switching a fresh file to WAL needs a moment of exclusive access: retry while
        # another process holds the file (its own switch or a write) rather than fail.
        deadline = time.monotonic() + busy_timeout
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL").fetchone()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @contextmanager
    def _errors(self, op: str) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"{op} failed on SQLite store {self.path}: {exc}") from exc

    @contextmanager
    def _transaction(self, op: str) -> Iterator[Tx]:
        with self._guard(op), self._errors(op):
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield _SqliteTx(self._conn)
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _read(self, op: str) -> Iterator[Tx]:
        with self._guard(op), self._errors(op):
            yield _SqliteTx(self._conn)

    def _migration_lock(self, tx: Tx) -> None:
        """BEGIN IMMEDIATE already holds the file's write lock."""

    def _migrate(self) -> None:
        # Schema 9 rebuilds ``runs``: with foreign keys on, dropping the old table would
        # delete every attempt, case and artifact row (ON DELETE CASCADE). SQLite ignores this
        # pragma inside a transaction, so it is off around the migration transaction; the
        # rebuild checks the keys itself before the commit (``rebuild_status_checks``).
        with self._guard("migrate"), self._errors("migrate"):
            self._conn.execute("PRAGMA foreign_keys = OFF")
        try:
            super()._migrate()
        finally:
            with self._guard("migrate"), self._errors("migrate"):
                self._conn.execute("PRAGMA foreign_keys = ON")

    def rebuild_status_checks(self, tx: Tx) -> None:
        """Migration 9: each run status table rebuilt with the wider CHECK (SQLite cannot
        alter one), its rows copied and its indexes re-created as they were."""
        before = len(tx.query("PRAGMA foreign_key_check"))
        for table in RUN_STATUS_TABLES:
            (create_sql,) = tx.query(
                "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
            )[0]
            indexes = [
                str(sql)
                for (sql,) in tx.query(
                    "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ?"
                    " AND sql IS NOT NULL ORDER BY name",
                    (table,),
                )
            ]
            try:
                rebuilt = rebuilt_table_sql(str(create_sql), table, f"{table}_v9")
            except ValueError as exc:
                raise StoreError(f"migrate {self.path}: {exc}") from None
            tx.execute(rebuilt)
            tx.execute(f"INSERT INTO {table}_v9 SELECT * FROM {table}")
            tx.execute(f"DROP TABLE {table}")
            tx.execute(f"ALTER TABLE {table}_v9 RENAME TO {table}")
            for sql in indexes:
                tx.execute(sql)
        # Rows that referred to missing rows before (a store written with keys off) are not
        # this step's doing; any new one would be, and rolls the whole migration back.
        broken = tx.query("PRAGMA foreign_key_check")
        if len(broken) > before:
            raise StoreError(
                f"migrate {self.path}: the run status rebuild left {len(broken) - before} rows "
                "referring to missing rows; nothing was changed"
            )

    def _lock_run(self, tx: Tx, run_id: str) -> bool:
        # BEGIN IMMEDIATE already holds the file's write lock: writers are serialised.
        return bool(tx.query("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)))

    def _gc_lock(self, tx: Tx) -> None:
        """BEGIN IMMEDIATE already holds the file's write lock."""

    def _release_space(self) -> None:
        # Best effort, after the transaction that freed the pages committed: a busy file
        # keeps its free pages for the next run's rows, nothing is lost.
        with self._guard("release_space"):
            try:
                # executescript steps the pragma to its end: execute() frees one page a step.
                self._conn.executescript("PRAGMA incremental_vacuum;")
            except sqlite3.Error:
                pass

    def compact(self) -> None:
        with self._guard("compact"), self._errors("compact"):
            self._conn.execute("VACUUM")
            if self.path != MEMORY:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def size_bytes(self) -> int:
        with self._guard("size"), self._errors("size"):
            if self.path == MEMORY:
                pages = self._conn.execute("PRAGMA page_count").fetchone()[0]
                return int(pages) * int(self._conn.execute("PRAGMA page_size").fetchone()[0])
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            files = (Path(self.path), Path(f"{self.path}-wal"))
            return sum(f.stat().st_size for f in files if f.exists())

    def ts_param(self, value: datetime) -> Any:
        return value.astimezone(timezone.utc).isoformat(timespec="microseconds")

    def ts_value(self, raw: Any) -> datetime:
        if isinstance(raw, datetime):
            return raw.astimezone(timezone.utc)
        return datetime.fromisoformat(str(raw)).astimezone(timezone.utc)

    def _close(self) -> None:
        self._conn.close()
