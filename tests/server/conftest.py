"""Fixtures for the evaluation service tests: a real ``goldeval serve`` (uvicorn) process on
127.0.0.1, over a tiny project in tmp_path, on SQLite and on the throwaway PostgreSQL of the
store tests; ``goldeval worker`` processes; httpx clients with each role's key.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from goldeval.cli.scaffold import init_dataset
from goldeval.store.queue import FINISHED
from tests.store.conftest import (  # noqa: F401  (fixtures re-used from the store tests)
    PostgresServer,
    _raw_connect,
    _with_search_path,
    postgres_server,
)

KEYS = {
    "EVAL": "eval-key-0123456789abcdef",
    "ADMIN": "admin-key-0123456789abcdef",
    "MONITOR": "monitor-key-0123456789abcdef",
}
API_KEYS_ENV = ",".join(f"{key}:{role}" for role, key in KEYS.items())


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_project(root: Path, rows: int = 2) -> Path:
    """A project with dataset ``demo-v1`` (``goldeval init``), ``rows`` rows in all."""
    root.mkdir(parents=True, exist_ok=True)
    init_dataset("demo", root)
    folder = root / "golden" / "demo"
    if rows > 2:
        lines = (folder / "demo.jsonl").read_text(encoding="utf-8").splitlines()
        for n in range(3, rows + 1):
            row = {
                "id": f"extra-{n}",
                "prompt": f"Say welcome to customer number {n}.",
                "expect": {"contains_any": ["Welcome"]},
            }
            lines.append(json.dumps(row))
            (folder / "fixtures" / f"extra-{n}.out.md").write_text(
                f"Welcome, customer {n}!\n", encoding="utf-8"
            )
        (folder / "demo.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@dataclass
class Proc:
    """A ``goldeval serve`` or ``goldeval worker`` subprocess."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]
    log: Path
    port: int | None = None
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Proc:
        handle = self.log.open("ab")
        self.proc = subprocess.Popen(
            self.argv,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        handle.close()
        if self.port is not None:
            self.wait_healthy()
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}:\n{self.output()}")
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"server not healthy after {timeout}s:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in self.output().splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def kill_hard(self) -> None:
        """SIGKILL the process only (not its children: they get their parent-death signal)."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=30)

    def stop(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        return int(self.proc.returncode)


@dataclass
class Service:
    """A project, its store and the processes serving it."""

    root: Path
    store_url: str
    backend: str
    env: dict[str, str]
    procs: list[Proc] = field(default_factory=list)
    server: Proc | None = None

    def _command(self, *args: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "goldeval.cli.main",
            *args,
            "--store",
            self.store_url,
            "--root",
            str(self.root),
        ]

    def serve(self, *extra: str, workers: int = 1, lease: float = 30.0) -> Proc:
        port = free_port()
        argv = self._command(
            "serve", "--port", str(port), "--workers", str(workers), "--lease", str(lease), *extra
        )
        proc = Proc(argv, self.root, self.env, self.root / f"serve-{port}.log", port=port)
        self.procs.append(proc.start())
        self.server = proc
        return proc

    def worker(self, *, workers: int = 1, lease: float = 30.0, name: str = "worker") -> Proc:
        argv = self._command("worker", "--workers", str(workers), "--lease", str(lease))
        log = self.root / f"{name}-{len(self.procs)}.log"
        proc = Proc(argv, self.root, self.env, log)
        self.procs.append(proc.start())
        return proc

    def client(self, role: str | None = "EVAL", *, key: str | None = None) -> httpx.Client:
        assert self.server is not None
        headers = {}
        if key is not None:
            headers["X-API-Key"] = key
        elif role is not None:
            headers["X-API-Key"] = KEYS[role]
        return httpx.Client(base_url=self.server.base_url, headers=headers, timeout=30)

    def wait_status(
        self,
        run_id: str,
        statuses: tuple[str, ...] = FINISHED,
        timeout: float = 90.0,
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self.client("EVAL") as client:
            while True:
                body = client.get(f"/api/eval/runs/{run_id}").json()
                if body.get("status") in statuses:
                    return dict(body)
                if time.monotonic() > deadline:
                    logs = "\n".join(p.output()[-3000:] for p in self.procs)
                    raise AssertionError(f"run {run_id} still {body.get('status')}:\n{logs}")
                # the same deadline, polled finer: each wait ends up to 0.15 s sooner
                time.sleep(0.05)

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.proc is not None and proc.proc.poll() is None:
                proc.stop()


def _service_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GOLDEVAL_"))}
    env["GOLDEVAL_API_KEYS"] = API_KEYS_ENV
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh store: an SQLite file, or a PostgreSQL schema of the throwaway server."""
    if backend == "sqlite":
        yield str(tmp_path / "project" / ".goldeval" / "goldeval.sqlite3")
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    schema = f"s_{uuid.uuid4().hex[:16]}"
    with _raw_connect(server.url) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield _with_search_path(server.url, schema)
    finally:
        with _raw_connect(server.url) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def service_factory(tmp_path: Path, store_url: str, backend: str) -> Iterator[Any]:
    made: list[Service] = []

    def make(rows: int = 2, env: dict[str, str] | None = None) -> Service:
        root = make_project(tmp_path / "project", rows)
        svc = Service(root, store_url, backend, _service_env(env))
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.close()


@pytest.fixture
def service(service_factory: Any) -> Service:
    """``goldeval serve`` with one in-process worker over a two-row project."""
    svc: Service = service_factory()
    svc.serve(lease=5)
    return svc


@contextmanager
def table_locked(store_url: str, table: str) -> Iterator[None]:
    """``table`` of the PostgreSQL store held under an ACCESS EXCLUSIVE lock by another
    connection for the ``with`` block: a real slow store, not a stub (reads of it wait)."""
    from goldeval.store import open_store

    locked, release = threading.Event(), threading.Event()

    def hold_lock() -> None:
        with open_store(store_url) as store:
            with store._transaction("test") as tx:  # type: ignore[attr-defined]
                tx.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
                locked.set()
                release.wait(120)

    holder = threading.Thread(target=hold_lock)
    holder.start()
    try:
        assert locked.wait(30), f"the lock on {table} was never taken"
        yield
    finally:
        release.set()
        holder.join(120)
