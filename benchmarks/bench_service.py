"""The evaluation service: ``GET /api/eval/runs`` with 10,000 runs stored, vs plain SQL.

    python benchmarks/bench_service.py [--runs 10000] [--requests 400] [--clients 50]
                                       [--total 4000] [--postgres URL | --no-postgres]

For each backend (SQLite, and PostgreSQL: a throwaway server started with the tests' helper,
or --postgres URL) the script fills a fresh store with ``--runs`` service runs, starts a real
``goldeval serve --workers 0`` (uvicorn) on 127.0.0.1 and measures, side by side in one
session:

* latency: ``--requests`` sequential ``GET /api/eval/runs`` (the first page, 50 runs, newest
  first) over one keep-alive connection, p50/p95; the reference is the plain SQL query of the
  same rows (``SELECT ... ORDER BY created_at DESC, id DESC LIMIT 51``) on one connection;
* the HTTP floor: ``GET /healthz`` (no store, no key) measured the same two ways;
* throughput: ``--clients`` concurrent clients (bare asyncio HTTP/1.1, one keep-alive
  connection each) sending
  ``--total`` requests in all, requests per second and p95; the reference is the same number of
  threads, one connection each, running the plain query.

With ``--observability`` it measures the operations surface instead (issue 33), on the same
fresh store of ``--runs`` finished service runs (each with the store run and summary the
plugin leaves):

* ``GET /metrics``: ``--requests`` sequential scrapes, p50/p95, first with no attempt stored,
  then after ``--attempts`` attempts were written through the store's own write path (which
  keeps the counters the scrape reads): flat means the scrape does not read attempts;
* ``GET /ui/``: the first page of the run index, its size and p50/p95 time.

The client runs on the same machine as the server (2 cores here), so both compete for CPU;
the figures are what one small machine gives, not a capacity plan.
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import os
import re
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

from _measure import table

from goldeval.cli.scaffold import init_dataset
from goldeval.store import open_store
from goldeval.store.base import json_text

KEY = "bench-key-0123456789abcdef"
MONITOR_KEY = "bench-monitor-0123456789abcdef"
PAGE = 50
LIST_SQL = (
    "SELECT id, idempotency_key, status, dataset_id, request, run_key, run_id, run_dir, worker,"
    " claims, cancel_requested, exit_code, error, created_at, started_at, heartbeat_at,"
    " finished_at FROM service_runs ORDER BY created_at DESC, id DESC LIMIT 51"
)


def fill(url: str, runs: int) -> None:
    """``runs`` finished service runs, one a minute, in one transaction."""
    statuses = ("COMPLETED", "COMPLETED", "COMPLETED", "FAILED", "INTERRUPTED")
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with open_store(url) as store:
        ts = store.ts_param  # type: ignore[attr-defined]
        rows = []
        for n in range(runs):
            created = start + timedelta(minutes=n)
            status = statuses[n % len(statuses)]
            request = {
                "dataset": f"ds-{n % 7}-v1",
                "mode": "fixture",
                "attempts": 1,
                "model": None,
                "provider": None,
                "baselineRunId": None,
                "deadlineSeconds": None,
                "noGate": False,
            }
            rows.append(
                (
                    f"{n:032x}",
                    f"ci-{n}",
                    status,
                    f"ds-{n % 7}-v1",
                    json_text(request),
                    f"svc-{n:032x}",
                    f"2026-run-{n}",
                    f"/runs/2026-run-{n}",
                    "bench:1:0",
                    1,
                    0,
                    0 if status == "COMPLETED" else 1,
                    None if status == "COMPLETED" else "x",
                    ts(created),
                    ts(created),
                    ts(created),
                    ts(created + timedelta(seconds=30)),
                )
            )
        with store._transaction("bench fill") as tx:  # type: ignore[attr-defined]
            tx.executemany(
                "INSERT INTO service_runs (id, idempotency_key, status, dataset_id, request,"
                " run_key, run_id, run_dir, worker, claims, cancel_requested, exit_code, error,"
                " created_at, started_at, heartbeat_at, finished_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(url: str, root: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = dict(os.environ, GOLDEVAL_API_KEYS=f"{KEY}:EVAL,{MONITOR_KEY}:MONITOR")
    src = str(Path(__file__).resolve().parent.parent / "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "goldeval.cli.main",
            "serve",
            "--port",
            str(port),
            "--workers",
            "0",
            "--store",
            url,
            "--root",
            str(root),
        ],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the server did not start")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def http_latency(base: str, n: int, path: str = "/api/eval/runs") -> list[float]:
    out = []
    with httpx.Client(base_url=base, headers={"X-API-Key": KEY}) as client:
        for _ in range(10):
            client.get(path)
        for _ in range(n):
            start = time.perf_counter()
            response = client.get(path)
            out.append(time.perf_counter() - start)
            assert response.status_code == 200
            if path == "/api/eval/runs":
                assert len(response.json()["items"]) == PAGE
    return out


def http_throughput(
    base: str, clients: int, total: int, path: str = "/api/eval/runs"
) -> tuple[float, list[float], int]:
    """``clients`` keep-alive connections sending ``total`` requests in all: requests per
    second, every request's latency, and how many answered other than 200 (counted, not
    raised, so a figure under load says how many failed).

    A bare asyncio HTTP/1.1 client (request line, headers, Content-Length body): httpx's
    async client costs more CPU per request than the server's endpoint does, and client and
    server share the machine's cores.
    """
    host, port = base.removeprefix("http://").split(":")
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nX-API-Key: {KEY}\r\n\r\n").encode()

    errors = [0]

    async def run() -> tuple[float, list[float]]:
        latencies: list[float] = []
        remaining = [total]

        async def one_client() -> None:
            reader, writer = await asyncio.open_connection(host, int(port))
            try:
                while remaining[0] > 0:
                    remaining[0] -= 1
                    start = time.perf_counter()
                    writer.write(request)
                    head = await reader.readuntil(b"\r\n\r\n")
                    status = int(head.split(b" ", 2)[1])
                    length = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":", 1)[1])
                    await reader.readexactly(length)
                    latencies.append(time.perf_counter() - start)
                    errors[0] += status != 200
            finally:
                writer.close()

        start = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        return time.perf_counter() - start, latencies

    wall, latencies = asyncio.run(run())
    return len(latencies) / wall, latencies, errors[0]


def connect(url: str) -> Any:
    if "://" in url:
        import psycopg

        return psycopg.connect(url, autocommit=True)
    return sqlite3.connect(url, check_same_thread=False)


def rows_as_json(rows: list[Any]) -> str:
    """What the reference does with the rows: the same JSON an API client would get."""
    return json.dumps([list(map(str, r)) for r in rows])


def sql_latency(url: str, n: int) -> list[float]:
    conn = connect(url)
    out = []
    try:
        for _ in range(n + 10):
            start = time.perf_counter()
            rows = conn.execute(LIST_SQL).fetchall()
            rows_as_json(rows)
            out.append(time.perf_counter() - start)
            assert len(rows) == PAGE + 1
    finally:
        conn.close()
    return out[10:]


def sql_throughput(url: str, clients: int, total: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    lock = threading.Lock()
    remaining = [total]

    def client() -> None:
        conn = connect(url)
        try:
            while True:
                with lock:
                    if remaining[0] <= 0:
                        return
                    remaining[0] -= 1
                start = time.perf_counter()
                rows_as_json(conn.execute(LIST_SQL).fetchall())
                elapsed = time.perf_counter() - start
                with lock:
                    latencies.append(elapsed)
        finally:
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return total / (time.perf_counter() - start), latencies


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def bench(name: str, url: str, root: Path, args: argparse.Namespace) -> list[tuple[str, ...]]:
    fill(url, args.runs)
    proc, base = start_server(url, root)
    try:
        api = http_latency(base, args.requests)
        plain = sql_latency(url, args.requests)
        floor = http_latency(base, args.requests, "/healthz")
        api_rps, api_lat, api_errors = http_throughput(base, args.clients, args.total)
        sql_rps, sql_lat = sql_throughput(url, args.clients, args.total)
        floor_rps, _, _ = http_throughput(base, args.clients, args.total, "/healthz")
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    label = f"{name}, {args.runs:,} runs"
    return [
        (f"{label}: GET /healthz p50 (HTTP floor)", ms(statistics.median(floor)), "—", "—", "—"),
        (
            f"{label}: {args.clients} clients, GET /healthz requests/s (HTTP floor)",
            f"{floor_rps:.0f}/s",
            "—",
            "—",
            "—",
        ),
        (
            f"{label}: GET /api/eval/runs p50",
            ms(statistics.median(api)),
            f"plain SQL {ms(statistics.median(plain))}",
            f"{statistics.median(api) / statistics.median(plain):.1f}x",
            "—",
        ),
        (
            f"{label}: GET /api/eval/runs p95",
            ms(pct(api, 0.95)),
            f"plain SQL {ms(pct(plain, 0.95))}",
            f"{pct(api, 0.95) / pct(plain, 0.95):.1f}x",
            "—",
        ),
        (
            f"{label}: {args.clients} clients, requests/s",
            f"{api_rps:.0f}/s",
            f"plain SQL {sql_rps:.0f}/s",
            f"{api_rps / sql_rps:.2f}x",
            "—",
        ),
        *(
            (
                f"{label}: {args.clients} clients, p{round(q * 100)}",
                ms(pct(api_lat, q)),
                f"plain SQL {ms(pct(sql_lat, q))}",
                f"{pct(api_lat, q) / pct(sql_lat, q):.1f}x",
                "—",
            )
            for q in (0.50, 0.95, 0.99)
        ),
        (
            f"{label}: {args.clients} clients, answers other than 200",
            f"{api_errors} of {len(api_lat)}",
            "—",
            "—",
            "—",
        ),
    ]


def fill_store_runs(url: str, runs: int) -> None:
    """The store run and summary document of each service run of :func:`fill` (what the
    /ui/ index reads), in one transaction."""
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with open_store(url) as store:
        ts = store.ts_param  # type: ignore[attr-defined]
        rows = []
        for n in range(runs):
            created = start + timedelta(minutes=n)
            run_id = f"2026-run-{n}"
            hits = 40 + n % 10
            rate = {"rate": hits / 50, "hits": hits, "total": 50}
            # A summary the page can type (goldeval.results.documents): one it cannot is
            # left off the index, which would measure an empty page.
            doc = {
                "runId": run_id,
                "status": "COMPLETED",
                "protocol": {"datasetId": f"ds-{n % 7}-v1", "mode": "fixture", "attempts": 1},
                "metrics": {"overallPassRate": rate},
                "qualityGate": {"passed": True, "verdict": "PASS"},
            }
            summary = {"runDocument": doc, "metrics": doc["metrics"]}
            rows.append(
                (
                    run_id,
                    f"svc-{n:032x}",
                    f"ds-{n % 7}-v1",
                    json_text(doc["protocol"]),
                    json_text(summary),
                    ts(created),
                    ts(created + timedelta(seconds=30)),
                )
            )
        with store._transaction("bench fill runs") as tx:  # type: ignore[attr-defined]
            tx.executemany(
                "INSERT INTO datasets (id, hash, source, first_seen) VALUES (?, ?, NULL, ?)"
                " ON CONFLICT DO NOTHING",
                [(f"ds-{d}-v1", "h" * 64, ts(start)) for d in range(7)],
            )
            tx.executemany(
                "INSERT INTO runs (run_id, run_key, dataset_id, dataset_hash, mode, model,"
                " protocol, configuration, status, started_at, finished_at, summary)"
                " VALUES (?, ?, ?, '" + "h" * 64 + "', 'fixture', NULL, ?, '{}', 'COMPLETED',"
                " ?, ?, ?)",
                [(r[0], r[1], r[2], r[3], r[5], r[6], r[4]) for r in rows],
            )


def write_attempts(url: str, total: int, per_run: int = 10_000) -> None:
    """``total`` attempts through the store's write path, 500 a batch, ``per_run`` a run."""
    with open_store(url) as store:
        for r in range(0, total, per_run):
            run_id = f"2026-run-{r // per_run}"
            batch: list[dict[str, Any]] = []
            for i in range(r, min(total, r + per_run)):
                status = ("PASS", "PASS", "PASS", "FAIL", "ERROR")[i % 5]
                record = {
                    "caseId": f"case-{i:07d}",
                    "index": 0,
                    "status": status,
                    "tokens": {"totalTokens": 30, "estimatedCost": 0.0001},
                }
                if status == "ERROR":
                    record["errorKind"] = "TIMEOUT"
                batch.append(record)
                if len(batch) == 500:
                    store.record_attempts(run_id, batch)
                    batch = []
            if batch:
                store.record_attempts(run_id, batch)


def get_ok(client: httpx.Client, path: str, times: list[float]) -> httpx.Response:
    """GET ``path``, its time appended to ``times``; anything but 200 stops the benchmark."""
    started = time.perf_counter()
    response = client.get(path)
    times.append(time.perf_counter() - started)
    if response.status_code != 200:
        raise SystemExit(f"{path}: {response.status_code} {response.text[:300]}")
    return response


def timed_get(client: httpx.Client, path: str, n: int) -> tuple[list[float], int]:
    times: list[float] = []
    size = 0
    for _ in range(n):
        size = len(get_ok(client, path, times).content)
    return times, size


def walk_pages(client: httpx.Client, pages: int) -> list[float]:
    """The first load of ``pages`` index pages, newest first, following each page's "Older
    runs" link: every load renders (a page is cached only once it was rendered)."""
    times: list[float] = []
    path = "/ui/"
    for _ in range(pages):
        response = get_ok(client, path, times)
        if '<tr><td><a href="runs/' not in response.text:
            raise SystemExit(f"{path} lists no run: the filled summaries do not type")
        found = re.search(r'href="(\?before=[^"]+)" rel="next"', response.text)
        if found is None:
            break
        path = "/ui/" + html.unescape(found.group(1))
    return times


def observability(
    name: str, url: str, root: Path, args: argparse.Namespace
) -> list[tuple[str, ...]]:
    fill(url, args.runs)
    fill_store_runs(url, args.runs)
    proc, base = start_server(url, root)
    try:
        with httpx.Client(base_url=base, headers={"X-API-Key": MONITOR_KEY}) as monitor:
            before, _ = timed_get(monitor, "/metrics", args.requests)
            started = time.perf_counter()
            write_attempts(url, args.attempts)
            wrote = time.perf_counter() - started
            after, _ = timed_get(monitor, "/metrics", args.requests)
            text = monitor.get("/metrics").text
        if "goldeval_store_up 1.0" not in text:
            raise SystemExit("the scrape did not read the store")
        with httpx.Client(base_url=base, auth=("bench", KEY), timeout=60) as browser:
            rendered = walk_pages(browser, min(args.requests, args.runs // 50))
            page, size = timed_get(browser, "/ui/", args.requests)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    label = f"{name}, {args.runs:,} runs"
    return [
        (f"{label}: GET /metrics p50, 0 attempts", ms(statistics.median(before)), "—", "—", "—"),
        (f"{label}: GET /metrics p95, 0 attempts", ms(pct(before, 0.95)), "—", "—", "—"),
        (
            f"{label}: GET /metrics p50, {args.attempts:,} attempts",
            ms(statistics.median(after)),
            f"0 attempts {ms(statistics.median(before))}",
            f"{statistics.median(after) / statistics.median(before):.2f}x",
            "—",
        ),
        (
            f"{label}: GET /metrics p95, {args.attempts:,} attempts",
            ms(pct(after, 0.95)),
            f"0 attempts {ms(pct(before, 0.95))}",
            f"{pct(after, 0.95) / pct(before, 0.95):.2f}x",
            "—",
        ),
        (
            f"{label}: writing {args.attempts:,} attempts (counters kept)",
            f"{wrote:.1f} s",
            "—",
            "—",
            "—",
        ),
        (f"{label}: GET /ui/ first page size", f"{size / 1024:.0f} KiB", "—", "—", "—"),
        (
            f"{label}: GET /ui/ rendered (first load of {len(rendered)} pages) p50 / p95",
            f"{ms(statistics.median(rendered))} / {ms(pct(rendered, 0.95))}",
            "—",
            "—",
            "—",
        ),
        (f"{label}: GET /ui/ again (page cache) p50", ms(statistics.median(page)), "—", "—", "—"),
        (f"{label}: GET /ui/ again (page cache) p95", ms(pct(page, 0.95)), "—", "—", "—"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--total", type=int, default=4000)
    parser.add_argument("--postgres", default=None, help="a URL whose database may be used")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument(
        "--observability", action="store_true", help="measure /metrics and /ui/ instead"
    )
    parser.add_argument("--attempts", type=int, default=100_000, help="with --observability")
    args = parser.parse_args()
    measure = observability if args.observability else bench
    rows: list[tuple[str, ...]] = []
    with tempfile.TemporaryDirectory(prefix="goldeval-bench-service-") as tmp:
        root = Path(tmp) / "project"
        root.mkdir()
        init_dataset("bench", root)
        if not args.no_sqlite:
            rows += measure("SQLite", str(root / "store.sqlite3"), root, args)
        if not args.no_postgres:
            server = None
            url = args.postgres
            if url is None:
                from tests.store.conftest import ThrowawayPostgres, find_postgres_binaries

                binaries = find_postgres_binaries()
                if binaries is None:
                    raise SystemExit("PostgreSQL binaries not found; pass --postgres URL")
                server = ThrowawayPostgres(binaries)
                server.start()
                server.wait_ready()
                url = server.admin_url()
            try:
                rows += measure("PostgreSQL", url, root, args)
            finally:
                if server is not None:
                    server.stop()
    print(table(rows))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
