"""Fixtures for the run store tests: the same tests run against SQLite and PostgreSQL.

PostgreSQL comes from ``GOLDEVAL_TEST_POSTGRES_URL`` when set; otherwise this file starts a
real throwaway server for the test session (``initdb`` + ``pg_ctl`` on a free port on
127.0.0.1, as the ``postgres`` OS user when the tests run as root), creates a database for
the session and stops the server at the end. Each test gets its own schema.

Without PostgreSQL binaries (and no URL) the PostgreSQL tests FAIL, so CI cannot pass
silently without them; set ``GOLDEVAL_SKIP_POSTGRES=1`` to skip them instead.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from goldeval.store import Store, open_store
from goldeval.store.migrations import Backend

SKIP_ENV = "GOLDEVAL_SKIP_POSTGRES"
URL_ENV = "GOLDEVAL_TEST_POSTGRES_URL"
SUPERUSER = "goldeval"
# A role that must authenticate with a password (scram), to test auth failures.
PASSWORD_ROLE = "goldeval_pw"
PASSWORD_ROLE_SECRET = "right-Horse-Battery-9"
SESSION_DB = "goldeval_store_tests"
PG_BINARIES = ("initdb", "pg_ctl", "postgres")


# --------------------------------------------------------------------------- PostgreSQL


@dataclass
class PostgresServer:
    """A PostgreSQL database for this test session."""

    url: str
    """URL of the session database; the role may create schemas in it."""
    password_url: str | None = None
    """URL (with the right password) of a role that requires one; None for external URLs."""
    password: str | None = None
    """The right password in ``password_url``."""
    owned: bool = False


def _unavailable(reason: str) -> None:
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"PostgreSQL tests skipped ({SKIP_ENV}=1): {reason}")
    pytest.fail(
        f"PostgreSQL is required for the store tests but {reason}. Install PostgreSQL "
        f"(initdb, pg_ctl, postgres on PATH or in /usr/lib/postgresql/*/bin), or point "
        f"{URL_ENV} at a server, or set {SKIP_ENV}=1 to skip the PostgreSQL tests.",
        pytrace=False,
    )


def find_postgres_binaries() -> dict[str, str] | None:
    """Paths of initdb, pg_ctl and postgres: PATH first, then the usual install dirs."""
    on_path = {name: shutil.which(name) for name in PG_BINARIES}
    if all(on_path.values()):
        return {name: str(path) for name, path in on_path.items()}

    def version(directory: str) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", directory)) or (0,)

    candidates = glob.glob("/usr/lib/postgresql/*/bin") + glob.glob("/usr/pgsql-*/bin")
    candidates += ["/usr/local/pgsql/bin", "/opt/homebrew/bin"]
    for directory in sorted(candidates, key=version, reverse=True):
        paths = {name: os.path.join(directory, name) for name in PG_BINARIES}
        if all(os.access(p, os.X_OK) for p in paths.values()):
            return paths
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ThrowawayPostgres:
    """initdb + pg_ctl start/stop of a private server in a temporary directory."""

    def __init__(self, binaries: dict[str, str]) -> None:
        self.bin = binaries
        self.base = Path(tempfile.mkdtemp(prefix="goldeval-pg-", dir="/tmp"))
        self.data = self.base / "data"
        self.sock = self.base / "sock"
        self.log = self.base / "server.log"
        self.port = 0
        self.user: str | None = None  # OS user running the server when we are root
        self.started = False

    def _command(self, argv: Sequence[str]) -> list[str]:
        if self.user is None:
            return list(argv)
        runuser = shutil.which("runuser")
        if runuser:
            return [runuser, "-u", self.user, "--", *argv]
        su = shutil.which("su")
        if su:
            return [su, "-s", "/bin/sh", self.user, "-c", shlex.join(argv)]
        pytest.fail("running as root but neither runuser nor su exists", pytrace=False)
        raise AssertionError  # unreachable

    def _run(self, argv: Sequence[str], what: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        result = subprocess.run(
            self._command(argv),
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{what} failed ({result.returncode}): {shlex.join(argv)}\n"
                f"{result.stdout}{result.stderr}\n{log}"
            )

    def start(self) -> None:
        self.data.mkdir()
        self.sock.mkdir()
        if os.geteuid() == 0:
            # postgres refuses to run as root: hand the directory to an unprivileged user.
            for name in ("postgres", "nobody"):
                with contextlib.suppress(KeyError):
                    entry = pwd.getpwnam(name)
                    self.user = name
                    break
            if self.user is None:
                raise RuntimeError("running as root and no 'postgres' or 'nobody' user exists")
            for path in (self.base, self.data, self.sock):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self.data.chmod(0o700)
        self._run(
            [
                self.bin["initdb"],
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ],
            "initdb",
        )
        # First match wins in pg_hba.conf: the password role must authenticate over TCP.
        hba = self.data / "pg_hba.conf"
        rules = (
            f"host all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n"
            f"host all {PASSWORD_ROLE} ::1/128 scram-sha-256\n"
        )
        hba.write_text(rules + hba.read_text())
        last: Exception | None = None
        for _ in range(3):  # the free port may be taken before the server binds it
            self.port = _free_port()
            options = (
                f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1"
                " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            )
            try:
                self._run(
                    [
                        self.bin["pg_ctl"],
                        "-D",
                        str(self.data),
                        "-l",
                        str(self.log),
                        "-w",
                        "-t",
                        "60",
                        "-o",
                        options,
                        "start",
                    ],
                    "pg_ctl start",
                )
            except RuntimeError as exc:
                last = exc
                continue
            self.started = True
            return
        raise RuntimeError(f"could not start PostgreSQL: {last}")

    def admin_url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def wait_ready(self, timeout: float = 30.0) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.admin_url(), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        try:
            if self.started:
                self._run(
                    [self.bin["pg_ctl"], "-D", str(self.data), "-m", "immediate", "-w", "stop"],
                    "pg_ctl stop",
                )
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


def _raw_connect(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True, connect_timeout=10, client_encoding="utf8")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL database (external URL, or a server started here)."""
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"PostgreSQL tests skipped ({SKIP_ENV}=1)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg 3 is not installed (pip install 'pytest-goldeval[test]')")
    external = os.environ.get(URL_ENV)
    if external:
        _raw_connect(external).close()  # fail early and clearly if unreachable
        yield PostgresServer(url=external)
        return
    binaries = find_postgres_binaries()
    if binaries is None:
        _unavailable("no PostgreSQL binaries (initdb, pg_ctl, postgres) were found")
        raise AssertionError  # unreachable
    server = ThrowawayPostgres(binaries)
    try:
        try:
            server.start()
            server.wait_ready()
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            pytest.fail(f"could not start a throwaway PostgreSQL server: {exc}", pytrace=False)
        with _raw_connect(server.admin_url()) as conn:
            conn.execute(f"CREATE DATABASE {SESSION_DB}")
            conn.execute(f"CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{PASSWORD_ROLE_SECRET}'")
        with _raw_connect(server.admin_url(SESSION_DB)) as conn:
            # Its own schema (first on its default search_path "$user", public).
            conn.execute(f"CREATE SCHEMA {PASSWORD_ROLE} AUTHORIZATION {PASSWORD_ROLE}")
        password_url = (
            f"postgresql://{PASSWORD_ROLE}:{PASSWORD_ROLE_SECRET}@127.0.0.1:{server.port}/"
            f"{SESSION_DB}"
        )
        yield PostgresServer(
            url=server.admin_url(SESSION_DB),
            password_url=password_url,
            password=PASSWORD_ROLE_SECRET,
            owned=True,
        )
    finally:
        server.stop()


# --------------------------------------------------------------------------- targets


@dataclass
class Target:
    """Where one test's store lives, plus raw SQL access that bypasses the store."""

    backend: Backend
    url: str
    schema: str | None = None
    _raw: Any = field(default=None, repr=False)

    def _connection(self) -> Any:
        if self._raw is None:
            if self.backend == "sqlite":
                import sqlite3

                self._raw = sqlite3.connect(self.url, isolation_level=None)
            else:
                self._raw = _raw_connect(self.url)
        return self._raw

    def _sql(self, sql: str) -> str:
        return sql if self.backend == "sqlite" else sql.replace("?", "%s")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        """Run one statement (``?`` placeholders) outside the store, autocommitted."""
        self._connection().execute(self._sql(sql), tuple(params))

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        rows = self._connection().execute(self._sql(sql), tuple(params)).fetchall()
        return [tuple(r) for r in rows]

    def tables(self) -> set[str]:
        if self.backend == "sqlite":
            rows = self.query("SELECT name FROM sqlite_master WHERE type = 'table'")
        else:
            rows = self.query(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = current_schema()"
            )
        return {str(r[0]) for r in rows}

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()
            self._raw = None


def _with_search_path(url: str, schema: str) -> str:
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options=-csearch_path%3D{schema}"


#: Undo schemas 15 (queued_at), 14 (run counts) and 13 (shared rows), for tests taking a
#: store back to an older schema: the view first (SQLite refuses to drop a column a view
#: refers to, such as attempts.variant).
UNDO_SCHEMA_13: tuple[str, ...] = (
    "DROP INDEX service_runs_queued",
    "ALTER TABLE service_runs DROP COLUMN queued_at",
    "DROP TABLE run_counts",
    "DROP VIEW run_attempts",
    "DROP TABLE run_timings",
    "DROP INDEX runs_rows_of",
    "ALTER TABLE runs DROP COLUMN rows_of",
)


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    """A fresh, empty store location on each backend (SQLite file / PostgreSQL schema)."""
    if request.param == "sqlite":
        tgt = Target("sqlite", str(tmp_path / "store" / "goldeval.sqlite3"))
        (tmp_path / "store").mkdir()
        try:
            yield tgt
        finally:
            tgt.close()
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    schema = f"t_{uuid.uuid4().hex[:16]}"
    with _raw_connect(server.url) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    tgt = Target("postgresql", _with_search_path(server.url, schema), schema=schema)
    try:
        yield tgt
    finally:
        tgt.close()
        with _raw_connect(server.url) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def store(target: Target) -> Iterator[Store]:
    """An opened (created and migrated) store on each backend."""
    with open_store(target.url) as opened:
        yield opened
