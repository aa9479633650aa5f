"""The run store: write speed against bare executemany, and size of repeated runs.

    python benchmarks/bench_store.py [--attempts 100000] [--repeat 3] [--postgres URL]
    python benchmarks/bench_store.py --sizes --rows 10000 --runs 10 [--replay] [--postgres URL]

``--sizes``: real fixture-mode pytest runs of one generated dataset (benchmarks/generate.py)
into a fresh SQLite store and a fresh PostgreSQL database; prints the store size after the
first run and after ``--runs`` runs, side by side with the same rows (read back from the
store) written in the layout before schema version 5 (one row per case and attempt per run).
Target: ``--runs`` 10 runs <= 2x the size of one (issue 33). With ``--replay`` only the first run is
a pytest run; the others write its cases and records (new durations) through the store API in
batches of 500, as the plugin does (quicker at 100,000 rows).

Side by side in one run, alternately, each into a fresh empty database (best of --repeat):
``Store.record_attempt_texts`` (the plugin's path: records arrive as compact JSON text) and
``Store.record_attempts`` (record dicts), in batches of 500 as the plugin writes in fixture
mode, against a bare ``executemany`` of the same rows into a table of the same shape.
Serialising the records to JSON is timed on every side. Target: at most 1.5x. Without
--postgres the script starts a throwaway PostgreSQL server with the same helper the tests use
(it needs the postgresql binaries); with --postgres URL, databases are created on that server.

    python benchmarks/bench_store.py --pages [--sizes-of 100,100000] [--repeat 200] [--postgres URL]

``--pages``: one page of results (``Store.attempts_page_json``, what ``GET .../results?limit=50``
sends since 2026-12-07: 50 records after a cursor in the middle of the run, all statuses and
FAIL only, each record's stored content spliced in as JSON text; ``Store.attempts_page``, the
same page decoded into records, is printed beside it) against the plain SQL of that page (the
same SELECT, rows fetched, no records built), on a run of 100
and of 100,000 attempts, SQLite and PostgreSQL; median of ``--repeat`` reads. Target: a page
<= 2x its plain SQL, flat from 100 to 100,000 attempts. It also prints the store size after
one run and after ten runs of the same records (written through the store API; target <= 2x).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))

from _measure import pytest_cmd, table
from _measure import run as run_once

from goldeval.store import open_store
from goldeval.store.base import json_text
from goldeval.store.migrations import MIGRATIONS, SCHEMA_VERSION_DDL
from goldeval.store.sharing import _CHUNKS_FROM


def records(n: int) -> list[dict]:
    out = []
    for i in range(n):
        ok = i % 10 != 0
        out.append(
            {
                "caseId": f"case-{i // 5:06d}",
                "index": i % 5 + 1,
                "status": "PASS" if ok else "FAIL",
                "durationMs": 120 + i % 50,
                "contract": {
                    "passed": ok,
                    "violations": [],
                    "ragChecked": True,
                    "ragOk": ok,
                    "taxonomy": [],
                },
                "tokens": {"inputTokens": 900, "outputTokens": 100, "totalTokens": 1000},
            }
        )
    return out


def bench_store(url: str, recs: list[dict]) -> float:
    with open_store(url) as store:
        store.begin_run(
            "bench-run",
            dataset_id="bench",
            dataset_hash="h",
            mode="LIVE",
            protocol={},
            configuration={},
        )
        start = time.perf_counter()
        for i in range(0, len(recs), 500):
            store.record_attempts("bench-run", recs[i : i + 500])
        return time.perf_counter() - start


def bench_store_texts(url: str, recs: list[dict]) -> float:
    """The plugin's path: records arrive as compact JSON text (serialising is timed, as in
    the bare reference) and are written with ``record_attempt_texts``."""
    with open_store(url) as store:
        store.begin_run(
            "bench-texts",
            dataset_id="bench",
            dataset_hash="h",
            mode="LIVE",
            protocol={},
            configuration={},
        )
        start = time.perf_counter()
        rows = [
            (
                r["caseId"],
                r["index"],
                None,
                r["status"],
                json.dumps(r, ensure_ascii=False, separators=(",", ":")),
            )
            for r in recs
        ]
        for i in range(0, len(rows), 500):
            store.record_attempt_texts("bench-texts", rows[i : i + 500])
        return time.perf_counter() - start


def bare_rows(recs: list[dict]) -> list[tuple]:
    return [
        (
            "bench-run",
            r["caseId"],
            r["index"],
            "",
            r["status"],
            json.dumps(r, separators=(",", ":")),
            "2026-01-01T00:00:00Z",
        )
        for r in recs
    ]


def bench_bare_sqlite(path: Path, recs: list[dict]) -> float:
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute(
        "CREATE TABLE attempts (run_id TEXT, case_id TEXT, attempt_index INTEGER, "
        "model TEXT, status TEXT, record TEXT, created_at TEXT, "
        "PRIMARY KEY (run_id, case_id, attempt_index, model))"
    )
    start = time.perf_counter()
    rows = bare_rows(recs)
    for i in range(0, len(rows), 500):
        con.execute("BEGIN")
        con.executemany("INSERT INTO attempts VALUES (?,?,?,?,?,?,?)", rows[i : i + 500])
        con.execute("COMMIT")
    elapsed = time.perf_counter() - start
    con.close()
    return elapsed


def bench_bare_pg(url: str, recs: list[dict]) -> float:
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute("DROP TABLE IF EXISTS bare_attempts")
        con.execute(
            "CREATE TABLE bare_attempts (run_id TEXT, case_id TEXT, attempt_index "
            "INTEGER, model TEXT, status TEXT, record JSONB, created_at TIMESTAMPTZ, "
            "PRIMARY KEY (run_id, case_id, attempt_index, model))"
        )
        start = time.perf_counter()
        rows = bare_rows(recs)
        for i in range(0, len(rows), 500):
            with con.transaction(), con.cursor() as cur:
                cur.executemany(
                    "INSERT INTO bare_attempts VALUES (%s,%s,%s,%s,%s,%s,%s)", rows[i : i + 500]
                )
        return time.perf_counter() - start


def _fresh_pg(admin_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as con:
        con.execute(f"DROP DATABASE IF EXISTS {name}")
        con.execute(f"CREATE DATABASE {name}")
    return admin_url.rsplit("/", 1)[0] + "/" + name


def _vacuum(url: str) -> None:
    """What PostgreSQL's autovacuum does within a minute of a run giving its rows up (dead
    rows over 20% of a table): dead rows' space made reusable, empty trailing pages cut."""
    if "://" not in url:
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:
        con.execute("VACUUM")


def _measure(
    repeat: int, fresh: Any, variants: dict[str, Any], recs: list[dict]
) -> dict[str, float]:
    best: dict[str, float] = {}
    for n in range(repeat):
        for name, bench in variants.items():
            took = bench(fresh(f"{name}_{n}"), recs)
            best[name] = min(best.get(name, took), took)
    return best


def _old_layout(url: str, runs: list[tuple[Any, list[dict], list[dict]]]) -> Any:
    """A store in the layout before schema version 5, holding the same rows; returns it
    opened raw (sqlite3 or psycopg connection) so the caller can measure it."""
    if "://" in url:
        import psycopg

        con: Any = psycopg.connect(url, autocommit=True)
        backend, mark = "postgresql", "%s"
    else:
        con = sqlite3.connect(url, isolation_level=None)
        con.execute("PRAGMA journal_mode=WAL")
        backend, mark = "sqlite", "?"
    con.execute(SCHEMA_VERSION_DDL[backend])
    for step in MIGRATIONS[backend][:4]:
        for statement in step.statements:
            con.execute(statement)
    return con, backend, mark


def _old_write(con: Any, mark: str, run: Any, cases: list[dict], attempts: list[dict]) -> None:
    q = lambda sql: sql.replace("?", mark)  # noqa: E731
    con.execute(
        q("INSERT INTO datasets VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"),
        (run.dataset_id, run.dataset_hash, None, "2026-01-01T00:00:00+00:00"),
    )
    con.execute(
        q(
            "INSERT INTO runs (run_id, dataset_id, dataset_hash, mode, model, protocol,"
            " configuration, status, started_at, finished_at, summary)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        ),
        (
            run.run_id,
            run.dataset_id,
            run.dataset_hash,
            run.mode,
            run.model,
            json_text(run.protocol),
            json_text(run.configuration),
            run.status,
            "2026-01-01T00:00:00+00:00",
            "2026-01-01T00:00:00+00:00",
            json_text(run.summary),
        ),
    )
    now = "2026-01-01T00:00:00.000000+00:00"
    if hasattr(con, "cursor") and mark == "%s":
        with con.transaction(), con.cursor() as cur:
            cur.executemany(
                q("INSERT INTO cases VALUES (?, ?, ?)"),
                [(run.run_id, c["caseId"], json_text(c)) for c in cases],
            )
            cur.executemany(
                q("INSERT INTO attempts VALUES (?, ?, ?, ?, ?, ?, ?)"),
                [
                    (
                        run.run_id,
                        a["caseId"],
                        a["index"],
                        a.get("model") or "",
                        a["status"],
                        json_text(a),
                        now,
                    )
                    for a in attempts
                ],
            )
        return
    con.execute("BEGIN")
    con.executemany(
        q("INSERT INTO cases VALUES (?, ?, ?)"),
        [(run.run_id, c["caseId"], json_text(c)) for c in cases],
    )
    con.executemany(
        q("INSERT INTO attempts VALUES (?, ?, ?, ?, ?, ?, ?)"),
        [
            (
                run.run_id,
                a["caseId"],
                a["index"],
                a.get("model") or "",
                a["status"],
                json_text(a),
                now,
            )
            for a in attempts
        ],
    )
    con.execute("COMMIT")


def _old_size(con: Any, backend: str, path: str) -> int:
    if backend == "sqlite":
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return sum(Path(p).stat().st_size for p in (path, path + "-wal") if Path(p).exists())
    return int(
        con.execute(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relkind = 'r'"
        ).fetchone()[0]
    )


def _replay(store: Any, first: Any, cases: list[dict], attempts: list[dict], n: int) -> None:
    """Run ``n`` written through the store API as the plugin writes it: the first run's cases
    and records (same answers, same grading), new durations, batches of 500, its summary."""
    run_id = f"{first.run_id}-replay-{n}"
    store.begin_run(
        run_id,
        dataset_id=first.dataset_id,
        dataset_hash=first.dataset_hash,
        mode=first.mode,
        model=first.model,
        protocol=first.protocol,
        configuration=first.configuration,
    )
    for i in range(0, len(attempts), 500):
        store.record_cases(run_id, cases[i : i + 500])
        batch = []
        for a in attempts[i : i + 500]:
            a = {**a, "durationMs": (a.get("durationMs") or 0) + n}
            batch.append(
                (
                    a["caseId"],
                    a["index"],
                    a.get("model"),
                    a["status"],
                    json.dumps(a, ensure_ascii=False, separators=(",", ":")),
                )
            )
        store.record_attempt_texts(run_id, batch)
    store.finish_run(run_id, "COMPLETED", first.summary or {})


def sizes(
    rows: int,
    runs: int,
    workdir: Path,
    urls: dict[str, tuple[str, str]],
    replay: bool = False,
    vacuum: bool = False,
) -> list[tuple]:
    """Store size after 1 and after ``runs`` real fixture runs, per backend, both layouts.

    ``replay``: only the first run is a pytest run; the others are written through the store
    API with its records (see :func:`_replay`), which is quicker at 100,000 rows."""
    from generate import generate

    root = generate(rows, workdir / f"rows-{rows}")
    out = []
    for backend, (url, old_url) in urls.items():
        after: dict[int, int] = {}
        old_after: dict[int, int] = {}
        con, old_backend, mark = _old_layout(old_url, [])
        first: Any = None
        for n in range(1, runs + 1):
            if replay and first is not None:
                with open_store(url) as store:
                    _replay(store, first[0], first[1], first[2], n)
                    if vacuum:
                        _vacuum(url)
                    run = store.get_run(f"{first[0].run_id}-replay-{n}")
                    _old_write(con, mark, run, first[1], store.attempts(run.run_id))
                    if n in (1, runs):
                        after[n] = store.size_bytes()
                        old_after[n] = _old_size(con, old_backend, old_url)
                print(f"{backend}: run {n} of {runs} done (replayed)", file=sys.stderr, flush=True)
                continue
            m = run_once(
                pytest_cmd(
                    "--golden=bench-v1", f"--golden-store={url}", "--golden-artifacts=never"
                ),
                root,
                {"PYTHONDONTWRITEBYTECODE": ""},
            )
            if m.rc != 0:
                raise SystemExit(f"run {n} exited {m.rc}")
            if vacuum:
                _vacuum(url)
            with open_store(url) as store:
                run = store.runs(limit=1)[0]
                cases, attempts = store.cases(run.run_id), store.attempts(run.run_id)
                first = (run, cases, attempts)
                _old_write(con, mark, run, cases, attempts)
                if n in (1, runs):
                    after[n] = store.size_bytes()
                    old_after[n] = _old_size(con, old_backend, old_url)
            print(f"{backend}: run {n} of {runs} done", file=sys.stderr, flush=True)
        con.close()
        one, many = after[1], after[runs]
        out.append(
            (
                f"{backend}: store after 1 run of {rows:,} rows",
                f"{one / 1e6:.1f} MB",
                f"old layout {old_after[1] / 1e6:.1f} MB",
                f"{one / old_after[1]:.2f}x",
                "",
            )
        )
        out.append(
            (
                f"{backend}: store after {runs} runs of the same rows",
                f"{many / 1e6:.1f} MB",
                f"old layout {old_after[runs] / 1e6:.1f} MB",
                f"{many / old_after[runs]:.2f}x",
                "",
            )
        )
        out.append(
            (
                f"{backend}: {runs} runs / 1 run",
                f"{many / one:.2f}x",
                f"old layout {old_after[runs] / old_after[1]:.2f}x",
                "",
                "<= 2x",
            )
        )
    return out


def _postgres_admin(url: str | None) -> tuple[str, Any]:
    if url is not None:
        return url, None
    from tests.store.conftest import ThrowawayPostgres, find_postgres_binaries

    binaries = find_postgres_binaries()
    if binaries is None:
        raise SystemExit("PostgreSQL binaries not found; pass --postgres URL")
    server = ThrowawayPostgres(binaries)
    server.start()
    server.wait_ready()
    return server.admin_url(), server


def main_sizes(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="goldeval-bench-store-"))
    admin, server = _postgres_admin(args.postgres)
    try:
        urls = {
            "SQLite": (str(workdir / "new.sqlite3"), str(workdir / "old.sqlite3")),
            "PostgreSQL": (
                _fresh_pg(admin, "bench_sizes_new"),
                _fresh_pg(admin, "bench_sizes_old"),
            ),
        }
        print(table(sizes(args.rows, args.runs, workdir, urls, args.replay, args.vacuum)))
    finally:
        if server is not None:
            server.stop()


PAGE = 50
_PLAIN_PAGE = (
    "SELECT a.case_id, a.attempt_index, a.model, a.status, a.fields, c.body"
    " FROM attempts a JOIN contents c ON c.id = a.content_id"
    " WHERE a.run_id = ?{status} AND (a.case_id, a.attempt_index, a.model) > (?, ?, ?)"
    " ORDER BY a.case_id, a.attempt_index, a.model LIMIT ?"
)


def _fill_run(url: str, run_id: str, recs: list[dict]) -> None:
    with open_store(url) as store:
        store.begin_run(
            run_id,
            dataset_id="bench",
            dataset_hash="h",
            mode="LIVE",
            protocol={},
            configuration={},
        )
        for i in range(0, len(recs), 500):
            store.record_attempts(run_id, recs[i : i + 500])
        store.finish_run(run_id, "COMPLETED", {})


def _median_ms(repeat: int, read: Any) -> float:
    read()  # warm the cache and the statement cache
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        read()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _raw_reader(url: str) -> tuple[Any, Any]:
    """A function running one SQL query on a raw connection (``?`` placeholders), and the
    connection."""
    if "://" in url:
        import psycopg

        con: Any = psycopg.connect(url, autocommit=True)

        def pg(sql: str, params: tuple) -> list:
            return con.execute(sql.replace("?", "%s"), params).fetchall()

        return pg, con
    con = sqlite3.connect(url, isolation_level=None)
    return (lambda sql, params: con.execute(sql, params).fetchall()), con


def _page_row(
    store: Any,
    query: Any,
    backend: str,
    run_id: str,
    n: int,
    status: str | None,
    middle: tuple,
    repeat: int,
    rows_of: str | None = None,
) -> tuple:
    """``rows_of``: ``run_id`` shares that run's rows (schema 13); the plain SQL is the page
    of the rows it reads, the store's page also puts the run's own timings back."""
    sql = _PLAIN_PAGE.format(status=" AND a.status = ?" if status else "")
    params = (rows_of or run_id, *((status,) if status else ()), *middle, PAGE)

    def plain() -> list:
        return query(sql, params)

    def plain_with_chunks() -> list:
        """A sharing run's page is in two tables: the plain SQL of the shared rows, then of
        the run's timing chunks those rows fall in (the store's chunk query), undecoded."""
        rows = query(sql, params)
        first, last = rows[0][:3], rows[-1][:3]
        return rows + query(_CHUNKS_FROM, (run_id, run_id, *first, *last, len(rows) + 1))

    def plain_decoded() -> list:
        return [(json.loads(r[4]), json.loads(r[5])) for r in query(sql, params)]

    def page() -> list:
        return store.attempts_page_json(run_id, limit=PAGE, status=status, after=middle)

    def records_page() -> list:
        return store.attempts_page(run_id, limit=PAGE, status=status, after=middle)

    assert len(page()) == len(plain()) == len(records_page()) > 0
    fs = (plain, plain_decoded, page, records_page, *((plain_with_chunks,) if rows_of else ()))
    took = {f.__name__: _median_ms(repeat, f) for f in fs}
    with_chunks = (
        f"; with its timing chunks {took['plain_with_chunks']:.2f} ms:"
        f" {took['page'] / took['plain_with_chunks']:.2f}x"
        if rows_of
        else ""
    )
    return (
        f"{backend}: page of {PAGE} after the middle, {n:,} attempts"
        + (f", status={status}" if status else "")
        + (" (a run sharing another's rows)" if rows_of else ""),
        f"{took['page']:.2f} ms (decoded records {took['records_page']:.2f} ms)",
        f"plain SQL {took['plain']:.2f} ms (+ JSON decode {took['plain_decoded']:.2f} ms)",
        f"{took['page'] / took['plain']:.2f}x"
        f" (records {took['records_page'] / took['plain']:.2f}x{with_chunks})",
        "<= 2x",
    )


def pages(url: str, sizes: list[int], repeat: int, backend: str) -> list[tuple]:
    """One page vs its plain SQL at each run size (every run in the same store)."""
    out = []
    for n in sizes:
        recs = records(n)
        run_id = f"pages-{n}"
        _fill_run(url, run_id, recs)
        middle = sorted((r["caseId"], r["index"], "") for r in recs)[n // 2]
        query, con = _raw_reader(url)
        # The same records again (new durations): the run shares pages-n's rows.
        again = f"{run_id}-again"
        _fill_run(url, again, [{**r, "durationMs": r["durationMs"] + 1} for r in recs])
        with open_store(url) as store:
            for status in (None, "FAIL"):
                out.append(_page_row(store, query, backend, run_id, n, status, middle, repeat))
            for status in (None, "FAIL"):
                out.append(
                    _page_row(
                        store, query, backend, again, n, status, middle, repeat, rows_of=run_id
                    )
                )
        con.close()
    return out


def repeated_size(url: str, n: int, runs: int, backend: str) -> tuple:
    """Store size after one run of ``n`` records and after ``runs`` runs of the same."""
    recs = records(n)
    sizes = {}
    for k in range(1, runs + 1):
        # Ids in start order, as the store's timestamped run ids sort (size-10 after size-9).
        _fill_run(url, f"size-{k:02d}", [{**r, "durationMs": r["durationMs"] + k} for r in recs])
        if k in (1, runs):
            with open_store(url) as store:
                sizes[k] = store.size_bytes()
    return (
        f"{backend}: {runs} runs of the same {n:,} records / 1 run",
        f"{sizes[runs] / sizes[1]:.2f}x",
        f"{sizes[1] / 1e6:.1f} MB -> {sizes[runs] / 1e6:.1f} MB",
        "",
        "<= 2x",
    )


def main_pages(args: argparse.Namespace) -> None:
    sizes = [int(x) for x in args.sizes_of.split(",")]
    workdir = Path(tempfile.mkdtemp(prefix="goldeval-bench-pages-"))
    admin, server = _postgres_admin(args.postgres)
    rows = []
    try:
        targets = {
            "SQLite": (str(workdir / "pages.sqlite3"), str(workdir / "sizes.sqlite3")),
            "PostgreSQL": (_fresh_pg(admin, "bench_pages"), _fresh_pg(admin, "bench_page_sizes")),
        }
        for backend, (url, size_url) in targets.items():
            rows += pages(url, sizes, args.repeat, backend)
            print(table(rows), file=sys.stderr, flush=True)
            if args.size_rows:
                rows.append(repeated_size(size_url, args.size_rows, 10, backend))
        print(table(rows))
    finally:
        if server is not None:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--attempts", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--postgres", default=None, help="an admin URL (may create databases)")
    parser.add_argument("--sizes", action="store_true", help="store size of repeated runs")
    parser.add_argument("--rows", type=int, default=10_000, help="--sizes: dataset rows")
    parser.add_argument("--runs", type=int, default=10, help="--sizes: runs of the dataset")
    parser.add_argument(
        "--replay", action="store_true", help="--sizes: one pytest run, the others replayed"
    )
    parser.add_argument(
        "--vacuum",
        action="store_true",
        help="--sizes: VACUUM PostgreSQL after each run (autovacuum's work, done at once)",
    )
    parser.add_argument("--pages", action="store_true", help="a results page vs plain SQL")
    parser.add_argument("--sizes-of", default="100,100000", help="--pages: attempts per run")
    parser.add_argument(
        "--size-rows",
        type=int,
        default=100_000,
        help="--pages: records per run for the size of 10 runs (0: skip)",
    )
    args = parser.parse_args()
    if args.pages:
        if args.repeat == 3:
            args.repeat = 200
        main_pages(args)
        return
    if args.sizes:
        main_sizes(args)
        return
    recs = records(args.attempts)
    rows = []

    def add(backend: str, best: dict[str, float]) -> None:
        bare = best["bare"]
        for name, label in (("texts", "JSON texts, the plugin's path"), ("dicts", "record dicts")):
            rows.append(
                (
                    f"{backend}: {args.attempts:,} attempts ({label})",
                    f"{best[name]:.2f} s",
                    f"executemany {bare:.2f} s",
                    f"{best[name] / bare:.2f}x",
                    "<= 1.5x",
                )
            )

    with tempfile.TemporaryDirectory() as tmp:
        add(
            "SQLite",
            _measure(
                args.repeat,
                lambda name: str(Path(tmp) / f"{name}.sqlite3"),
                {
                    "texts": bench_store_texts,
                    "dicts": bench_store,
                    "bare": lambda url, r: bench_bare_sqlite(Path(url), r),
                },
                recs,
            ),
        )
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
        add(
            "PostgreSQL",
            _measure(
                args.repeat,
                lambda name: _fresh_pg(admin, f"bench_{name}"),
                {"texts": bench_store_texts, "dicts": bench_store, "bare": bench_bare_pg},
                recs,
            ),
        )
    finally:
        if server is not None:
            server.stop()
    print(table(rows))


if __name__ == "__main__":
    main()
