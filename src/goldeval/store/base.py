"""The run store interface and the SQL logic both backends share.

A store keeps what a run produced, durably and queryably (after the evaluation-service
design this project ports): one immutable row per run, one row per case, one row per graded
attempt keyed by (run, case, attempt index, model), and an inventory of the run's artifact
files with their SHA-256 checksums. Writes are idempotent, so a resumed run, a second shard
or a re-sent report never writes anything twice.

The SQL here is written once with ``?`` placeholders and standard ``INSERT ... ON CONFLICT``
upserts (SQLite >= 3.24 and PostgreSQL both understand them); a backend supplies the
connection, the transaction discipline (its writer lock), the timestamp representation and
the translation of driver errors into :class:`StoreError`.
"""

from __future__ import annotations

import json
import math
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, ClassVar, Literal, NamedTuple, cast

from goldeval.core.record_text import split_parts
from goldeval.store import counters
from goldeval.store.migrations import (
    ATTEMPT_STATUSES,
    LATEST_VERSION,
    RUN_STATUSES,
    SCHEMA_VERSION_DDL,
    Backend,
    pending,
)
from goldeval.store.pages import (
    ATTEMPT,
    CASE,
    decode_page,
    digest,
    encode_page,
    expand,
    externalise,
    full_fields,
    join_record,
    marks,
    slim_fields,
    split_record,
)

RunStatus = Literal["QUEUED", "RUNNING", "COMPLETED", "INCOMPLETE", "FAILED", "INTERRUPTED"]
"""Life cycle of a run: QUEUED -> RUNNING -> COMPLETED | INCOMPLETE | FAILED | INTERRUPTED.

INCOMPLETE: cut short by ``-x``/``--maxfail``, its deadline or its budget; INTERRUPTED: ended
by a signal (or a store failure): the status the run document's outcome gives
(:func:`goldeval.verdict.run_status.run_status`)."""

AttemptKey = tuple[str, int, str]
"""(case id, attempt index, model) of an attempt; model is ``""`` when the run has none."""


class AttemptText(NamedTuple):
    """An attempt record already serialised as compact JSON (the plugin's path)."""

    case_id: str
    attempt_index: int
    model: str | None
    status: str
    #: the record as compact JSON, without raw model text
    text: str
    #: where the content begins when ``text`` is laid out run fields first
    #: (goldeval.core.record_text); 0 when it is not known: the store parses the record.
    content_at: int = 0


ERROR = "ERROR"


class StoreError(Exception):
    """The run store cannot be opened, read or written (connection, IO, schema).

    Messages name the store by a redacted URL (``postgresql://user:***@host/db``) and never
    contain a password.
    """


class RunConflictError(StoreError):
    """``begin_run`` named an existing run that cannot be resumed by this caller.

    Raised when a run key (or run id) already belongs to a run of another dataset or dataset
    hash, or when a run id exists under a different run key.
    """


# --------------------------------------------------------------------------- redaction

_QUERY_PASSWORD = re.compile(r"(?i)([?&]password=)[^&#\s]*")
_CONNINFO_PASSWORD = re.compile(r"(?i)\b(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")


def _userinfo_span(rest: str) -> tuple[int, int] | None:
    """Start and end of the password in the part of a URL after ``scheme://``."""
    # userinfo ends at the last "@": a raw (unencoded) password may contain "@", "/", "?" or
    # "#". An "@" later in the URL (in a query value) only makes this mask more than needed.
    at = rest.rfind("@")
    colon = rest.find(":", 0, at) if at != -1 else -1
    return (colon + 1, at) if colon != -1 else None


def url_password(url: str) -> str | None:
    """The password in ``scheme://user:password@host/...``, as written (None if none)."""
    _, sep, rest = url.partition("://")
    span = _userinfo_span(rest) if sep else None
    return rest[span[0] : span[1]] or None if span else None


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``.

    Handles URLs (``postgresql://user:secret@host/db`` -> ``postgresql://user:***@host/db``,
    also ``?password=secret`` parameters) and libpq ``key=value`` connection strings.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _CONNINFO_PASSWORD.sub(r"\1***", url)
    span = _userinfo_span(rest)
    if span is not None:
        rest = f"{rest[: span[0]]}***{rest[span[1] :]}"
    rest = _QUERY_PASSWORD.sub(r"\1***", rest)
    return f"{scheme}://{rest}"


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class StoredRun:
    """The run ``begin_run`` created or resumed. Use its ``run_id`` for every later call."""

    run_id: str
    run_key: str | None
    dataset_id: str
    dataset_hash: str
    mode: str
    model: str | None
    protocol: dict[str, Any]
    configuration: dict[str, Any]
    status: str
    started_at: datetime
    resumed: bool
    """True when the run existed already (a resume, or another shard of the same run key)."""


@dataclass(frozen=True)
class RunRow:
    """One run as listed by :meth:`Store.runs` and :meth:`Store.get_run`."""

    run_id: str
    run_key: str | None
    dataset_id: str
    dataset_hash: str
    mode: str
    model: str | None
    status: str
    started_at: datetime
    finished_at: datetime | None
    pass_rate: float | None
    """``summary.metrics.overallPassRate.rate`` (or ``summary.overallPassRate``), if any."""
    protocol: dict[str, Any]
    configuration: dict[str, Any]
    summary: dict[str, Any] | None


@dataclass(frozen=True)
class ArtifactRow:
    """One file of a run's artifact inventory."""

    path: str
    sha256: str
    size: int
    created_at: datetime


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
    def attempt_counts(self, run_id: str) -> dict[str, int]:
        """How many attempts of the run are stored, by status."""

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


# --------------------------------------------------------------------------- shared SQL


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


class _RunColumns(NamedTuple):
    """One ``runs`` row as :data:`_RUN_COLUMNS` selects it, read by name (not position)."""

    run_id: str
    run_key: str | None
    dataset_id: str
    dataset_hash: str
    mode: str
    model: str | None
    protocol: Any
    configuration: Any
    status: str
    started_at: Any
    finished_at: Any
    summary: Any


_RUN_COLUMNS = ", ".join(_RunColumns._fields)

_UPSERT_DATASET = (
    "INSERT INTO datasets (id, hash, source, first_seen) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (id, hash) DO UPDATE SET source = COALESCE(datasets.source, excluded.source)"
)

_INSERT_RUN = (
    "INSERT INTO runs (run_id, run_key, dataset_id, dataset_hash, mode, model, protocol,"
    " configuration, status, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'RUNNING', ?)"
    " ON CONFLICT DO NOTHING"
)

_INSERT_CONTENT = "INSERT INTO contents (sha256, body) VALUES (?, ?)"
_UPSERT_CONTENT = _INSERT_CONTENT + " ON CONFLICT (sha256) DO NOTHING"
_INSERT_PAGE = (
    "INSERT INTO run_pages (run_id, page_no, kind, body, created_at) VALUES (?, ?, ?, ?, ?)"
)
_INSERT_CASE = "INSERT INTO run_cases (run_id, case_id, content_id) VALUES (?, ?, ?)"
_NEW_CASE_ONLY = " ON CONFLICT (run_id, case_id) DO NOTHING"
_INSERT_ATTEMPT = (
    "INSERT INTO attempts (run_id, case_id, attempt_index, model, status, error_kind,"
    " duration_ms, tokens, content_id, fields) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# Each (run, case, index, model) is written once, except that a stored ERROR attempt is
# replaced by a later non-ERROR one (how "rerun errors" lands its retries).
_UPSERT_ATTEMPT = (
    _INSERT_ATTEMPT + " ON CONFLICT (run_id, case_id, attempt_index, model) DO UPDATE SET"
    " status = excluded.status, error_kind = excluded.error_kind,"
    " duration_ms = excluded.duration_ms, tokens = excluded.tokens,"
    " content_id = excluded.content_id, fields = excluded.fields"
    " WHERE attempts.status = 'ERROR' AND excluded.status <> 'ERROR'"
)
#: The columns :meth:`SqlStore.records_of` turns back into records, and the join they need
#: (``a``: attempts, ``c``: its content): one query per page, no second round trip.
ATTEMPT_ROW_COLUMNS = "a.case_id, a.attempt_index, a.model, a.status, a.fields, c.body"
ATTEMPT_ROW_JOIN = "attempts a JOIN contents c ON c.id = a.content_id"
#: Distinct contents whose error kind and tokens a store keeps parsed (then starts afresh).
_COLUMN_CACHE = 50_000
#: Ids per ``IN (...)`` list (well under SQLite's and PostgreSQL's parameter limits).
_IN_CHUNK = 500


def _contents_where_in(
    tx: Tx, columns: str, column: str, values: Sequence[Any]
) -> Iterator[tuple[Any, ...]]:
    """``SELECT columns FROM contents WHERE column IN (values)``, ``_IN_CHUNK`` values a query
    (one statement may bind only so many parameters)."""
    for i in range(0, len(values), _IN_CHUNK):
        chunk = values[i : i + _IN_CHUNK]
        marks = ", ".join("?" * len(chunk))
        yield from tx.query(f"SELECT {columns} FROM contents WHERE {column} IN ({marks})", chunk)


#: Entries per page when the v5 migration moves old rows (the plugin writes 500 a batch).
_PAGE_ROWS = 500

_UPSERT_ARTIFACT = (
    "INSERT INTO artifacts (run_id, path, sha256, size, created_at) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (run_id, path) DO UPDATE SET"
    " sha256 = excluded.sha256, size = excluded.size, created_at = excluded.created_at"
)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


#: One encoder for every stored text: ``json.dumps`` with options builds a new one per call.
_STORED_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def json_text(value: Any) -> str:
    """Compact JSON for a JSON column; NaN and infinities become null."""
    try:
        return _STORED_JSON.encode(value)
    except ValueError:
        return json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"))


def _json_value(raw: Any) -> Any:
    if isinstance(raw, (str, bytes, bytearray)):
        return json.loads(raw)
    return raw


def _pass_rate(summary: Any) -> float | None:
    if not isinstance(summary, dict):
        return None
    for holder in (summary.get("metrics"), summary):
        if not isinstance(holder, dict):
            continue
        value = holder.get("overallPassRate")
        if isinstance(value, dict):
            value = value.get("rate")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _field(record: Mapping[str, Any], camel: str, snake: str, what: str) -> Any:
    if camel in record:
        return record[camel]
    if snake in record:
        return record[snake]
    raise ValueError(f"{what} record has no {camel!r}: {sorted(record)}")


def _text(value: Any) -> str:
    # Accept str-valued enums (goldeval.core.models.Status) as well as plain strings.
    enum_value = getattr(value, "value", value)
    return str(enum_value)


def _check_status(case_id: Any, index: Any, status: str) -> None:
    if status not in ATTEMPT_STATUSES:
        raise ValueError(
            f"attempt {case_id!r}#{index}: status {status!r} is not one of {ATTEMPT_STATUSES}"
        )


def attempt_key(record: Mapping[str, Any]) -> tuple[AttemptKey, str]:
    """The (case id, index, model) key and the status of an attempt record dict."""
    case_id = _field(record, "caseId", "case_id", "attempt")
    index = _field(record, "index", "index", "attempt")
    if isinstance(index, bool) or not isinstance(index, int):
        raise ValueError(f"attempt {case_id!r}: index must be an integer, got {index!r}")
    status = _text(_field(record, "status", "status", "attempt"))
    _check_status(case_id, index, status)
    model = record.get("model")
    return (str(case_id), index, "" if model is None else str(model)), status


@dataclass(frozen=True)
class _Attempt:
    case_id: str
    index: int
    model: str
    status: str
    run_fields: dict[str, Any]
    content: str

    def slim(self) -> dict[str, Any]:
        return slim_fields(self.case_id, self.index, self.status, self.run_fields)

    def duration_ms(self) -> float | None:
        for name in ("durationMs", "duration_ms"):
            value = self.run_fields.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return value
        return None


def _content_columns(content: str) -> tuple[str | None, int | None, float | None]:
    """``(error kind, total tokens, estimated cost)`` of an attempt's content JSON: the row's
    columns, and the cost the counters add up (:mod:`goldeval.store.counters`)."""
    value = json.loads(content) if content else {}
    if not isinstance(value, dict):
        return None, None, None
    kind = value.get("errorKind", value.get("error_kind"))
    tokens = value.get("tokens")
    usage = tokens if isinstance(tokens, dict) else {}
    total = usage.get("totalTokens", usage.get("total_tokens"))
    cost = usage.get("estimatedCost", usage.get("estimated_cost"))
    return (
        kind if isinstance(kind, str) else None,
        total if isinstance(total, int) and not isinstance(total, bool) else None,
        float(cost)
        if isinstance(cost, (int, float)) and not isinstance(cost, bool) and math.isfinite(cost)
        else None,
    )


def _attempt_from_record(record: Mapping[str, Any]) -> _Attempt:
    (case_id, index, model), status = attempt_key(record)
    run_fields, content = split_record(record)
    return _Attempt(case_id, index, model, status, run_fields, json_text(content))


def _case_texts(case_infos: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    return [
        (str(_field(info, "caseId", "case_id", "case")), json_text(dict(info)))
        for info in case_infos
    ]


def _attempts_of_texts(rows: Iterable[AttemptText | tuple[Any, ...]]) -> list[_Attempt]:
    out: list[_Attempt] = []
    for row in rows:
        case_id, index, model, status, text = row[:5]
        _check_status(case_id, index, status)
        parts = split_parts(text, row[5]) if len(row) > 5 and row[5] else None
        if parts is None:
            run_fields, content = split_record(json.loads(text))
            parts = run_fields, json_text(content)
        out.append(_Attempt(case_id, index, model or "", status, *parts))
    return out


class SqlStore(Store):
    """Store logic over a SQL connection; backends supply the hooks below."""

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
                    (step.version, step.description, self.ts_param(_utcnow())),
                )

    def _stored_run(self, row: _RunColumns, *, resumed: bool) -> StoredRun:
        return StoredRun(
            run_id=row.run_id,
            run_key=row.run_key,
            dataset_id=row.dataset_id,
            dataset_hash=row.dataset_hash,
            mode=row.mode,
            model=row.model,
            protocol=cast(dict[str, Any], _json_value(row.protocol)),
            configuration=cast(dict[str, Any], _json_value(row.configuration)),
            status=row.status,
            started_at=self.ts_value(row.started_at),
            resumed=resumed,
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
            for key, body in _contents_where_in(tx, "sha256, body", "sha256", digests):
                found[bytes(key).hex()] = str(body)
            if set(found) != wanted:
                raise StoreError(f"{self.url}: a run summary refers to missing contents")
            texts.update(found)
            wanted = set()
            for text in found.values():
                wanted |= marks(json.loads(text))
            wanted -= set(texts)
        return texts

    def _run_rows(self, tx: Tx, rows: list[_RunColumns]) -> list[RunRow]:
        """Rows as :class:`RunRow`, their summaries' stored values put back in place."""
        summaries = [_json_value(r.summary) if r.summary is not None else None for r in rows]
        texts = self._stand_in_texts(tx, summaries)
        return [
            self._run_row(r, expand(s, texts) if texts else s)
            for r, s in zip(rows, summaries, strict=True)
        ]

    def _run_row(self, row: _RunColumns, summary: Any) -> RunRow:
        return RunRow(
            run_id=row.run_id,
            run_key=row.run_key,
            dataset_id=row.dataset_id,
            dataset_hash=row.dataset_hash,
            mode=row.mode,
            model=row.model,
            protocol=cast(dict[str, Any], _json_value(row.protocol)),
            configuration=cast(dict[str, Any], _json_value(row.configuration)),
            status=row.status,
            started_at=self.ts_value(row.started_at),
            finished_at=self.ts_value(row.finished_at) if row.finished_at is not None else None,
            pass_rate=_pass_rate(summary),
            summary=cast("dict[str, Any] | None", summary),
        )

    @staticmethod
    def _find(tx: Tx, column: str, value: str) -> _RunColumns | None:
        rows = tx.query(f"SELECT {_RUN_COLUMNS} FROM runs WHERE {column} = ?", (value,))
        return _RunColumns(*rows[0]) if rows else None

    # ---- pages

    def _content_ids(self, tx: Tx, texts: Mapping[bytes, str]) -> dict[bytes, int]:
        """Ids of the contents (by digest), inserting those not stored yet."""
        ids = self._known_contents(tx, list(texts))
        missing = [(key, texts[key]) for key in texts if key not in ids]
        if missing:
            # A fresh dataset conflicts with nothing (a plain insert is cheaper); another
            # process may have stored the same content since the lookup (then the upsert).
            tx.insert_new(_INSERT_CONTENT, _UPSERT_CONTENT, missing)
            ids.update(self._known_contents(tx, [key for key, _ in missing]))
        return ids

    @staticmethod
    def _known_contents(tx: Tx, keys: Sequence[bytes]) -> dict[bytes, int]:
        return {
            bytes(key): int(content_id)
            for content_id, key in _contents_where_in(tx, "id, sha256", "sha256", keys)
        }

    @staticmethod
    def _content_texts(tx: Tx, ids: Iterable[int]) -> dict[int, str]:
        wanted = sorted(set(ids))
        return {
            int(content_id): str(body)
            for content_id, body in _contents_where_in(tx, "id, body", "id", wanted)
        }

    # ---- rows (schema 8)

    @contextmanager
    def _locked_run(self, op: str, run_id: str) -> Iterator[Tx]:
        """A write transaction on one run (its writer lock held: see ``_lock_run``)."""
        with self._transaction(op) as tx:
            if not self._lock_run(tx, run_id):
                raise StoreError(f"{op}: no run {run_id!r} in {self.url}")
            yield tx

    def _write_cases(self, op: str, run_id: str, infos: list[tuple[str, str]]) -> int:
        if not infos:
            return 0
        with self._locked_run(op, run_id) as tx:
            return self._add_cases(tx, run_id, infos)

    def _add_cases(self, tx: Tx, run_id: str, infos: list[tuple[str, str]]) -> int:
        new: dict[str, str] = {}
        for case_id, text in infos:
            new.setdefault(case_id, text)  # the first info of a case counts, as before
        if not new:
            return 0
        digests = {case_id: digest(text) for case_id, text in new.items()}
        ids = self._content_ids(tx, {digests[c]: t for c, t in new.items()})
        rows = [(run_id, c, ids[digests[c]]) for c in new]
        return tx.insert_new(_INSERT_CASE, _INSERT_CASE + _NEW_CASE_ONLY, rows)

    def _write_attempts(self, op: str, run_id: str, attempts: list[_Attempt]) -> int:
        if not attempts:
            return 0
        with self._locked_run(op, run_id) as tx:
            return self._add_attempts(tx, run_id, attempts)

    def _add_attempts(self, tx: Tx, run_id: str, attempts: list[_Attempt]) -> int:
        if not attempts:
            return 0
        keys = [digest(a.content) for a in attempts]
        ids = self._content_ids(tx, {k: a.content for k, a in zip(keys, attempts, strict=True)})
        made = [
            self._attempt_row(run_id, a, key, ids[key])
            for a, key in zip(attempts, keys, strict=True)
        ]
        rows = [row for row, _cost in made]
        stored: dict[Any, str] | None = None

        def read_stored() -> None:
            nonlocal stored
            stored = self._stored_statuses(tx, run_id, attempts)

        # A fresh run conflicts with nothing: a plain insert. A resumed run, a rerun of
        # errors or a re-sent report: the upsert keeps a stored attempt, except an ERROR
        # one, which a later non-ERROR attempt replaces.
        written = tx.insert_new(_INSERT_ATTEMPT, _UPSERT_ATTEMPT, rows, read_stored)
        batch: list[counters.Written] = [
            ((a.case_id, a.index, a.model), a.status, row[5], row[7], cost)
            for a, (row, cost) in zip(attempts, made, strict=True)
        ]
        # Last in the transaction, so /metrics never counts what was not committed.
        counters.bump(tx, counters.attempt_deltas(batch, stored))
        return written

    @staticmethod
    def _stored_statuses(tx: Tx, run_id: str, attempts: list[_Attempt]) -> dict[Any, str]:
        """Status of the stored attempts of the batch's cases (the conflict path only)."""
        cases = sorted({a.case_id for a in attempts})
        out: dict[Any, str] = {}
        for i in range(0, len(cases), _IN_CHUNK):
            chunk = cases[i : i + _IN_CHUNK]
            found = tx.query(
                "SELECT case_id, attempt_index, model, status FROM attempts"
                f" WHERE run_id = ? AND case_id IN ({', '.join('?' * len(chunk))})",
                (run_id, *chunk),
            )
            out.update({(str(c), int(n), str(m)): str(st) for c, n, m, st in found})
        return out

    def _attempt_row(
        self, run_id: str, a: _Attempt, key: bytes, content_id: int
    ) -> tuple[tuple[Any, ...], float | None]:
        """The attempts row of ``a`` and its estimated cost (counted, not stored)."""
        columns = self._columns.get(key)
        if columns is None:
            if len(self._columns) >= _COLUMN_CACHE:
                self._columns.clear()
            columns = self._columns[key] = _content_columns(a.content)
        error_kind, tokens, cost = columns
        row = (
            run_id,
            a.case_id,
            a.index,
            a.model,
            a.status,
            error_kind,
            a.duration_ms(),
            tokens,
            content_id,
            json_text(a.slim()),
        )
        return row, cost

    @staticmethod
    def records_of(rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
        """Attempt records of rows selected as :data:`ATTEMPT_ROW_COLUMNS` from
        :data:`ATTEMPT_ROW_JOIN`: run fields and content joined back (also for callers
        reading attempts with their own SQL: the service's queue)."""
        return [
            join_record(full_fields(str(c), int(i), str(st), json.loads(fields)), json.loads(body))
            for c, i, _m, st, fields, body in rows
        ]

    # ---- pages (schema 5 and 6 only: read by the migration to schema 8)

    @staticmethod
    def _pages(tx: Tx, run_id: str, kind: str | None, after: int = 0) -> list[tuple[Any, ...]]:
        """``(page_no, kind, entries)`` of a run's pages after ``after``, in write order."""
        sql = "SELECT page_no, kind, body FROM run_pages WHERE run_id = ? AND page_no > ?"
        params: tuple[Any, ...] = (run_id, after)
        if kind is not None:
            sql += " AND kind = ?"
            params = (run_id, after, kind)
        rows = tx.query(sql + " ORDER BY page_no", params)
        return [(int(no), str(k), decode_page(body)) for no, k, body in rows]

    def _append_page(
        self, tx: Tx, run_id: str, page_no: int, kind: str, entries: list[list[Any]]
    ) -> None:
        tx.execute(
            _INSERT_PAGE,
            (run_id, page_no, kind, encode_page(entries), self.ts_param(_utcnow())),
        )

    def _final_page_entries(self, tx: Tx, run_id: str) -> dict[tuple[str, int, str], list[Any]]:
        """The page entry that counts per attempt key (a later entry replaces an earlier)."""
        final: dict[tuple[str, int, str], list[Any]] = {}
        for _, _, entries in self._pages(tx, run_id, ATTEMPT):
            for e in entries:
                final[(str(e[0]), int(e[1]), str(e[2]))] = e
        return final

    def move_pages_to_rows(self, tx: Tx) -> None:
        """Migration 8: every run's case and attempt pages into ``run_cases`` and
        ``attempts`` rows (contents are kept as they are: the rows point at the same ids)."""
        for (run_id,) in tx.query("SELECT run_id FROM runs ORDER BY run_id"):
            first: dict[str, int] = {}
            for _, _, entries in self._pages(tx, run_id, CASE):
                for case_id, content_id in entries:
                    first.setdefault(str(case_id), int(content_id))
            if first:
                tx.executemany(_INSERT_CASE, [(run_id, c, i) for c, i in first.items()])
            final = self._final_page_entries(tx, run_id)
            texts = self._content_texts(tx, (int(e[4]) for e in final.values()))
            rows = []
            for (case_id, index, model), e in sorted(final.items()):
                status, content_id, slim = str(e[3]), int(e[4]), e[5]
                run_fields = full_fields(case_id, index, status, slim)
                attempt = _Attempt(case_id, index, model, status, run_fields, texts[content_id])
                error_kind, tokens, _cost = _content_columns(texts[content_id])
                rows.append(
                    (
                        run_id,
                        case_id,
                        index,
                        model,
                        status,
                        error_kind,
                        attempt.duration_ms(),
                        tokens,
                        content_id,
                        json_text(slim),
                    )
                )
            for i in range(0, len(rows), _PAGE_ROWS):
                tx.executemany(_INSERT_ATTEMPT, rows[i : i + _PAGE_ROWS])

    def move_rows_to_pages(self, tx: Tx) -> None:
        """Migration 5: every run's ``cases`` and ``attempts`` rows into contents and pages."""
        for (run_id,) in tx.query("SELECT run_id FROM runs ORDER BY run_id"):
            page_no = 0
            cases = tx.query(
                "SELECT case_id, info FROM cases WHERE run_id = ? ORDER BY case_id", (run_id,)
            )
            rows = tx.query(
                "SELECT case_id, attempt_index, model, status, record FROM attempts"
                " WHERE run_id = ? ORDER BY case_id, attempt_index, model",
                (run_id,),
            )
            for i in range(0, len(cases), _PAGE_ROWS):
                chunk = [
                    (str(c), json_text(_json_value(info))) for c, info in cases[i : i + _PAGE_ROWS]
                ]
                ids = self._content_ids(tx, {digest(t): t for _, t in chunk})
                page_no += 1
                self._append_page(
                    tx, run_id, page_no, CASE, [[c, ids[digest(t)]] for c, t in chunk]
                )
            for i in range(0, len(rows), _PAGE_ROWS):
                moved = []
                for case_id, index, model, status, record in rows[i : i + _PAGE_ROWS]:
                    run_fields, content = split_record(_json_value(record))
                    moved.append(
                        _Attempt(
                            str(case_id),
                            int(index),
                            str(model),
                            str(status),
                            run_fields,
                            json_text(content),
                        )
                    )
                ids = self._content_ids(tx, {digest(a.content): a.content for a in moved})
                page_no += 1
                self._append_page(
                    tx,
                    run_id,
                    page_no,
                    ATTEMPT,
                    [
                        [
                            a.case_id,
                            a.index,
                            a.model,
                            a.status,
                            ids[digest(a.content)],
                            a.slim(),
                        ]
                        for a in moved
                    ],
                )

    # ---- Store API

    def schema_version(self) -> int:
        with self._read("schema_version") as tx:
            return int(tx.query("SELECT MAX(version) FROM schema_version")[0][0] or 0)

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
        now = _utcnow()
        with self._transaction("begin_run") as tx:
            tx.execute(
                _UPSERT_DATASET, (dataset_id, dataset_hash, dataset_source, self.ts_param(now))
            )
            existing = self._find(tx, "run_key", run_key) if run_key is not None else None
            if existing is None:
                inserted = tx.execute(
                    _INSERT_RUN,
                    (
                        run_id,
                        run_key,
                        dataset_id,
                        dataset_hash,
                        mode,
                        model,
                        json_text(dict(protocol)),
                        json_text(dict(configuration)),
                        self.ts_param(now),
                    ),
                )
                if inserted == 1:
                    row = self._find(tx, "run_id", run_id)
                    assert row is not None
                    return self._stored_run(row, resumed=False)
                # Lost a race for the key (PostgreSQL), or the run id exists already.
                if run_key is not None:
                    existing = self._find(tx, "run_key", run_key)
                if existing is None:
                    existing = self._find(tx, "run_id", run_id)
                    if existing is None:
                        raise StoreError(f"begin_run: could not create run {run_id!r}")
                    if run_key is not None and existing.run_key != run_key:
                        raise RunConflictError(
                            f"run id {run_id!r} exists with run key {existing.run_key!r}, "
                            f"not {run_key!r}"
                        )
            if (existing.dataset_id, existing.dataset_hash) != (dataset_id, dataset_hash):
                name = f"run key {run_key!r}" if run_key is not None else f"run id {run_id!r}"
                raise RunConflictError(
                    f"{name} belongs to run {existing.run_id!r} of dataset "
                    f"{existing.dataset_id}@{str(existing.dataset_hash)[:12]}, "
                    f"not {dataset_id}@{dataset_hash[:12]}"
                )
            tx.execute(
                "UPDATE runs SET status = 'RUNNING', finished_at = NULL WHERE run_id = ?",
                (existing.run_id,),
            )
            row = self._find(tx, "run_id", existing.run_id)
            assert row is not None
            return self._stored_run(row, resumed=True)

    def record_case(self, run_id: str, case_info: Mapping[str, Any]) -> bool:
        return self.record_cases(run_id, [case_info]) == 1

    def record_cases(self, run_id: str, case_infos: Iterable[Mapping[str, Any]]) -> int:
        return self._write_cases("record_cases", run_id, _case_texts(case_infos))

    def record_attempt_texts(self, run_id: str, rows: Iterable[AttemptText]) -> int:
        return self._write_attempts("record_attempts", run_id, _attempts_of_texts(rows))

    def record_batch(
        self,
        run_id: str,
        case_infos: Iterable[Mapping[str, Any]],
        rows: Iterable[AttemptText],
    ) -> tuple[int, int]:
        infos = _case_texts(case_infos)
        attempts = _attempts_of_texts(rows)
        if not infos and not attempts:
            return 0, 0
        with self._locked_run("record_batch", run_id) as tx:
            return self._add_cases(tx, run_id, infos), self._add_attempts(tx, run_id, attempts)

    def record_attempt(self, run_id: str, record: Mapping[str, Any]) -> bool:
        attempt = _attempt_from_record(record)
        return self._write_attempts("record_attempt", run_id, [attempt]) == 1

    def record_attempts(self, run_id: str, records: Iterable[Mapping[str, Any]]) -> int:
        attempts = [_attempt_from_record(r) for r in records]
        return self._write_attempts("record_attempts", run_id, attempts)

    def graded_keys(self, run_id: str, *, include_errors: bool) -> set[AttemptKey]:
        sql = "SELECT case_id, attempt_index, model FROM attempts WHERE run_id = ?"
        if not include_errors:
            sql += " AND status <> 'ERROR'"
        with self._read("graded_keys") as tx:
            rows = tx.query(sql, (run_id,))
        return {(str(c), int(i), str(m)) for c, i, m in rows}

    def attempts(self, run_id: str) -> list[dict[str, Any]]:
        # Two queries, not the join: a run's attempts share few contents, each fetched once.
        with self._read("attempts") as tx:
            rows = tx.query(
                "SELECT case_id, attempt_index, model, status, fields, content_id"
                " FROM attempts WHERE run_id = ? ORDER BY case_id, attempt_index, model",
                (run_id,),
            )
            texts = self._content_texts(tx, (int(r[5]) for r in rows))
        return [
            join_record(
                full_fields(str(c), int(i), str(st), json.loads(fields)),
                json.loads(texts[int(content_id)]),
            )
            for c, i, _m, st, fields, content_id in rows
        ]

    def attempts_page(
        self,
        run_id: str,
        *,
        limit: int,
        status: str | None = None,
        after: AttemptKey | None = None,
    ) -> list[dict[str, Any]]:
        where = ["a.run_id = ?"]
        params: list[Any] = [run_id]
        if status is not None:
            where.append("a.status = ?")
            params.append(status)
        if after is not None:
            where.append("(a.case_id, a.attempt_index, a.model) > (?, ?, ?)")
            params.extend(after)
        with self._read("attempts_page") as tx:
            rows = tx.query(
                f"SELECT {ATTEMPT_ROW_COLUMNS} FROM {ATTEMPT_ROW_JOIN}"
                f" WHERE {' AND '.join(where)}"
                " ORDER BY a.case_id, a.attempt_index, a.model LIMIT ?",
                (*params, max(0, int(limit))),
            )
        return self.records_of(rows)

    def attempt_counts(self, run_id: str) -> dict[str, int]:
        with self._read("attempt_counts") as tx:
            rows = tx.query(
                "SELECT status, COUNT(*) FROM attempts WHERE run_id = ? GROUP BY status",
                (run_id,),
            )
        return {str(st): int(n) for st, n in rows}

    def cases(self, run_id: str) -> list[dict[str, Any]]:
        with self._read("cases") as tx:
            rows = tx.query("SELECT content_id FROM run_cases WHERE run_id = ?", (run_id,))
            texts = self._content_texts(tx, (int(r[0]) for r in rows))
        infos = [cast(dict[str, Any], json.loads(texts[int(r[0])])) for r in rows]

        def order(info: dict[str, Any]) -> tuple[int, str]:
            line = info.get("line")
            return (line if isinstance(line, int) else 0, str(info.get("caseId", "")))

        return sorted(infos, key=order)

    def finish_run(self, run_id: str, status: RunStatus, summary: Mapping[str, Any]) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"run status {status!r} is not one of {RUN_STATUSES}")
        with self._transaction("finish_run") as tx:
            if not self._lock_run(tx, run_id):
                raise StoreError(f"finish_run: no run {run_id!r} in {self.url}")
            # Large values (the selected case ids...) are the same in every run of a dataset:
            # stored once, as contents, like the cases and records.
            texts: dict[bytes, str] = {}
            compact = externalise(_finite(dict(summary)), texts)
            if texts:
                self._content_ids(tx, texts)
            tx.execute(
                "UPDATE runs SET status = ?, finished_at = ?, summary = ? WHERE run_id = ?",
                (status, self.ts_param(_utcnow()), json_text(compact), run_id),
            )

    def record_artifacts(self, run_id: str, artifacts: Iterable[tuple[str, str, int]]) -> int:
        now = self.ts_param(_utcnow())
        rows = [(run_id, str(path), str(sha), int(size), now) for path, sha, size in artifacts]
        if not rows:
            return 0
        with self._transaction("record_artifacts") as tx:
            return tx.executemany(_UPSERT_ARTIFACT, rows)

    def artifacts(self, run_id: str) -> list[ArtifactRow]:
        with self._read("artifacts") as tx:
            rows = tx.query(
                "SELECT path, sha256, size, created_at FROM artifacts WHERE run_id = ?"
                " ORDER BY path",
                (run_id,),
            )
        return [ArtifactRow(r[0], r[1], int(r[2]), self.ts_value(r[3])) for r in rows]

    def runs(self, limit: int = 50, dataset_id: str | None = None) -> list[RunRow]:
        where, params = ("WHERE dataset_id = ?", [dataset_id]) if dataset_id else ("", [])
        with self._read("runs") as tx:
            rows = tx.query(
                f"SELECT {_RUN_COLUMNS} FROM runs {where}"
                " ORDER BY started_at DESC, run_id DESC LIMIT ?",
                (*params, int(limit)),
            )
            return self._run_rows(tx, [_RunColumns(*r) for r in rows])

    def get_run(self, run_id_or_key: str) -> RunRow | None:
        with self._read("get_run") as tx:
            row = self._find(tx, "run_id", run_id_or_key) or self._find(
                tx, "run_key", run_id_or_key
            )
            return self._run_rows(tx, [row])[0] if row is not None else None

    def delete_runs(self, run_ids: Iterable[str]) -> int:
        ids = list(dict.fromkeys(run_ids))
        deleted = 0
        with self._transaction("delete_runs") as tx:
            self._gc_lock(tx)
            for run_id in ids:
                # attempts, run_cases and artifacts go with the run (ON DELETE CASCADE).
                deleted += tx.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
            referenced = {
                int(i)
                for (i,) in tx.query(
                    "SELECT content_id FROM attempts UNION SELECT content_id FROM run_cases"
                )
            }
            summaries = tx.query("SELECT summary FROM runs WHERE summary IS NOT NULL")
            in_summaries = self._stand_in_texts(tx, (_json_value(r[0]) for r in summaries))
            keys = sorted(bytes.fromhex(k) for k in in_summaries)
            referenced.update(self._known_contents(tx, keys).values())
            unused = [
                (int(i),)
                for (i,) in tx.query("SELECT id FROM contents")
                if int(i) not in referenced
            ]
            if unused:
                tx.executemany("DELETE FROM contents WHERE id = ?", unused)
            tx.execute(
                "DELETE FROM datasets WHERE NOT EXISTS (SELECT 1 FROM runs"
                " WHERE runs.dataset_id = datasets.id AND runs.dataset_hash = datasets.hash)"
            )
        return deleted

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._close()
