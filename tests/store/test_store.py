"""The run store, run against SQLite and PostgreSQL (the ``target``/``store`` fixtures)."""

from __future__ import annotations

import multiprocessing
import os
import queue
import sqlite3
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from goldeval.core.models import AttemptRecord, CaseInfo, Status
from goldeval.store import (
    DEFAULT_PATH,
    LATEST_VERSION,
    RunConflictError,
    Store,
    StoreError,
    open_store,
    redact_url,
)
from goldeval.store.migrations import MIGRATIONS, SCHEMA_VERSION_DDL
from goldeval.store.sqlite import SqliteStore

if TYPE_CHECKING:
    from conftest import PostgresServer, Target

TABLES = {
    "datasets",
    "runs",
    "contents",
    "attempts",
    "run_cases",
    "artifacts",
    "schema_version",
}
SUMMARY = {
    "status": "COMPLETED",
    "metrics": {"overallPassRate": {"hits": 3, "total": 4, "rate": 0.75}},
}


def attempt(case_id: str, index: int, status: str = "PASS", **extra: Any) -> dict[str, Any]:
    """An attempt record dict exactly as the plugin produces it (camelCase, no nulls)."""
    return AttemptRecord(case_id=case_id, index=index, status=Status(status), **extra).dump()


def begin(store: Store, run_id: str = "run-1", **overrides: Any) -> str:
    kwargs: dict[str, Any] = {
        "run_key": None,
        "dataset_id": "generation-v1",
        "dataset_hash": "d4e8f61e",
        "mode": "fixture",
        "model": None,
        "protocol": {"datasetId": "generation-v1", "attempts": 1},
        "configuration": {"goldenMode": "fixture"},
    }
    kwargs.update(overrides)
    return store.begin_run(run_id, **kwargs).run_id


# --------------------------------------------------------------------------- schema


def test_schema_is_created_at_the_latest_version(store: Store, target: Target) -> None:
    assert TABLES <= target.tables()
    assert store.schema_version() == LATEST_VERSION
    versions = target.query("SELECT version FROM schema_version ORDER BY version")
    assert [v for (v,) in versions] == list(range(1, LATEST_VERSION + 1))
    assert not {"cases", "run_pages"} & target.tables()  # rows again since migration 8
    # The unique keys are in the schema itself, not only in the store's SQL.
    begin(store)
    case = "INSERT INTO run_cases VALUES ('run-1', 'case-a', ?)"
    target.execute(case, (1,))
    with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
        target.execute(case, (2,))
    attempt = (
        "INSERT INTO attempts (run_id, case_id, attempt_index, model, status, content_id,"
        " fields) VALUES ('run-1', 'case-a', 1, '', ?, 1, '{}')"
    )
    target.execute(attempt, ("PASS",))
    with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
        target.execute(attempt, ("FAIL",))
    with pytest.raises(Exception, match=r"(?i)check"):
        target.execute(attempt.replace("1, '',", "2, '',"), ("MAYBE",))
    target.execute("INSERT INTO contents (sha256, body) VALUES (?, '{}')", (b"k" * 32,))
    with pytest.raises(Exception, match=r"(?i)unique|duplicate"):
        target.execute("INSERT INTO contents (sha256, body) VALUES (?, '[]')", (b"k" * 32,))


def test_migrations_upgrade_a_v1_store_in_place(target: Target) -> None:
    first = MIGRATIONS[target.backend][0]
    target.execute(SCHEMA_VERSION_DDL[target.backend])
    for statement in first.statements:
        target.execute(statement)
    ts = "2026-01-01T00:00:00.000000+00:00"
    target.execute("INSERT INTO schema_version VALUES (?, ?, ?)", (1, first.description, ts))
    target.execute("INSERT INTO datasets VALUES (?, ?, ?, ?)", ("generation-v1", "h1", None, ts))
    target.execute(
        "INSERT INTO runs (run_id, dataset_id, dataset_hash, mode, model, protocol,"
        " configuration, status, started_at, finished_at, summary)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            "old-run",
            "generation-v1",
            "h1",
            "fixture",
            None,
            '{"attempts": 1}',
            "{}",
            "COMPLETED",
            ts,
            ts,
            '{"metrics": {"overallPassRate": {"rate": 1.0}}}',
        ),
    )
    target.execute(
        "INSERT INTO attempts VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            "old-run",
            "case-a",
            1,
            "",
            "PASS",
            '{"caseId": "case-a", "index": 1, "status": "PASS"}',
            ts,
        ),
    )
    assert "artifacts" not in target.tables()

    with open_store(target.url) as store:
        assert store.schema_version() == LATEST_VERSION
        old = store.get_run("old-run")
        assert old is not None
        assert (old.run_key, old.status, old.pass_rate) == (None, "COMPLETED", 1.0)
        assert old.started_at == datetime(2026, 1, 1, tzinfo=timezone.utc)
        assert store.attempts("old-run") == [{"caseId": "case-a", "index": 1, "status": "PASS"}]
        # What the later steps added works on the upgraded store.
        assert store.record_artifacts("old-run", [("run.json", "ab" * 32, 10)]) == 1
        run = store.begin_run(
            "new-run",
            run_key="ci-7",
            dataset_id="generation-v1",
            dataset_hash="h1",
            mode="fixture",
            protocol={},
            configuration={},
        )
        assert store.get_run("ci-7") is not None
        assert run.run_id == "new-run"

    assert TABLES <= target.tables()
    versions = [v for (v,) in target.query("SELECT version FROM schema_version ORDER BY 1")]
    assert versions == list(range(1, LATEST_VERSION + 1))
    with open_store(target.url) as again:  # re-opening applies nothing twice
        assert again.schema_version() == LATEST_VERSION
        assert [r.run_id for r in again.runs()] == ["new-run", "old-run"]


def test_a_store_newer_than_the_code_is_refused(store: Store, target: Target) -> None:
    store.close()
    target.execute(
        "INSERT INTO schema_version VALUES (?, ?, ?)",
        (LATEST_VERSION + 1, "from the future", "2030-01-01T00:00:00+00:00"),
    )
    with pytest.raises(StoreError, match="newer than this goldeval"):
        open_store(target.url)


# --------------------------------------------------------------------------- runs


def test_begin_run_creates_then_resumes_by_run_key(store: Store) -> None:
    first = store.begin_run(
        "2026-12-02T10-00-00",
        run_key="ci-build-42",
        dataset_id="generation-v1",
        dataset_hash="d4e8",
        mode="fixture",
        model="m1",
        protocol={"attempts": 3},
        configuration={"repetitions": 3},
        dataset_source="golden/generation-v1.jsonl",
    )
    assert not first.resumed
    assert (first.run_id, first.run_key, first.status) == (
        "2026-12-02T10-00-00",
        "ci-build-42",
        "RUNNING",
    )
    assert first.started_at.tzinfo is not None
    store.finish_run(first.run_id, "INTERRUPTED", {"status": "INTERRUPTED"})
    row = store.get_run("ci-build-42")
    assert row is not None and row.status == "INTERRUPTED" and row.finished_at is not None

    # A resume (or another shard) under a new local run id gets the original run back.
    second = store.begin_run(
        "2026-12-02T11-00-00",
        run_key="ci-build-42",
        dataset_id="generation-v1",
        dataset_hash="d4e8",
        mode="fixture",
        model="m1",
        protocol={"attempts": 999},
        configuration={},
    )
    assert second.resumed
    assert second.run_id == first.run_id
    assert second.status == "RUNNING"
    assert second.protocol == {"attempts": 3}  # run records are immutable
    row = store.get_run(first.run_id)
    assert row is not None and row.status == "RUNNING" and row.finished_at is None
    assert store.get_run("2026-12-02T11-00-00") is None
    assert len(store.runs()) == 1

    with pytest.raises(RunConflictError, match="ci-build-42"):
        store.begin_run(
            "x",
            run_key="ci-build-42",
            dataset_id="generation-v1",
            dataset_hash="other",
            mode="fixture",
            protocol={},
            configuration={},
        )
    with pytest.raises(RunConflictError):  # run id taken under another key
        store.begin_run(
            first.run_id,
            run_key="another-key",
            dataset_id="generation-v1",
            dataset_hash="d4e8",
            mode="fixture",
            protocol={},
            configuration={},
        )
    # Without a key, begin_run on an existing run id resumes it.
    assert store.begin_run(
        first.run_id,
        dataset_id="generation-v1",
        dataset_hash="d4e8",
        mode="fixture",
        protocol={},
        configuration={},
    ).resumed


def test_finish_run_validates_and_needs_an_existing_run(store: Store) -> None:
    run_id = begin(store)
    with pytest.raises(ValueError, match="DONE"):
        store.finish_run(run_id, "DONE", {})  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="no run 'nope'"):
        store.finish_run("nope", "COMPLETED", {})
    store.finish_run(run_id, "COMPLETED", {"metrics": {"weightedScore": float("nan")}})
    row = store.get_run(run_id)
    assert row is not None and row.summary == {"metrics": {"weightedScore": None}}


def test_runs_listing(store: Store) -> None:
    begin(store, "run-1", run_key="k1")
    begin(store, "run-2", dataset_id="retrieval-v1", dataset_hash="abcd", model="gpt-x")
    begin(store, "run-3", mode="live")
    store.finish_run("run-1", "COMPLETED", SUMMARY)
    store.finish_run("run-2", "FAILED", {"overallPassRate": 0.5})
    listed = store.runs()
    assert [r.run_id for r in listed] == ["run-3", "run-2", "run-1"]
    by_id = {r.run_id: r for r in listed}
    assert by_id["run-1"].pass_rate == 0.75
    assert by_id["run-1"].run_key == "k1"
    assert by_id["run-1"].summary == SUMMARY
    assert by_id["run-2"].pass_rate == 0.5
    assert (by_id["run-2"].dataset_id, by_id["run-2"].model) == ("retrieval-v1", "gpt-x")
    assert by_id["run-2"].status == "FAILED"
    assert by_id["run-3"].pass_rate is None and by_id["run-3"].finished_at is None
    assert by_id["run-3"].mode == "live" and by_id["run-3"].status == "RUNNING"
    assert [r.run_id for r in store.runs(limit=2)] == ["run-3", "run-2"]
    assert [r.run_id for r in store.runs(dataset_id="generation-v1")] == ["run-3", "run-1"]
    assert store.runs(dataset_id="missing") == []
    assert store.get_run("k1") == by_id["run-1"]
    assert store.get_run("run-2") == by_id["run-2"]
    assert store.get_run("unknown") is None


# --------------------------------------------------------------------------- cases/attempts


def test_cases_are_recorded_once_in_dataset_order(store: Store) -> None:
    run_id = begin(store)
    late = CaseInfo(case_id="b-late", kinds=["GENERATION"], prompt="p2", line=9).dump()
    early = CaseInfo(case_id="z-early", kinds=["RAG"], prompt="п1", tags=["x"], line=2).dump()
    assert store.record_case(run_id, late)
    assert not store.record_case(run_id, {**late, "prompt": "changed"})
    assert store.record_cases(run_id, [early, late]) == 1
    assert store.cases(run_id) == [early, late]
    assert store.cases("other-run") == []


def test_record_attempt_is_idempotent(store: Store) -> None:
    run_id = begin(store)
    first = attempt("case-a", 1, "FAIL", duration_ms=12, output="ответ")
    assert store.record_attempt(run_id, first)
    assert not store.record_attempt(run_id, attempt("case-a", 1, "PASS"))  # same key: no-op
    assert not store.record_attempt(run_id, first)
    assert store.attempts(run_id) == [first]
    # The model is part of the key: same case and index for another model is another row.
    assert store.record_attempt(run_id, attempt("case-a", 1, "PASS", model="m2"))
    # A batch with duplicates (inside it and against the store) writes each key once.
    batch = [attempt("case-b", 1), attempt("case-b", 1), attempt("case-a", 1), attempt("c", 2)]
    assert store.record_attempts(run_id, batch) == 2
    assert store.record_attempts(run_id, []) == 0
    stored = store.attempts(run_id)
    assert [(a["caseId"], a["index"], a.get("model")) for a in stored] == [
        ("c", 2, None),
        ("case-a", 1, None),
        ("case-a", 1, "m2"),
        ("case-b", 1, None),
    ]
    assert stored[1] == first  # the first write won, byte for byte


def test_error_attempt_is_replaced_by_a_later_non_error(store: Store) -> None:
    run_id = begin(store)
    error = attempt("case-a", 1, "ERROR", error_kind="TIMEOUT", error_message="read timeout")
    assert store.record_attempt(run_id, error)
    assert not store.record_attempt(run_id, attempt("case-a", 1, "ERROR", error_kind="HTTP"))
    assert store.attempts(run_id) == [error]
    passed = attempt("case-a", 1, "PASS", tries=2)
    assert store.record_attempt(run_id, passed)  # "rerun errors" lands its retry
    assert store.attempts(run_id) == [passed]
    assert not store.record_attempt(run_id, error)  # never back to ERROR
    assert not store.record_attempt(run_id, attempt("case-a", 1, "FAIL"))
    assert store.attempts(run_id) == [passed]
    # The same rule in a batch: ERROR then FAIL for one key -> one row, FAIL.
    assert store.record_attempts(run_id, [attempt("b", 1, "ERROR"), attempt("b", 1, "FAIL")]) == 2
    assert [a["status"] for a in store.attempts(run_id)] == ["FAIL", "PASS"]


def test_graded_keys_with_and_without_errors(store: Store) -> None:
    run_id = begin(store)
    store.record_attempts(
        run_id,
        [
            attempt("a", 1, "PASS"),
            attempt("a", 2, "FAIL"),
            attempt("b", 1, "ERROR"),
            attempt("b", 2, "SKIPPED"),
            attempt("c", 1, "ERROR", model="m1"),
            attempt("c", 1, "PASS", model="m2"),
        ],
    )
    everything = {
        ("a", 1, ""),
        ("a", 2, ""),
        ("b", 1, ""),
        ("b", 2, ""),
        ("c", 1, "m1"),
        ("c", 1, "m2"),
    }
    assert store.graded_keys(run_id, include_errors=True) == everything
    assert store.graded_keys(run_id, include_errors=False) == everything - {
        ("b", 1, ""),
        ("c", 1, "m1"),
    }
    store.record_attempt(run_id, attempt("b", 1, "PASS"))
    assert ("b", 1, "") in store.graded_keys(run_id, include_errors=False)
    assert store.graded_keys("other-run", include_errors=True) == set()


def test_bad_records_and_unknown_runs(store: Store) -> None:
    run_id = begin(store)
    with pytest.raises(ValueError, match="caseId"):
        store.record_attempt(run_id, {"index": 1, "status": "PASS"})
    with pytest.raises(ValueError, match="status"):
        store.record_attempt(run_id, {"caseId": "a", "index": 1, "status": "GREAT"})
    with pytest.raises(ValueError, match="index"):
        store.record_attempt(run_id, {"caseId": "a", "index": "1", "status": "PASS"})
    with pytest.raises(StoreError, match="record_attempts"):  # foreign key to runs
        store.record_attempts("no-such-run", [attempt("a", 1)])
    assert store.attempts(run_id) == []  # the failed batch left nothing behind
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.attempts(run_id)


def test_artifacts_inventory(store: Store) -> None:
    run_id = begin(store)
    sha_a, sha_b = "a" * 64, "b" * 64
    assert (
        store.record_artifacts(
            run_id, [("run.json", sha_a, 1234), ("cases/x.md", sha_b, 5_000_000_000)]
        )
        == 2
    )
    inventory = store.artifacts(run_id)
    assert [(a.path, a.sha256, a.size) for a in inventory] == [
        ("cases/x.md", sha_b, 5_000_000_000),
        ("run.json", sha_a, 1234),
    ]
    assert all(a.created_at.tzinfo is not None for a in inventory)
    # Re-recording a path (a report rewritten on resume) keeps one entry with the new sum.
    store.record_artifacts(run_id, [("run.json", "c" * 64, 99)])
    assert [(a.path, a.sha256, a.size) for a in store.artifacts(run_id)] == [
        ("cases/x.md", sha_b, 5_000_000_000),
        ("run.json", "c" * 64, 99),
    ]
    assert store.record_artifacts(run_id, []) == 0
    assert store.artifacts("other") == []


# --------------------------------------------------------------------------- concurrency

RUN_KEY = "shared-run-key"
PER_PROCESS = 500


def _shard_records(shard: int, overlap: bool) -> list[dict[str, Any]]:
    """500 attempts: 100 cases x 5 indices; shards split the indices unless ``overlap``."""
    offset = 0 if overlap else shard * 5
    return [attempt(f"case-{n // 5:03d}", offset + n % 5 + 1) for n in range(PER_PROCESS)]


def _shard_worker(url: str, shard: int, overlap: bool, start: Any, out: Any) -> None:
    """One OS process: open the store, join the run by key and write its 500 attempts."""
    try:
        if not start.wait(120):
            raise TimeoutError("start signal never came")
        with open_store(url) as store:
            run = store.begin_run(
                f"local-id-{shard}",
                run_key=RUN_KEY,
                dataset_id="generation-v1",
                dataset_hash="d4e8",
                mode="fixture",
                protocol={},
                configuration={},
            )
            records = _shard_records(shard, overlap)
            written = resent = 0
            for number, first in enumerate(range(0, PER_PROCESS, 25)):
                batch = records[first : first + 25]
                if number % 2:
                    written += sum(store.record_attempt(run.run_id, r) for r in batch)
                else:
                    written += store.record_attempts(run.run_id, batch)
                resent += store.record_attempts(run.run_id, batch)  # a re-sent report
        out.put((shard, run.run_id, written, resent, None))
    except BaseException:
        out.put((shard, None, 0, 0, traceback.format_exc()))


@pytest.mark.parametrize("overlap", [False, True], ids=["distinct", "identical"])
def test_two_processes_write_one_run_concurrently(target: Target, overlap: bool) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_shard_worker, args=(target.url, shard, overlap, start, out))
        for shard in (0, 1)
    ]
    for proc in procs:
        proc.start()
    start.set()  # both open a brand-new store, migrate and begin the run at the same time
    results = []
    try:
        for _ in procs:
            results.append(out.get(timeout=180))
    except queue.Empty:
        pytest.fail(f"a writer process hung; got {results}")
    finally:
        for proc in procs:
            proc.join(timeout=60)
            if proc.is_alive():
                proc.kill()
                proc.join()
        out.close()
        out.join_thread()
    errors = [r[4] for r in results if r[4]]
    assert not errors, "\n".join(errors)
    run_ids = {r[1] for r in results}
    assert len(run_ids) == 1, run_ids  # both shards joined one run through its key
    (run_id,) = run_ids
    assert [r[3] for r in results] == [0, 0]  # re-sent batches wrote nothing
    expected = PER_PROCESS if overlap else 2 * PER_PROCESS
    assert sum(r[2] for r in results) == expected  # each key written by exactly one process

    with open_store(target.url) as store:
        stored = store.attempts(run_id)
        keys = store.graded_keys(run_id, include_errors=True)
        assert len(store.runs()) == 1
    assert len(stored) == expected
    assert len(keys) == expected  # no duplicates
    wanted = {(r["caseId"], r["index"], "") for s in (0, 1) for r in _shard_records(s, overlap)}
    assert keys == wanted
    rows = target.query("SELECT COUNT(*) FROM attempts WHERE run_id = ?", (run_id,))
    assert rows == [(expected,)]  # written once each


# --------------------------------------------------------------------------- SQLite only


def test_sqlite_uses_wal_and_a_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "goldeval.sqlite3"
    with open_store(path, busy_timeout=7.5) as store:
        assert isinstance(store, SqliteStore)
        assert store.backend == "sqlite"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()


def test_open_store_paths_and_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open_store() as store:
        assert store.url == str(DEFAULT_PATH)
    assert (tmp_path / ".goldeval" / "goldeval.sqlite3").is_file()
    with open_store("sqlite:///rel/x.sqlite3") as store:
        begin(store)
    assert (tmp_path / "rel" / "x.sqlite3").is_file()
    absolute = tmp_path / "abs.sqlite3"
    with open_store(f"sqlite:///{absolute}") as store:  # sqlite:////abs/path
        begin(store)
    assert absolute.is_file()
    with open_store("sqlite://") as memory:
        begin(memory)
        assert [r.run_id for r in memory.runs()] == ["run-1"]
    with pytest.raises(StoreError, match=r"mysql.*user:\*\*\*@"):
        open_store("mysql://user:hunter2@host/db")


def test_sqlite_io_failures_raise_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="cannot create"):
        open_store(blocker / "goldeval.sqlite3")
    garbage = tmp_path / "garbage.sqlite3"
    garbage.write_bytes(os.urandom(4096))
    with pytest.raises(StoreError, match=r"garbage\.sqlite3"):
        open_store(garbage)
    with pytest.raises(StoreError):
        open_store(tmp_path)  # a directory


# --------------------------------------------------------------------------- URLs, PostgreSQL only


def test_redact_url() -> None:
    assert redact_url("postgresql://u:s3cret@db:5432/x") == "postgresql://u:***@db:5432/x"
    assert redact_url("postgresql://u:p@ss/w@db/x") == "postgresql://u:***@db/x"
    assert redact_url("postgresql://u@db/x?password=s3cret&sslmode=require") == (
        "postgresql://u@db/x?password=***&sslmode=require"
    )
    assert redact_url("host=db password=s3cret user=u") == "host=db password=*** user=u"
    assert redact_url("postgresql://db/x") == "postgresql://db/x"
    assert redact_url("postgresql://u:a?b#c/d@db/x") == "postgresql://u:***@db/x"
    # Every credential keyword, not only `password` (libpq's sslpassword is one).
    assert redact_url("postgresql://u@db/x?sslpassword=S5L&sslmode=require") == (
        "postgresql://u@db/x?sslpassword=***&sslmode=require"
    )
    assert redact_url("host=db sslpassword='a b' password=p user=u") == (
        "host=db sslpassword=*** password=*** user=u"
    )


def test_a_store_credential_keyword_never_reaches_the_run(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """`?sslpassword=` of a store that cannot be reached went into the terminal, run.json,
    summary.json, report.md and LAST_SESSION as it was (only `password=` was masked)."""
    pytester.makeini("[pytest]\n")
    ds = pytester.path / "golden" / "demo"
    (ds / "fixtures").mkdir(parents=True)
    (ds / "dataset.yaml").write_text("version: demo-v1\nname: demo\npack: none\n")
    (ds / "rows.jsonl").write_text(
        '{"id": "a", "prompt": "p", "expect": {"contains_any": ["x"]}}\n'
    )
    (ds / "fixtures" / "a.out.md").write_text("x\n")
    secret = "SSLPW-planted-12345678"
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--golden=demo-v1",
        "--golden-artifacts=always",
        f"--golden-store=postgresql://u@127.0.0.1:1/db?sslpassword={secret}",
    )
    assert result.ret == 75, result.stdout.str()
    assert "sslpassword=***" in result.stdout.str()
    seen = [result.stdout.str(), result.stderr.str()]
    seen += [p.read_text(errors="replace") for p in pytester.path.rglob("*") if p.is_file()]
    assert not [text for text in seen if secret in text]


def _error_text(exc: BaseException) -> str:
    return str(exc) + repr(exc) + "".join(traceback.format_exception(exc))


def test_password_never_appears_in_store_errors(postgres_server: PostgresServer) -> None:
    secret = "Very-Secret-Pa55"
    base = postgres_server.url
    scheme, rest = base.split("://", 1)
    userinfo, hostpart = rest.rsplit("@", 1) if "@" in rest else ("goldeval", rest)
    user = userinfo.split(":", 1)[0]
    host, _, _db = hostpart.partition("/")
    urls = [
        f"{scheme}://{user}:{secret}@{host}/goldeval_no_such_database",  # server says no
        f"{scheme}://{user}:{secret}@127.0.0.1:1/db",  # nothing listens there
        f"{scheme}://{user}:{secret}@{host}/db?sslmode=bogus",  # rejected by libpq
        f"{scheme}://{user}:{secret}?x@{host}/db",  # a malformed URL
    ]
    if postgres_server.password_url and postgres_server.password:
        # A role that really needs its password, given a wrong one.
        urls.append(postgres_server.password_url.replace(postgres_server.password, secret))
        with open_store(postgres_server.password_url) as ok:  # the right one works
            assert postgres_server.password not in ok.url
            assert ":***@" in repr(ok)
    for url in urls:
        with pytest.raises(StoreError) as info:
            open_store(url, connect_timeout=5)
        text = _error_text(info.value)
        assert secret not in text, text
        assert ":***@" in text, text
    if postgres_server.password_url is not None:
        assert "password authentication failed" in str(info.value)


@pytest.mark.parametrize("target", ["postgresql"], indirect=True)
def test_postgres_reconnects_after_a_lost_connection(target: Target) -> None:
    with open_store(target.url) as store:
        run_id = begin(store)
        pid = store._conn.info.backend_pid  # type: ignore[attr-defined]
        target.execute("SELECT pg_terminate_backend(?)", (pid,))
        with pytest.raises(StoreError, match="record_attempt failed on PostgreSQL"):
            store.record_attempt(run_id, attempt("a", 1))
        assert store.record_attempt(run_id, attempt("a", 1))  # re-opened
        assert store.attempts(run_id) == [attempt("a", 1)]


def test_record_attempt_texts_is_the_same_write_as_record_attempts(store: Store) -> None:
    """The plugin's path: records already serialised as compact JSON (no parse on the way)."""
    from goldeval.results.attempt_payloads import attempt_payload, without_raw_text

    run_id = begin(store)
    records = [
        AttemptRecord(case_id="a", index=1, status=Status.PASS, duration_ms=3),
        AttemptRecord(case_id="b", index=1, status=Status.FAIL, output="ответ", judge_output="{}"),
        AttemptRecord(case_id="b", index=1, status=Status.ERROR, model="m2", error_kind="X"),
    ]
    rows = []
    for record in records:
        p = attempt_payload(record, keep_passing_output=True)
        rows.append(
            (p["caseId"], p["index"], p["model"], p["status"], without_raw_text(p["record"]))
        )
    assert store.record_attempt_texts(run_id, rows) == 3
    # same rules as the dict path: a duplicate key is a no-op, ERROR is replaced later
    assert store.record_attempt_texts(run_id, rows[:1]) == 0
    stored = store.attempts(run_id)
    expected = [
        {k: v for k, v in r.dump().items() if k not in ("output", "judgeOutput")} for r in records
    ]
    assert sorted(stored, key=lambda a: (a["caseId"], a.get("model") or "")) == expected
    with pytest.raises(ValueError, match="status"):
        store.record_attempt_texts(run_id, [("c", 1, None, "MAYBE", "{}")])


@pytest.mark.parametrize("offset", ["given", "wrong"])
def test_record_texts_split_at_their_offset_store_what_a_parse_stores(
    store: Store, offset: str
) -> None:
    """The payload's layout (run fields first, ``contentAt``) lets the store skip the parse;
    what it stores is the same, and a wrong offset falls back to parsing the record."""
    from goldeval.results.attempt_payloads import attempt_payload
    from goldeval.store.base import AttemptText

    records = [
        AttemptRecord(case_id="a", index=1, status=Status.PASS, duration_ms=3, tries=1),
        AttemptRecord(case_id="b", index=2, status=Status.FAIL, model="m", error_message="x"),
    ]
    split_run, parsed_run = begin(store, "split"), begin(store, "parsed")
    split_rows, parsed_rows = [], []
    for record in records:
        p = attempt_payload(record, keep_passing_output=False)
        at = p["contentAt"] if offset == "given" else 3
        key = (p["caseId"], p["index"], p["model"], p["status"], p["record"])
        split_rows.append(AttemptText(*key, at))
        parsed_rows.append(AttemptText(*key))
    assert store.record_attempt_texts(split_run, split_rows) == 2
    assert store.record_attempt_texts(parsed_run, parsed_rows) == 2
    assert store.attempts(split_run) == store.attempts(parsed_run) == [r.dump() for r in records]


def test_record_batch_writes_cases_and_attempts_in_one_transaction(store: Store) -> None:
    """The plugin's write batch: the same rows as record_cases + record_attempt_texts, and
    all or nothing (a bad attempt row leaves the batch's cases unwritten as well)."""
    from goldeval.results.attempt_payloads import attempt_payload

    run_id = begin(store)
    cases = [
        {"caseId": "a", "prompt": "p-a", "line": 1},
        {"caseId": "b", "prompt": "p-b", "line": 2},
    ]
    rows = []
    for record in (
        AttemptRecord(case_id="a", index=1, status=Status.PASS, duration_ms=3),
        AttemptRecord(case_id="b", index=1, status=Status.FAIL, duration_ms=4),
    ):
        p = attempt_payload(record, keep_passing_output=False)
        rows.append((p["caseId"], p["index"], p["model"], p["status"], p["record"]))
    bad = ("c", 1, None, "MAYBE", "{}")
    with pytest.raises(ValueError, match="status"):
        store.record_batch(run_id, [{"caseId": "c", "prompt": "p-c", "line": 3}], [bad])
    assert store.cases(run_id) == []
    assert store.record_batch(run_id, cases, rows) == (2, 2)
    assert [c["caseId"] for c in store.cases(run_id)] == ["a", "b"]
    assert [(a["caseId"], a["status"]) for a in store.attempts(run_id)] == [
        ("a", "PASS"),
        ("b", "FAIL"),
    ]
    assert store.record_batch(run_id, cases, rows) == (0, 0)  # nothing new
