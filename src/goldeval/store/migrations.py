"""Versioned schema migrations for the run store, one numbered list per backend.

A store records the migrations applied to it in ``schema_version`` (one row per version).
Opening a store applies every step newer than its highest version, in order, inside one
transaction that holds the backend's writer lock, so two processes opening the same store
for the first time neither race nor apply a step twice. Steps are append-only: never edit a
released step, add a new one. Both lists must always have the same versions.

Versions:

1. the core tables: ``datasets``, ``runs``, ``cases``, ``attempts``;
2. the artifact inventory (``artifacts``: path, SHA-256, size per run);
3. ``runs.run_key`` (a user-given key naming one run across processes and shards) with its
   unique index, and the operational indexes on ``runs`` (status and dataset listings);
4. drop the attempts status index;
5. deduplicated storage (:mod:`goldeval.store.pages`): ``contents`` (each distinct case info
   and attempt content once, by SHA-256) and ``run_pages`` (per run, compressed pages of
   entries pointing at contents); the rows of ``cases`` and ``attempts`` are moved into them
   (the ``move_rows_to_pages`` hook of the store) and the two tables dropped.
6. ``service_runs``: the queue of the evaluation service (``goldeval serve``), one row per
   run requested over HTTP, linked to its store run by ``run_key`` (see
   :mod:`goldeval.store.queue`).
7. ``service_runs.idempotency_owner``: an idempotency key belongs to the API key that used it
   (a stable digest of it, never the key); the unique index is on (owner, key). Keys recorded
   before keep one shared owner ('').
8. attempts as rows again, narrow and indexed: ``attempts`` (run, case, attempt index, model,
   status, error kind, duration, tokens, content id and the record's other run fields),
   keyed for keyset paging by (run, case, index, model), indexed by (run, status, case,
   index, model) for a status-filtered page and by (case, run) for a case's history over
   runs; ``run_cases`` (run, case, content id). Texts stay in ``contents``, once per SHA-256.
   The pages of every run are moved into rows (the ``move_pages_to_rows`` hook) and
   ``run_pages`` dropped.
9. run status INCOMPLETE in ``runs`` and ``service_runs``: a run cut short by ``-x`` /
   ``--maxfail``, its deadline or its budget, named as its run document and summary.json name
   it (a signal still makes it INTERRUPTED). SQLite cannot alter a CHECK: both tables are
   rebuilt from their own stored definition, rows and indexes kept (the ``rebuild_status_checks``
   hook, foreign keys off around the migration so dropping ``runs`` cascades to nothing);
   PostgreSQL replaces the two CHECK constraints.
10. ``service_counters`` (name, labels, value): the counters ``/metrics`` reads instead of
   scanning attempts (:mod:`goldeval.store.counters`), filled from the rows already stored
   (runs by status and dataset, attempts by status, errors by kind, tokens; cost and the run
   duration histogram count from this version on).
11. ``service_runs.exit_decision``: the exit decision (code and reason, as run.json's
   ``exitDecision``) the worker recorded when it ended the run, so the API reads it instead of
   rebuilding it from the exit code and the log. Rows ended before keep NULL (the API rebuilds
   theirs as before).
12. ``attempts.variant``: the manifest variant a variant session's attempt ran.
13. repeated runs share their rows (:mod:`goldeval.store.sharing`): ``runs.rows_of`` names
   the run whose ``attempts`` and ``run_cases`` rows a run reads (NULL: its own), and
   ``run_timings`` keeps what such a run does not share with them (each attempt's duration
   and run fields, zlib-compressed chunks keyed by their first attempt key). The view
   ``run_attempts`` is every run's attempts as rows, shared or not, for SQL over runs.
14. ``run_counts`` (run, status, n): each run's attempts by status, kept in the transaction
   that writes its attempts (:mod:`goldeval.store.counters`), so the API's run answer reads a
   few rows instead of counting every attempt of the run; filled from ``run_attempts``.
15. ``service_runs.queued_at``: when a queued run entered the queue, created or resumed
   (``/metrics``' oldest queued age counted a resumed run from its creation), indexed with
   the status; older rows take their ``created_at``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Backend = Literal["sqlite", "postgresql"]

#: The run statuses of schemas 1-8: the CHECK of released steps 1 and 6 (never edited).
_RUN_STATUSES_V1: tuple[str, ...] = ("QUEUED", "RUNNING", "COMPLETED", "FAILED", "INTERRUPTED")
#: Since schema 9, also INCOMPLETE (cut short by -x/--maxfail, the deadline or the budget).
RUN_STATUSES: tuple[str, ...] = (*_RUN_STATUSES_V1, "INCOMPLETE")
ATTEMPT_STATUSES: tuple[str, ...] = ("PASS", "FAIL", "SKIPPED", "ERROR")

_RUN_STATUS_CHECK = ", ".join(f"'{s}'" for s in _RUN_STATUSES_V1)
#: The run status CHECK of schema 9 on: ``status IN (...)``.
RUN_STATUS_CHECK = "status IN (" + ", ".join(f"'{s}'" for s in RUN_STATUSES) + ")"
_ATTEMPT_STATUS_CHECK = ", ".join(f"'{s}'" for s in ATTEMPT_STATUSES)


@dataclass(frozen=True)
class Migration:
    """One schema step: ``version`` is applied after ``version - 1``."""

    version: int
    description: str
    statements: tuple[str, ...]
    hook: str | None = None
    """Name of a store method ``(tx) -> None`` run after ``statements`` (moving data)."""
    after: tuple[str, ...] = ()
    """Statements run after the hook (dropping what it moved)."""


# Created before any step so the version can be read; not itself a numbered step.
SCHEMA_VERSION_DDL: dict[Backend, str] = {
    "sqlite": (
        "CREATE TABLE IF NOT EXISTS schema_version ("
        " version INTEGER PRIMARY KEY,"
        " description TEXT NOT NULL,"
        " applied_at TEXT NOT NULL)"
    ),
    "postgresql": (
        "CREATE TABLE IF NOT EXISTS schema_version ("
        " version INTEGER PRIMARY KEY,"
        " description TEXT NOT NULL,"
        " applied_at TIMESTAMPTZ NOT NULL)"
    ),
}


def _core(json_type: str, ts_type: str) -> tuple[str, ...]:
    return (
        "CREATE TABLE datasets ("
        " id TEXT NOT NULL,"
        " hash TEXT NOT NULL,"
        " source TEXT,"
        f" first_seen {ts_type} NOT NULL,"
        " PRIMARY KEY (id, hash))",
        "CREATE TABLE runs ("
        " run_id TEXT PRIMARY KEY,"
        " dataset_id TEXT NOT NULL,"
        " dataset_hash TEXT NOT NULL,"
        " mode TEXT NOT NULL,"
        " model TEXT,"
        f" protocol {json_type} NOT NULL,"
        f" configuration {json_type} NOT NULL,"
        f" status TEXT NOT NULL CHECK (status IN ({_RUN_STATUS_CHECK})),"
        f" started_at {ts_type} NOT NULL,"
        f" finished_at {ts_type},"
        f" summary {json_type},"
        " FOREIGN KEY (dataset_id, dataset_hash) REFERENCES datasets (id, hash))",
        "CREATE TABLE cases ("
        " run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,"
        " case_id TEXT NOT NULL,"
        f" info {json_type} NOT NULL,"
        " PRIMARY KEY (run_id, case_id))",
        "CREATE TABLE attempts ("
        " run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,"
        " case_id TEXT NOT NULL,"
        " attempt_index INTEGER NOT NULL,"
        " model TEXT NOT NULL DEFAULT '',"
        f" status TEXT NOT NULL CHECK (status IN ({_ATTEMPT_STATUS_CHECK})),"
        f" record {json_type} NOT NULL,"
        f" created_at {ts_type} NOT NULL,"
        " PRIMARY KEY (run_id, case_id, attempt_index, model))",
        "CREATE INDEX attempts_run_status ON attempts (run_id, status)",
    )


def _artifacts(ts_type: str) -> tuple[str, ...]:
    return (
        "CREATE TABLE artifacts ("
        " run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,"
        " path TEXT NOT NULL,"
        " sha256 TEXT NOT NULL,"
        " size BIGINT NOT NULL,"
        f" created_at {ts_type} NOT NULL,"
        " PRIMARY KEY (run_id, path))",
    )


_RUN_KEY: tuple[str, ...] = (
    "ALTER TABLE runs ADD COLUMN run_key TEXT",
    "CREATE UNIQUE INDEX runs_run_key ON runs (run_key)",
    "CREATE INDEX runs_status_started ON runs (status, started_at)",
    "CREATE INDEX runs_dataset_started ON runs (dataset_id, started_at)",
)

# The primary key (run_id, ...) already serves every per-run read; the extra status index
# cost about a third of the write time of a 100,000-attempt batch (benchmarks/bench_store.py).
_DROP_STATUS_INDEX: tuple[str, ...] = ("DROP INDEX IF EXISTS attempts_run_status",)


def _service_runs(json_type: str, ts_type: str) -> tuple[str, ...]:
    return (
        "CREATE TABLE service_runs ("
        " id TEXT PRIMARY KEY,"
        " idempotency_key TEXT,"
        f" status TEXT NOT NULL CHECK (status IN ({_RUN_STATUS_CHECK})),"
        " dataset_id TEXT NOT NULL,"
        f" request {json_type} NOT NULL,"
        " run_key TEXT NOT NULL,"
        " run_id TEXT,"
        " run_dir TEXT,"
        " worker TEXT,"
        " claims INTEGER NOT NULL DEFAULT 0,"
        " cancel_requested INTEGER NOT NULL DEFAULT 0,"
        " exit_code INTEGER,"
        " error TEXT,"
        f" created_at {ts_type} NOT NULL,"
        f" started_at {ts_type},"
        f" heartbeat_at {ts_type},"
        f" finished_at {ts_type})",
        "CREATE UNIQUE INDEX service_runs_idempotency ON service_runs (idempotency_key)",
        "CREATE UNIQUE INDEX service_runs_run_key ON service_runs (run_key)",
        "CREATE INDEX service_runs_created ON service_runs (created_at, id)",
        "CREATE INDEX service_runs_status ON service_runs (status, created_at, id)",
        "CREATE INDEX service_runs_dataset ON service_runs (dataset_id, created_at, id)",
    )


# The same statements on both backends: a column, the old rows' shared owner, the new index.
_IDEMPOTENCY_OWNER: tuple[str, ...] = (
    "ALTER TABLE service_runs ADD COLUMN idempotency_owner TEXT",
    "UPDATE service_runs SET idempotency_owner = '' WHERE idempotency_key IS NOT NULL",
    "DROP INDEX service_runs_idempotency",
    "CREATE UNIQUE INDEX service_runs_idempotency_owner"
    " ON service_runs (idempotency_owner, idempotency_key)",
)
_IDEMPOTENCY_DESCRIPTION = "service_runs: idempotency keys scoped to the API key that used them"


def _pages(id_type: str, bytes_type: str, ts_type: str) -> tuple[str, ...]:
    return (
        "CREATE TABLE contents ("
        f" id {id_type},"
        f" sha256 {bytes_type} NOT NULL UNIQUE,"
        " body TEXT NOT NULL)",
        "CREATE TABLE run_pages ("
        " run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,"
        " page_no INTEGER NOT NULL,"
        " kind TEXT NOT NULL CHECK (kind IN ('case', 'attempt')),"
        f" body {bytes_type} NOT NULL,"
        f" created_at {ts_type} NOT NULL,"
        " PRIMARY KEY (run_id, page_no))",
    )


_DROP_ROW_TABLES: tuple[str, ...] = ("DROP TABLE attempts", "DROP TABLE cases")


def _rows(text: str, real: str, without_rowid: str) -> tuple[str, ...]:
    """Schema 7. ``text``: the key text type (PostgreSQL: ``TEXT COLLATE "C"``, so keyset
    order is code point order, as in Python and SQLite, whatever the database's locale);
    ``without_rowid``: SQLite's clustered primary key (the table is its key index)."""
    return (
        "CREATE TABLE attempts ("
        " run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,"
        f" case_id {text} NOT NULL,"
        " attempt_index INTEGER NOT NULL,"
        f" model {text} NOT NULL DEFAULT '',"
        f" status TEXT NOT NULL CHECK (status IN ({_ATTEMPT_STATUS_CHECK})),"
        " error_kind TEXT,"
        f" duration_ms {real},"
        " tokens BIGINT,"
        " content_id BIGINT NOT NULL,"
        " fields TEXT NOT NULL,"
        f" PRIMARY KEY (run_id, case_id, attempt_index, model)){without_rowid}",
        "CREATE INDEX attempts_run_status_key"
        " ON attempts (run_id, status, case_id, attempt_index, model)",
        "CREATE INDEX attempts_case_run ON attempts (case_id, run_id)",
        "CREATE TABLE run_cases ("
        " run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,"
        f" case_id {text} NOT NULL,"
        " content_id BIGINT NOT NULL,"
        f" PRIMARY KEY (run_id, case_id)){without_rowid}",
    )


_DROP_PAGES: tuple[str, ...] = ("DROP TABLE run_pages",)

#: The tables whose ``status`` column holds a run status (schema 9 widens their CHECK).
RUN_STATUS_TABLES: tuple[str, ...] = ("runs", "service_runs")
_INCOMPLETE_DESCRIPTION = "run status INCOMPLETE in runs and service_runs"
# PostgreSQL names an inline column CHECK "<table>_<column>_check"; no IF EXISTS, so a store
# whose constraint is named otherwise fails the step instead of keeping the old CHECK.
_PG_INCOMPLETE: tuple[str, ...] = tuple(
    statement
    for table in RUN_STATUS_TABLES
    for statement in (
        f"ALTER TABLE {table} DROP CONSTRAINT {table}_status_check",
        f"ALTER TABLE {table} ADD CONSTRAINT {table}_status_check CHECK ({RUN_STATUS_CHECK})",
    )
)

_STATUS_CHECK = re.compile(r"CHECK \(status IN \([^()]*\)\)")


def rebuilt_table_sql(create_sql: str, table: str, new_name: str) -> str:
    """SQLite's stored ``CREATE TABLE`` of ``table`` as ``new_name`` with schema 9's run status
    CHECK. Built from the stored text, not a copy of steps 1 and 6, so every column a later
    step added (``run_key``, ``idempotency_owner``, ...) is kept in its place."""
    head = re.match(rf'\s*CREATE TABLE\s+(?:"{table}"|{table})\s*\(', create_sql)
    checks = _STATUS_CHECK.findall(create_sql)
    if head is None or len(checks) != 1:
        raise ValueError(f"unexpected definition of table {table}: {create_sql[:200]}")
    body = create_sql[head.end() :]
    return f"CREATE TABLE {new_name} (" + _STATUS_CHECK.sub(f"CHECK ({RUN_STATUS_CHECK})", body)


def _counters(real: str) -> tuple[str, ...]:
    fill = "INSERT INTO service_counters (name, labels, value) "
    return (
        "CREATE TABLE service_counters ("
        " name TEXT NOT NULL,"
        " labels TEXT NOT NULL,"
        f" value {real} NOT NULL,"
        " PRIMARY KEY (name, labels))",
        fill + "SELECT 'runs', status || '|' || dataset_id, COUNT(*) FROM service_runs"
        " GROUP BY status, dataset_id",
        fill + "SELECT 'attempts', status, COUNT(*) FROM attempts GROUP BY status",
        fill + "SELECT 'provider_errors', COALESCE(error_kind, 'UNKNOWN'), COUNT(*)"
        " FROM attempts WHERE status = 'ERROR' GROUP BY COALESCE(error_kind, 'UNKNOWN')",
        fill + "SELECT 'tokens', '', SUM(tokens) FROM attempts HAVING SUM(tokens) IS NOT NULL",
    )


#: The whole step, one tuple per backend: (version, description, statements by backend).
_COUNTERS = (
    10,
    "service_counters: what /metrics reads, kept as runs and attempts move",
    {"sqlite": _counters("REAL"), "postgresql": _counters("DOUBLE PRECISION")},
)
_DECISION = (
    11,
    "service_runs.exit_decision: the exit decision recorded when the run ended",
    {
        "sqlite": ("ALTER TABLE service_runs ADD COLUMN exit_decision TEXT",),
        "postgresql": ("ALTER TABLE service_runs ADD COLUMN exit_decision JSONB",),
    },
)
_VARIANT = (
    12,
    "attempts.variant: the manifest variant a variant session's attempt ran",
    ("ALTER TABLE attempts ADD COLUMN variant TEXT",),
)


def _sharing(text: str, bytes_type: str, without_rowid: str) -> tuple[str, ...]:
    return (
        "ALTER TABLE runs ADD COLUMN rows_of TEXT",
        "CREATE INDEX runs_rows_of ON runs (rows_of)",
        "CREATE TABLE run_timings ("
        " run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,"
        f" case_id {text} NOT NULL,"
        " attempt_index INTEGER NOT NULL,"
        f" model {text} NOT NULL,"
        f" body {bytes_type} NOT NULL,"
        f" PRIMARY KEY (run_id, case_id, attempt_index, model)){without_rowid}",
        # Every run's attempts as rows, its own or shared (a sharing run's duration is in its
        # run_timings, so NULL here): what SQL over runs reads.
        "CREATE VIEW run_attempts AS SELECT r.run_id, a.case_id, a.attempt_index, a.model,"
        " a.status, a.error_kind,"
        " CASE WHEN r.rows_of IS NULL THEN a.duration_ms END AS duration_ms,"
        " a.tokens, a.content_id, a.variant"
        " FROM runs r JOIN attempts a ON a.run_id = COALESCE(r.rows_of, r.run_id)",
    )


def _run_counts(text: str, without_rowid: str) -> tuple[str, ...]:
    return (
        "CREATE TABLE run_counts ("
        " run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,"
        f" status {text} NOT NULL,"
        " n BIGINT NOT NULL,"
        f" PRIMARY KEY (run_id, status)){without_rowid}",
        "INSERT INTO run_counts (run_id, status, n)"
        " SELECT run_id, status, COUNT(*) FROM run_attempts GROUP BY run_id, status",
    )


def _queued_at(ts_type: str) -> tuple[str, ...]:
    return (
        f"ALTER TABLE service_runs ADD COLUMN queued_at {ts_type}",
        "UPDATE service_runs SET queued_at = created_at",
        "CREATE INDEX service_runs_queued ON service_runs (status, queued_at, id)",
    )


_QUEUED_AT_DESCRIPTION = "service_runs.queued_at: when a run entered the queue (or again)"
_RUN_COUNTS_DESCRIPTION = "run_counts: each run's attempts by status, kept as they are written"
_SHARING_DESCRIPTION = "runs.rows_of, run_timings and the run_attempts view: shared rows"
_ROWS_DESCRIPTION = "attempts and run_cases as rows (run pages moved), keyset-paging indexes"
_PAGES_DESCRIPTION = "deduplicated contents and run pages (cases and attempts moved)"

SQLITE_MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "core tables: datasets, runs, cases, attempts", _core("TEXT", "TEXT")),
    Migration(2, "artifact inventory", _artifacts("TEXT")),
    Migration(3, "runs.run_key and run listing indexes", _RUN_KEY),
    Migration(4, "drop the attempts status index (writes are the hot path)", _DROP_STATUS_INDEX),
    Migration(
        5,
        _PAGES_DESCRIPTION,
        _pages("INTEGER PRIMARY KEY", "BLOB", "TEXT"),
        hook="move_rows_to_pages",
        after=_DROP_ROW_TABLES,
    ),
    Migration(6, "service_runs: the evaluation service queue", _service_runs("TEXT", "TEXT")),
    Migration(7, _IDEMPOTENCY_DESCRIPTION, _IDEMPOTENCY_OWNER),
    Migration(
        8,
        _ROWS_DESCRIPTION,
        _rows("TEXT", "REAL", " WITHOUT ROWID"),
        hook="move_pages_to_rows",
        after=_DROP_PAGES,
    ),
    Migration(9, _INCOMPLETE_DESCRIPTION, (), hook="rebuild_status_checks"),
    Migration(_COUNTERS[0], _COUNTERS[1], _COUNTERS[2]["sqlite"]),
    Migration(_DECISION[0], _DECISION[1], _DECISION[2]["sqlite"]),
    Migration(*_VARIANT),
    Migration(13, _SHARING_DESCRIPTION, _sharing("TEXT", "BLOB", " WITHOUT ROWID")),
    Migration(14, _RUN_COUNTS_DESCRIPTION, _run_counts("TEXT", " WITHOUT ROWID")),
    Migration(15, _QUEUED_AT_DESCRIPTION, _queued_at("TEXT")),
)

POSTGRES_MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "core tables: datasets, runs, cases, attempts", _core("JSONB", "TIMESTAMPTZ")),
    Migration(2, "artifact inventory", _artifacts("TIMESTAMPTZ")),
    Migration(3, "runs.run_key and run listing indexes", _RUN_KEY),
    Migration(4, "drop the attempts status index (writes are the hot path)", _DROP_STATUS_INDEX),
    Migration(
        5,
        _PAGES_DESCRIPTION,
        _pages("BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", "BYTEA", "TIMESTAMPTZ"),
        hook="move_rows_to_pages",
        after=_DROP_ROW_TABLES,
    ),
    Migration(
        6, "service_runs: the evaluation service queue", _service_runs("JSONB", "TIMESTAMPTZ")
    ),
    Migration(7, _IDEMPOTENCY_DESCRIPTION, _IDEMPOTENCY_OWNER),
    Migration(
        8,
        _ROWS_DESCRIPTION,
        _rows('TEXT COLLATE "C"', "DOUBLE PRECISION", ""),
        hook="move_pages_to_rows",
        after=_DROP_PAGES,
    ),
    Migration(9, _INCOMPLETE_DESCRIPTION, _PG_INCOMPLETE),
    Migration(_COUNTERS[0], _COUNTERS[1], _COUNTERS[2]["postgresql"]),
    Migration(_DECISION[0], _DECISION[1], _DECISION[2]["postgresql"]),
    Migration(*_VARIANT),
    Migration(13, _SHARING_DESCRIPTION, _sharing('TEXT COLLATE "C"', "BYTEA", "")),
    Migration(14, _RUN_COUNTS_DESCRIPTION, _run_counts("TEXT", "")),
    Migration(15, _QUEUED_AT_DESCRIPTION, _queued_at("TIMESTAMPTZ")),
)

MIGRATIONS: dict[Backend, tuple[Migration, ...]] = {
    "sqlite": SQLITE_MIGRATIONS,
    "postgresql": POSTGRES_MIGRATIONS,
}

LATEST_VERSION = SQLITE_MIGRATIONS[-1].version


def pending(backend: Backend, current: int) -> list[Migration]:
    """The steps a store at schema ``current`` still needs, oldest first."""
    return [m for m in MIGRATIONS[backend] if m.version > current]


def _check() -> None:
    for backend, steps in MIGRATIONS.items():
        versions = [m.version for m in steps]
        if versions != list(range(1, len(steps) + 1)):
            raise AssertionError(f"{backend} migrations must be numbered 1..n: {versions}")
        if versions[-1] != LATEST_VERSION:
            raise AssertionError(f"{backend} migrations stop at {versions[-1]}")


_check()
