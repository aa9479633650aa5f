"""The run store: 100,000 attempt records written to SQLite and PostgreSQL vs bare executemany.

    python benchmarks/bench_store.py [--attempts 100000] [--repeat 3] [--postgres URL]

Side by side in one run, alternately, each into a fresh empty database (best of --repeat):
``Store.record_attempt_texts`` (the plugin's path: records arrive as compact JSON text) and
``Store.record_attempts`` (record dicts), in batches of 500 as the plugin writes in fixture
mode, against a bare ``executemany`` of the same rows into a table of the same shape.
Serialising the records to JSON is timed on every side. Target: at most 1.5x. Without
--postgres the script starts a throwaway PostgreSQL server with the same helper the tests use
(it needs the postgresql binaries); with --postgres URL, databases are created on that server.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

from _measure import table

from goldeval.store import open_store


def records(n: int) -> list[dict]:
    out = []
    for i in range(n):
        ok = i % 10 != 0
        out.append({"caseId": f"case-{i // 5:06d}", "index": i % 5 + 1,
                    "status": "PASS" if ok else "FAIL", "durationMs": 120 + i % 50,
                    "contract": {"passed": ok, "violations": [], "ragChecked": True,
                                 "ragOk": ok, "taxonomy": []},
                    "tokens": {"inputTokens": 900, "outputTokens": 100, "totalTokens": 1000}})
    return out


def bench_store(url: str, recs: list[dict]) -> float:
    with open_store(url) as store:
        store.begin_run("bench-run", dataset_id="bench", dataset_hash="h", mode="LIVE",
                        protocol={}, configuration={})
        start = time.perf_counter()
        for i in range(0, len(recs), 500):
            store.record_attempts("bench-run", recs[i:i + 500])
        return time.perf_counter() - start


def bench_store_texts(url: str, recs: list[dict]) -> float:
    """The plugin's path: records arrive as compact JSON text (serialising is timed, as in
    the bare reference) and are written with ``record_attempt_texts``."""
    with open_store(url) as store:
        store.begin_run("bench-texts", dataset_id="bench", dataset_hash="h", mode="LIVE",
                        protocol={}, configuration={})
        start = time.perf_counter()
        rows = [(r["caseId"], r["index"], None, r["status"],
                 json.dumps(r, ensure_ascii=False, separators=(",", ":"))) for r in recs]
        for i in range(0, len(rows), 500):
            store.record_attempt_texts("bench-texts", rows[i:i + 500])
        return time.perf_counter() - start


def bare_rows(recs: list[dict]) -> list[tuple]:
    return [("bench-run", r["caseId"], r["index"], "", r["status"],
             json.dumps(r, separators=(",", ":")), "2026-01-01T00:00:00Z") for r in recs]


def bench_bare_sqlite(path: Path, recs: list[dict]) -> float:
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("CREATE TABLE attempts (run_id TEXT, case_id TEXT, attempt_index INTEGER, "
                "model TEXT, status TEXT, record TEXT, created_at TEXT, "
                "PRIMARY KEY (run_id, case_id, attempt_index, model))")
    start = time.perf_counter()
    rows = bare_rows(recs)
    for i in range(0, len(rows), 500):
        con.execute("BEGIN")
        con.executemany("INSERT INTO attempts VALUES (?,?,?,?,?,?,?)", rows[i:i + 500])
        con.execute("COMMIT")
    elapsed = time.perf_counter() - start
    con.close()
    return elapsed


def bench_bare_pg(url: str, recs: list[dict]) -> float:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute("DROP TABLE IF EXISTS bare_attempts")
        con.execute("CREATE TABLE bare_attempts (run_id TEXT, case_id TEXT, attempt_index "
                    "INTEGER, model TEXT, status TEXT, record JSONB, created_at TIMESTAMPTZ, "
                    "PRIMARY KEY (run_id, case_id, attempt_index, model))")
        start = time.perf_counter()
        rows = bare_rows(recs)
        for i in range(0, len(rows), 500):
            with con.transaction(), con.cursor() as cur:
                cur.executemany("INSERT INTO bare_attempts VALUES (%s,%s,%s,%s,%s,%s,%s)",
                                rows[i:i + 500])
        return time.perf_counter() - start


def _fresh_pg(admin_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as con:
        con.execute(f"DROP DATABASE IF EXISTS {name}")
        con.execute(f"CREATE DATABASE {name}")
    return admin_url.rsplit("/", 1)[0] + "/" + name


def _measure(
    repeat: int, fresh: Any, variants: dict[str, Any], recs: list[dict]
) -> dict[str, float]:
    best: dict[str, float] = {}
    for n in range(repeat):
        for name, bench in variants.items():
            took = bench(fresh(f"{name}_{n}"), recs)
            best[name] = min(best.get(name, took), took)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--attempts", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--postgres", default=None, help="an admin URL (may create databases)")
    args = parser.parse_args()
    recs = records(args.attempts)
    rows = []

    def add(backend: str, best: dict[str, float]) -> None:
        bare = best["bare"]
        for name, label in (("texts", "JSON texts, the plugin's path"), ("dicts", "record dicts")):
            rows.append((f"{backend}: {args.attempts:,} attempts ({label})", f"{best[name]:.2f} s",
                         f"executemany {bare:.2f} s", f"{best[name] / bare:.2f}x", "<= 1.5x"))

    with tempfile.TemporaryDirectory() as tmp:
        add("SQLite", _measure(
            args.repeat,
            lambda name: str(Path(tmp) / f"{name}.sqlite3"),
            {
                "texts": bench_store_texts,
                "dicts": bench_store,
                "bare": lambda url, r: bench_bare_sqlite(Path(url), r),
            },
            recs,
        ))
    server = None
    admin = args.postgres
    if admin is None:
        from tests.store.conftest import ThrowawayPostgres, find_postgres_binaries

        binaries = find_postgres_binaries()
        if binaries is None:
            raise SystemExit("PostgreSQL binaries not found; pass --postgres URL")
        server = ThrowawayPostgres(binaries)
        server.start()
        server.wait_ready()
        admin = server.admin_url()
    try:
        add("PostgreSQL", _measure(
            args.repeat,
            lambda name: _fresh_pg(admin, f"bench_{name}"),
            {"texts": bench_store_texts, "dicts": bench_store, "bare": bench_bare_pg},
            recs,
        ))
    finally:
        if server is not None:
            server.stop()
    print(table(rows))


if __name__ == "__main__":
    main()
