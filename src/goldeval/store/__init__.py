"""The run store: durable, queryable history of evaluation runs (SQLite or PostgreSQL).

>>> with open_store(".goldeval/goldeval.sqlite3") as store:          # doctest: +SKIP
...     run = store.begin_run("2026-01-01T00-00-00", run_key="ci-1234", dataset_id="gen-v1",
...                           dataset_hash="d4e8...", mode="fixture", protocol={},
...                           configuration={})
...     done = store.graded_keys(run.run_id, include_errors=False)  # skip on resume
...     store.record_attempts(run.run_id, [attempt.dump() for attempt in new_attempts])
...     store.finish_run(run.run_id, "COMPLETED", summary)

A pure library (no pytest imports). See :class:`~goldeval.store.base.Store` for the API.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from goldeval.store.base import (
    ArtifactRow,
    AttemptKey,
    RunConflictError,
    RunRow,
    RunStatus,
    Store,
    StoredRun,
    StoreError,
    attempt_key,
    redact_url,
)
from goldeval.store.migrations import LATEST_VERSION, RUN_STATUSES
from goldeval.store.sqlite import DEFAULT_PATH, SqliteStore

__all__ = [
    "DEFAULT_PATH",
    "LATEST_VERSION",
    "RUN_STATUSES",
    "ArtifactRow",
    "AttemptKey",
    "RunConflictError",
    "RunRow",
    "RunStatus",
    "Store",
    "StoreError",
    "StoredRun",
    "attempt_key",
    "open_store",
    "redact_url",
    "store_file",
    "store_url_problem",
]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_SQLITE_SCHEME = "sqlite://"


#: ``host=... password=...``: libpq's keyword form, which is no path (it became an SQLite file
#: named after it, the password in its name and in the printed rerun command).
_KEYWORD_DSN = re.compile(r"(?:^|\s)(?:host|hostaddr|dbname|user|password|port)\s*=", re.I)


def store_url_problem(url_or_path: str) -> str | None:
    """Why ``url_or_path`` names no store :func:`open_store` can open, or None: asked before
    a run, so that a mistake no retry fixes is not found after every model call."""
    target = url_or_path.strip()
    lowered = target.lower()
    if lowered.startswith((*_POSTGRES_SCHEMES, _SQLITE_SCHEME)):
        return None
    if "://" in target:
        scheme = target.split("://", 1)[0]
        return (
            f"unsupported store URL scheme {scheme!r} in {redact_url(target)}: use a file "
            "path, sqlite:///path or postgresql://user@host/db"
        )
    if _KEYWORD_DSN.search(target):
        return (
            "a PostgreSQL connection in keyword form (host=... dbname=...) is not a store "
            "URL: write it as postgresql://user@host:port/db, the password in PGPASSWORD"
        )
    return None


def store_file(url_or_path: str) -> Path | None:
    """The file of a file store: a path, or ``sqlite:///relative`` / ``sqlite:////absolute``
    as :func:`open_store` reads it (a relative one from the current folder); None for a
    server or an in-memory store. One reading for the pre-run checks and the store."""
    if "://" not in url_or_path:
        return Path(url_or_path)
    if not url_or_path.lower().startswith(_SQLITE_SCHEME):
        return None
    rest = url_or_path[len(_SQLITE_SCHEME) :]
    if rest in ("", "/", "/:memory:") or not rest.startswith("/"):
        return None
    return Path(rest[1:])


def open_store(
    url_or_path: str | os.PathLike[str] | None = None,
    *,
    busy_timeout: float = 30.0,
    connect_timeout: float = 10.0,
) -> Store:
    """Open (creating and migrating as needed) the run store at ``url_or_path``.

    - ``None``: the SQLite file ``.goldeval/goldeval.sqlite3`` under the current directory;
    - a filesystem path, or ``sqlite:///relative/path`` / ``sqlite:////absolute/path``
      (SQLAlchemy's spelling; ``sqlite://`` alone is an in-memory store);
    - ``postgresql://user:pass@host:port/db`` (or ``postgres://``): PostgreSQL, which needs
      psycopg 3 (``pip install 'pytest-goldeval[postgres]'``).

    ``busy_timeout`` is how long an SQLite write waits for another process's lock,
    ``connect_timeout`` how long a PostgreSQL connection attempt may take (seconds).
    Raises :class:`StoreError` when the store cannot be opened; its message never contains
    a password.
    """
    if url_or_path is None:
        return SqliteStore(DEFAULT_PATH, busy_timeout=busy_timeout)
    if isinstance(url_or_path, os.PathLike):
        return SqliteStore(url_or_path, busy_timeout=busy_timeout)
    target = str(url_or_path)
    lowered = target.lower()
    if lowered.startswith(_POSTGRES_SCHEMES):
        try:
            from goldeval.store.postgres import PostgresStore
        except ImportError as exc:
            raise StoreError(
                f"{redact_url(target)} needs psycopg 3: "
                f"pip install 'pytest-goldeval[postgres]' ({exc})"
            ) from None
        return PostgresStore(target, connect_timeout=connect_timeout)
    if lowered.startswith(_SQLITE_SCHEME):
        path = target[len(_SQLITE_SCHEME) :]
        if path in ("", "/", "/:memory:"):
            return SqliteStore(":memory:", busy_timeout=busy_timeout)
        if not path.startswith("/"):
            raise StoreError(f"invalid SQLite URL {target!r}: use sqlite:///path/to/file")
        return SqliteStore(Path(path[1:]), busy_timeout=busy_timeout)
    if "://" in target:
        scheme = target.split("://", 1)[0]
        raise StoreError(
            f"unsupported store URL scheme {scheme!r} in {redact_url(target)}: "
            "use a file path, sqlite:///path or postgresql://..."
        )
    return SqliteStore(target, busy_timeout=busy_timeout)
