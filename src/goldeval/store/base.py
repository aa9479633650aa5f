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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, ClassVar, Literal, cast

from goldeval.store.migrations import (
    ATTEMPT_STATUSES,
    LATEST_VERSION,
    RUN_STATUSES,
    SCHEMA_VERSION_DDL,
    Backend,
    pending,
)

RunStatus = Literal["QUEUED", "RUNNING", "COMPLETED", "FAILED", "INTERRUPTED"]
"""Life cycle of a run: QUEUED -> RUNNING -> COMPLETED | FAILED | INTERRUPTED."""

AttemptKey = tuple[str, int, str]
"""(case id, attempt index, model) of an attempt; model is ``""`` when the run has none."""
AttemptText = tuple[str, int, "str | None", str, str]
"""(case id, attempt index, model or None, status, the record as compact JSON)."""

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


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every non-empty secret replaced by ``***`` (defence in depth)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


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
        raw model text): ``(case_id, index, model, status, record_json)`` per attempt. The
        plugin's path: attempts reach the controller as JSON text, so parsing them only to
        serialise them again would be wasted work. The default parses; SQL stores don't."""
        return self.record_attempts(run_id, [json.loads(row[4]) for row in rows])

    @abstractmethod
    def graded_keys(self, run_id: str, *, include_errors: bool) -> set[AttemptKey]:
        """Keys of the attempts already stored, so a resumed run skips them.

        With ``include_errors=False`` ERROR attempts are left out, so they are retried.
        """

    @abstractmethod
    def attempts(self, run_id: str) -> list[dict[str, Any]]:
        """The stored attempt records, ordered by case id, attempt index and model."""

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

    def insert_new(self, insert: str, upsert: str, rows: Sequence[Sequence[Any]]) -> int:
        """``executemany(upsert, rows)``, tried first as a plain ``insert`` of all rows.

        A fresh run conflicts with nothing, and PostgreSQL's ``ON CONFLICT`` costs about a
        third more per row even when nothing conflicts. When a row does conflict (a resumed
        run, a rerun of errors, a re-sent report) the insert is rolled back to a savepoint
        and the batch is written with the upsert, so the result is the same either way.
        """
        return self.executemany(upsert, rows)


_RUN_COLUMNS = (
    "run_id, run_key, dataset_id, dataset_hash, mode, model, protocol, configuration,"
    " status, started_at, finished_at, summary"
)

_UPSERT_DATASET = (
    "INSERT INTO datasets (id, hash, source, first_seen) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (id, hash) DO UPDATE SET source = COALESCE(datasets.source, excluded.source)"
)

_INSERT_RUN = (
    "INSERT INTO runs (run_id, run_key, dataset_id, dataset_hash, mode, model, protocol,"
    " configuration, status, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'RUNNING', ?)"
    " ON CONFLICT DO NOTHING"
)

_INSERT_CASE = (
    "INSERT INTO cases (run_id, case_id, info) VALUES (?, ?, ?)"
    " ON CONFLICT (run_id, case_id) DO NOTHING"
)

# A duplicate key is a no-op, except that a stored ERROR yields to a later non-ERROR record.
_INSERT_ATTEMPT = (
    "INSERT INTO attempts (run_id, case_id, attempt_index, model, status, record, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_UPSERT_ATTEMPT = (
    _INSERT_ATTEMPT + " ON CONFLICT (run_id, case_id, attempt_index, model) DO UPDATE SET"
    " status = excluded.status, record = excluded.record, created_at = excluded.created_at"
    " WHERE attempts.status = 'ERROR' AND excluded.status <> 'ERROR'"
)

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


def json_text(value: Any) -> str:
    """Compact JSON for a JSON column; NaN and infinities become null."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
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


class SqlStore(Store):
    """Store logic over a SQL connection; backends supply the hooks below."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._closed = False

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
    def _ts_param(self, value: datetime) -> Any:
        """A timestamp as the backend stores it."""

    @abstractmethod
    def _ts_value(self, raw: Any) -> datetime:
        """A stored timestamp back as an aware UTC datetime."""

    @abstractmethod
    def _close(self) -> None:
        """Close the connection."""

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
                tx.execute(
                    "INSERT INTO schema_version (version, description, applied_at)"
                    " VALUES (?, ?, ?)",
                    (step.version, step.description, self._ts_param(_utcnow())),
                )

    def _stored_run(self, row: tuple[Any, ...], *, resumed: bool) -> StoredRun:
        return StoredRun(
            run_id=row[0],
            run_key=row[1],
            dataset_id=row[2],
            dataset_hash=row[3],
            mode=row[4],
            model=row[5],
            protocol=cast(dict[str, Any], _json_value(row[6])),
            configuration=cast(dict[str, Any], _json_value(row[7])),
            status=row[8],
            started_at=self._ts_value(row[9]),
            resumed=resumed,
        )

    def _run_row(self, row: tuple[Any, ...]) -> RunRow:
        summary = _json_value(row[11]) if row[11] is not None else None
        return RunRow(
            run_id=row[0],
            run_key=row[1],
            dataset_id=row[2],
            dataset_hash=row[3],
            mode=row[4],
            model=row[5],
            protocol=cast(dict[str, Any], _json_value(row[6])),
            configuration=cast(dict[str, Any], _json_value(row[7])),
            status=row[8],
            started_at=self._ts_value(row[9]),
            finished_at=self._ts_value(row[10]) if row[10] is not None else None,
            pass_rate=_pass_rate(summary),
            summary=cast("dict[str, Any] | None", summary),
        )

    @staticmethod
    def _find(tx: Tx, column: str, value: str) -> tuple[Any, ...] | None:
        rows = tx.query(f"SELECT {_RUN_COLUMNS} FROM runs WHERE {column} = ?", (value,))
        return rows[0] if rows else None

    def _attempt_rows(
        self, run_id: str, records: Iterable[Mapping[str, Any]]
    ) -> list[tuple[Any, ...]]:
        now = self._ts_param(_utcnow())
        rows: list[tuple[Any, ...]] = []
        for record in records:
            (case_id, index, model), status = attempt_key(record)
            rows.append((run_id, case_id, index, model, status, json_text(dict(record)), now))
        return rows

    @staticmethod
    def _case_rows(run_id: str, infos: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
        return [
            (run_id, str(_field(info, "caseId", "case_id", "case")), json_text(dict(info)))
            for info in infos
        ]

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
                _UPSERT_DATASET, (dataset_id, dataset_hash, dataset_source, self._ts_param(now))
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
                        self._ts_param(now),
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
                    if run_key is not None and existing[1] != run_key:
                        raise RunConflictError(
                            f"run id {run_id!r} exists with run key {existing[1]!r}, "
                            f"not {run_key!r}"
                        )
            if (existing[2], existing[3]) != (dataset_id, dataset_hash):
                name = f"run key {run_key!r}" if run_key is not None else f"run id {run_id!r}"
                raise RunConflictError(
                    f"{name} belongs to run {existing[0]!r} of dataset "
                    f"{existing[2]}@{str(existing[3])[:12]}, not {dataset_id}@{dataset_hash[:12]}"
                )
            tx.execute(
                "UPDATE runs SET status = 'RUNNING', finished_at = NULL WHERE run_id = ?",
                (existing[0],),
            )
            row = self._find(tx, "run_id", existing[0])
            assert row is not None
            return self._stored_run(row, resumed=True)

    def record_case(self, run_id: str, case_info: Mapping[str, Any]) -> bool:
        return self.record_cases(run_id, [case_info]) == 1

    def record_cases(self, run_id: str, case_infos: Iterable[Mapping[str, Any]]) -> int:
        rows = self._case_rows(run_id, case_infos)
        if not rows:
            return 0
        with self._transaction("record_cases") as tx:
            return tx.executemany(_INSERT_CASE, rows)

    def record_attempt_texts(self, run_id: str, rows: Iterable[AttemptText]) -> int:
        now = self._ts_param(_utcnow())
        out: list[tuple[Any, ...]] = []
        for case_id, index, model, status, text in rows:
            _check_status(case_id, index, status)
            out.append((run_id, case_id, index, model or "", status, text, now))
        return self._write_attempts(out)

    def _write_attempts(self, rows: list[tuple[Any, ...]]) -> int:
        if not rows:
            return 0
        with self._transaction("record_attempts") as tx:
            return tx.insert_new(_INSERT_ATTEMPT, _UPSERT_ATTEMPT, rows)

    def record_attempt(self, run_id: str, record: Mapping[str, Any]) -> bool:
        rows = self._attempt_rows(run_id, [record])
        with self._transaction("record_attempt") as tx:
            return tx.execute(_UPSERT_ATTEMPT, rows[0]) == 1

    def record_attempts(self, run_id: str, records: Iterable[Mapping[str, Any]]) -> int:
        return self._write_attempts(self._attempt_rows(run_id, records))

    def graded_keys(self, run_id: str, *, include_errors: bool) -> set[AttemptKey]:
        sql = "SELECT case_id, attempt_index, model FROM attempts WHERE run_id = ?"
        params: tuple[Any, ...] = (run_id,)
        if not include_errors:
            sql += " AND status <> ?"
            params = (run_id, ERROR)
        with self._read("graded_keys") as tx:
            return {(str(c), int(i), str(m)) for c, i, m in tx.query(sql, params)}

    def attempts(self, run_id: str) -> list[dict[str, Any]]:
        with self._read("attempts") as tx:
            rows = tx.query(
                "SELECT record FROM attempts WHERE run_id = ?"
                " ORDER BY case_id, attempt_index, model",
                (run_id,),
            )
        return [cast(dict[str, Any], _json_value(r[0])) for r in rows]

    def cases(self, run_id: str) -> list[dict[str, Any]]:
        with self._read("cases") as tx:
            rows = tx.query("SELECT info FROM cases WHERE run_id = ?", (run_id,))
        infos = [cast(dict[str, Any], _json_value(r[0])) for r in rows]

        def order(info: dict[str, Any]) -> tuple[int, str]:
            line = info.get("line")
            return (line if isinstance(line, int) else 0, str(info.get("caseId", "")))

        return sorted(infos, key=order)

    def finish_run(self, run_id: str, status: RunStatus, summary: Mapping[str, Any]) -> None:
        if status not in RUN_STATUSES:
            raise ValueError(f"run status {status!r} is not one of {RUN_STATUSES}")
        with self._transaction("finish_run") as tx:
            changed = tx.execute(
                "UPDATE runs SET status = ?, finished_at = ?, summary = ? WHERE run_id = ?",
                (status, self._ts_param(_utcnow()), json_text(dict(summary)), run_id),
            )
            if changed != 1:
                raise StoreError(f"finish_run: no run {run_id!r} in {self.url}")

    def record_artifacts(self, run_id: str, artifacts: Iterable[tuple[str, str, int]]) -> int:
        now = self._ts_param(_utcnow())
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
        return [ArtifactRow(r[0], r[1], int(r[2]), self._ts_value(r[3])) for r in rows]

    def runs(self, limit: int = 50, dataset_id: str | None = None) -> list[RunRow]:
        where, params = ("WHERE dataset_id = ?", [dataset_id]) if dataset_id else ("", [])
        with self._read("runs") as tx:
            rows = tx.query(
                f"SELECT {_RUN_COLUMNS} FROM runs {where}"
                " ORDER BY started_at DESC, run_id DESC LIMIT ?",
                (*params, int(limit)),
            )
        return [self._run_row(r) for r in rows]

    def get_run(self, run_id_or_key: str) -> RunRow | None:
        with self._read("get_run") as tx:
            row = self._find(tx, "run_id", run_id_or_key) or self._find(
                tx, "run_key", run_id_or_key
            )
        return self._run_row(row) if row is not None else None

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._close()
