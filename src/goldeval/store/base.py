"""The run store interface (:class:`Store`) and the one SQL class both backends share.

A store keeps what a run produced, durably and queryably (after the evaluation-service
design this project ports): one immutable row per run, one row per case, one row per graded
attempt keyed by (run, case, attempt index, model), and an inventory of the run's artifact
files with their SHA-256 checksums. Writes are idempotent, so a resumed run, a second shard
or a re-sent report never writes anything twice.

The SQL is written once with ``?`` placeholders and standard ``INSERT ... ON CONFLICT``
upserts (SQLite >= 3.24 and PostgreSQL both understand them); a backend supplies the
connection, the transaction discipline (its writer lock), the timestamp representation and
the translation of driver errors into :class:`StoreError`. :class:`SqlStore` is put together
here from its concerns: connection plumbing and the migration runner (:mod:`.sql`), run
writes (:mod:`.run_writes`), reads (:mod:`.reads`) and the data-moving migration steps
(:mod:`.page_migrations`); the named rows live in :mod:`.rows`, the record encoding in
:mod:`.encoding`, errors and URL redaction in :mod:`.errors`. The names callers import from
here are re-exported.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar

from goldeval.store.encoding import attempt_key, json_text
from goldeval.store.errors import RunConflictError, StoreError, redact_url, url_password
from goldeval.store.migrations import Backend
from goldeval.store.page_migrations import PageMigrations
from goldeval.store.reads import ATTEMPT_ROW_COLUMNS, ATTEMPT_ROW_JOIN, RunReads
from goldeval.store.rows import (
    ERROR,
    ArtifactRow,
    AttemptJson,
    AttemptKey,
    AttemptText,
    RunRow,
    RunStatus,
    StoredRun,
)
from goldeval.store.run_writes import RunWrites
from goldeval.store.sql import SqlCore, Tx

__all__ = [
    "ATTEMPT_ROW_COLUMNS",
    "ATTEMPT_ROW_JOIN",
    "ERROR",
    "ArtifactRow",
    "AttemptJson",
    "AttemptKey",
    "AttemptText",
    "RunConflictError",
    "RunRow",
    "RunStatus",
    "SqlCore",
    "SqlStore",
    "Store",
    "StoreError",
    "StoredRun",
    "Tx",
    "attempt_key",
    "json_text",
    "redact_url",
    "url_password",
]

# --------------------------------------------------------------------------- interface


class Store(ABC):
    """Durable record of evaluation runs. Not shared between threads without care: every
    call is serialised by an internal lock; open one store per process (each xdist worker,
    each shard) — the backends make concurrent processes safe.
    """

    backend: ClassVar[Backend]
    url: str
    """Where the store lives, for messages (PostgreSQL URLs are redacted)."""

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"

    @abstractmethod
    def schema_version(self) -> int:
        """The highest migration applied to this store."""

    @abstractmethod
    def begin_run(
        self,
        run_id: str,
        *,
        run_key: str | None = None,
        dataset_id: str,
        dataset_hash: str,
        mode: str,
        model: str | None = None,
        protocol: Mapping[str, Any],
        configuration: Mapping[str, Any],
        dataset_source: str | None = None,
    ) -> StoredRun:
        """Create run ``run_id`` (status RUNNING) and register its dataset version.

        If ``run_key`` names an existing run — a resumed run, or another process or shard of
        the same run — that run is returned instead (``resumed=True``, its own ``run_id``),
        its status set back to RUNNING and ``finished_at`` cleared; its recorded protocol and
        configuration are kept (runs are immutable). The same holds for an existing
        ``run_id`` without a key. Raises :class:`RunConflictError` if the existing run is of
        another dataset/hash.
        """

    @abstractmethod
    def record_case(self, run_id: str, case_info: Mapping[str, Any]) -> bool:
        """Store a case's info (a ``CaseInfo.dump()`` dict with ``caseId``) once per run.

        Returns True if written, False if the case was already recorded (kept as it was).
        """

    @abstractmethod
    def record_cases(self, run_id: str, case_infos: Iterable[Mapping[str, Any]]) -> int:
        """Batched :meth:`record_case` in one transaction; returns how many were new."""

    @abstractmethod
    def record_attempt(self, run_id: str, record: Mapping[str, Any]) -> bool:
        """Store one graded attempt (an ``AttemptRecord.dump()`` dict: ``caseId``, ``index``,
        ``status``, optional ``model``).

        Each (run, case, index, model) is written once: a duplicate is a no-op (False),
        except that a stored ERROR attempt is replaced by a later non-ERROR one (True) — how
        "rerun errors" lands its retries.
        """

    @abstractmethod
    def record_attempts(self, run_id: str, records: Iterable[Mapping[str, Any]]) -> int:
        """Batched :meth:`record_attempt` in one transaction (the fast path).

        Returns how many rows were written (inserted or ERROR replaced).
        """

    def record_attempt_texts(self, run_id: str, rows: Iterable[AttemptText]) -> int:
        """:meth:`record_attempts` for records already serialised as compact JSON (without
        raw model text): an :class:`AttemptText` (or a plain ``(case_id, index, model,
        status, record_json)`` tuple) per attempt. The plugin's path: attempts reach the
        controller as JSON text. The key and status come from the tuple; SQL stores set the
        per-run fields (duration, tries) apart from the content they share with other runs,
        at ``content_at`` without a parse when it is given (goldeval.core.record_text)."""
        return self.record_attempts(run_id, [json.loads(row[4]) for row in rows])

    def record_batch(
        self,
        run_id: str,
        case_infos: Iterable[Mapping[str, Any]],
        rows: Iterable[AttemptText],
    ) -> tuple[int, int]:
        """:meth:`record_cases` then :meth:`record_attempt_texts`, in one transaction where
        the backend can (the plugin's write batch: one lock and one commit, not two).
        Returns how many cases and attempts were written."""
        return self.record_cases(run_id, case_infos), self.record_attempt_texts(run_id, rows)

    @abstractmethod
    def graded_keys(self, run_id: str, *, include_errors: bool) -> set[AttemptKey]:
        """Keys of the attempts already stored, so a resumed run skips them.

        With ``include_errors=False`` ERROR attempts are left out, so they are retried.
        """

    @abstractmethod
    def attempts(self, run_id: str) -> list[dict[str, Any]]:
        """The stored attempt records, ordered by case id, attempt index and model."""

    @abstractmethod
    def attempts_page(
        self,
        run_id: str,
        *,
        limit: int,
        status: str | None = None,
        after: AttemptKey | None = None,
    ) -> list[dict[str, Any]]:
        """At most ``limit`` attempt records of the run after the key ``after`` (keyset
        paging), in :meth:`attempts` order, only those of ``status`` when it is given.
        Costs one index range read of ``limit`` rows however many attempts the run has."""

    @abstractmethod
    def attempts_page_json(
        self,
        run_id: str,
        *,
        limit: int,
        status: str | None = None,
        after: AttemptKey | None = None,
    ) -> list[AttemptJson]:
        """:meth:`attempts_page` with each record as JSON text, its stored content spliced in
        as it is (never decoded): what ``GET .../results`` sends."""

    @abstractmethod
    def statuses_of(self, run_id: str, case_ids: Sequence[str]) -> dict[AttemptKey, str]:
        """The status of each stored attempt of these cases of the run, by its key."""

    @abstractmethod
    def attempt_counts(self, run_id: str) -> dict[str, int]:
        """How many attempts of the run are stored, by status (kept as they
        are written: a few rows read, not a count of the attempts)."""

    @abstractmethod
    def cases(self, run_id: str) -> list[dict[str, Any]]:
        """The stored case infos in dataset order (``line``, then case id)."""

    @abstractmethod
    def finish_run(self, run_id: str, status: RunStatus, summary: Mapping[str, Any]) -> None:
        """Set the run's final status, ``finished_at`` and summary (e.g. run.json minus cases).

        Non-finite floats in the summary are stored as null (JSON has no NaN).
        """

    @abstractmethod
    def record_artifacts(self, run_id: str, artifacts: Iterable[tuple[str, str, int]]) -> int:
        """Add ``(path, sha256, size)`` entries to the run's artifact inventory.

        A path recorded again (a report rewritten on resume) takes the new checksum and size.
        Returns the number of entries written.
        """

    @abstractmethod
    def artifacts(self, run_id: str) -> list[ArtifactRow]:
        """The run's artifact inventory, ordered by path."""

    @abstractmethod
    def runs(self, limit: int = 50, dataset_id: str | None = None) -> list[RunRow]:
        """The most recently started runs first, optionally of one dataset."""

    @abstractmethod
    def get_run(self, run_id_or_key: str) -> RunRow | None:
        """A run by run id, else by run key; None if neither exists."""

    @abstractmethod
    def delete_runs(self, run_ids: Iterable[str]) -> int:
        """Delete runs with their pages and artifact inventory, then every stored content
        no remaining run refers to (``goldeval prune``). Returns how many runs were deleted.
        """

    @abstractmethod
    def compact(self) -> None:
        """Give the space freed by :meth:`delete_runs` back to the file system where the
        backend needs asking (SQLite ``VACUUM``; PostgreSQL's autovacuum reuses it)."""

    @abstractmethod
    def size_bytes(self) -> int:
        """Bytes the store occupies (SQLite: the file and its WAL; PostgreSQL: the
        tables of the store's schema with their indexes and TOAST)."""

    @abstractmethod
    def close(self) -> None:
        """Release the connection. Idempotent; later calls raise :class:`StoreError`."""


class SqlStore(RunWrites, RunReads, PageMigrations, Store):
    """Store logic over a SQL connection, one class made of its concerns (:mod:`.sql`,
    :mod:`.run_writes`, :mod:`.reads`, :mod:`.page_migrations`); backends supply the hooks
    :class:`~goldeval.store.sql.SqlCore` declares."""
