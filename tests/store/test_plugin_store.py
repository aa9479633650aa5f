"""The run store wired to pytest: written as it happens, resumable, shardable (both backends)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from goldeval.store import open_store
from goldeval.testing.llm_server import FakeLLMServer, Fault, fixture_responder
from tests.helpers import RunFiles, strip_timings
from tests.store.conftest import Target, ThrowawayPostgres, find_postgres_binaries

LIVE = [
    "--golden=generation-v1",
    "--golden-mode=live",
    "--golden-model=fake-llm:latest",
    "--golden-no-gate",
]


@pytest.fixture
def llm(golden_project: Path) -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        srv.responder = fixture_responder(golden_project / "golden" / "generation")
        yield srv


def _pytest(project: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def _metrics(doc: dict) -> dict:
    return {
        k: (v["hits"], v["total"])
        for k, v in doc["metrics"].items()
        if isinstance(v, dict) and "hits" in v
    }


def test_run_is_written_as_it_happens(
    pytester: pytest.Pytester, golden_project: Path, target: Target, plugin_args: list[str]
) -> None:
    result = pytester.runpytest(
        "--golden=generation-v1", f"--golden-store={target.url}", *plugin_args
    )
    assert result.ret == 0, result.stdout.str()
    with open_store(target.url) as store:
        (row,) = store.runs()
        assert row.status == "COMPLETED" and row.pass_rate == 1.0
        attempts = store.attempts(row.run_id)
        assert len(attempts) == 10
        assert len({(a["caseId"], a["index"]) for a in attempts}) == 10  # -n 2 duplicates nothing
        names = {a.path for a in store.artifacts(row.run_id)}
        assert {"run.json", "summary.json", "report.md"} <= names


def test_sigkill_then_resume_grades_every_attempt_exactly_once(
    pytester: pytest.Pytester,
    golden_project: Path,
    target: Target,
    llm: FakeLLMServer,
    run_files: RunFiles,
) -> None:
    args = [
        *LIVE,
        f"--golden-base-url={llm.base_url}",
        f"--golden-store={target.url}",
        "--golden-run-key=pipeline-42",
        "--golden-concurrency=1",
        "--golden-attempts=2",
    ]
    llm.latency = 0.3
    proc = _pytest(golden_project, *args)
    deadline = time.monotonic() + 60
    graded = 0
    while time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            with open_store(target.url) as store:
                row = store.get_run("pipeline-42")
                graded = len(store.attempts(row.run_id)) if row else 0
        except Exception:  # the store may not exist yet
            graded = 0
        if graded >= 8:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.stdout is not None
    proc.stdout.close()
    assert 8 <= graded < 20
    with open_store(target.url) as store:
        row = store.get_run("pipeline-42")
        done_before = len(store.attempts(row.run_id))
        assert row.status == "RUNNING"  # killed: never recorded as complete
    calls_before = len(llm.requests)
    llm.latency = 0.0
    resumed = pytester.runpytest(*args)
    assert resumed.ret == 0, resumed.stdout.str()
    assert len(llm.requests) - calls_before == 20 - done_before  # nothing graded twice
    with open_store(target.url) as store:
        row = store.get_run("pipeline-42")
        attempts = store.attempts(row.run_id)
        assert row.status == "COMPLETED"
    assert len(attempts) == 20
    assert len({(a["caseId"], a["index"]) for a in attempts}) == 20
    resumed_run = run_files.latest()
    fresh = pytester.runpytest(
        *[a for a in args if not a.startswith("--golden-run-key")], "--golden-store=none"
    )
    assert fresh.ret == 0
    assert _metrics(resumed_run) == _metrics(run_files.latest())
    assert resumed_run["attemptsTotal"] == 20


def test_rerun_errors_retries_only_errors(
    pytester: pytest.Pytester, golden_project: Path, target: Target, llm: FakeLLMServer
) -> None:
    args = [
        *LIVE,
        f"--golden-base-url={llm.base_url}",
        f"--golden-store={target.url}",
        "--golden-run-key=k2",
        "--golden-retries=0",
        "--golden-concurrency=1",
    ]
    llm.script([None, None, Fault.status(503)])  # the third call fails once
    first = pytester.runpytest(*args)
    assert first.ret == 75
    before = len(llm.requests)
    again = pytester.runpytest(*args, "--golden-rerun-errors")
    assert again.ret == 0, again.stdout.str()
    assert len(llm.requests) - before == 1  # only the errored attempt was called again
    with open_store(target.url) as store:
        attempts = store.attempts(store.get_run("k2").run_id)
    assert sorted(a["status"] for a in attempts) == ["PASS"] * 10


def test_two_shards_add_up_to_one_run(
    pytester: pytest.Pytester, golden_project: Path, target: Target, run_files: RunFiles
) -> None:
    common = [
        "--golden=generation-v1",
        f"--golden-store={target.url}",
        "--golden-run-key=matrix-7",
        "--golden-no-gate",
    ]
    a = _pytest(golden_project, *common, "-k", "api or e2e")
    b = _pytest(golden_project, *common, "-k", "not (api or e2e)")
    out_a, _ = a.communicate(timeout=120)
    out_b, _ = b.communicate(timeout=120)
    assert a.returncode == 0, out_a
    assert b.returncode == 0, out_b
    gate = subprocess.run(
        [
            sys.executable,
            "-m",
            "goldeval.cli.main",
            "gate",
            "--run-key",
            "matrix-7",
            "--store",
            target.url,
            "--json",
        ],
        cwd=golden_project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert json.loads(gate.stdout)["qualityGate"]["verdict"] == "PASS"
    export = subprocess.run(
        [sys.executable, "-m", "goldeval.cli.main", "export", "matrix-7", "--store", target.url],
        cwd=golden_project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    sharded = json.loads(export.stdout)
    single = pytester.runpytest("--golden=generation-v1", "--golden-store=none")
    assert single.ret == 0
    whole = run_files.latest()
    assert _metrics(sharded) == _metrics(whole)
    assert strip_timings(sharded["cases"]) == strip_timings(whole["cases"])


def test_store_listing_commands(
    pytester: pytest.Pytester, golden_project: Path, target: Target
) -> None:
    pytester.runpytest(
        "--golden=generation-v1", f"--golden-store={target.url}", "--golden-run-key=list-me"
    )
    runs = subprocess.run(
        [sys.executable, "-m", "goldeval.cli.main", "runs", "--store", target.url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=golden_project,
    )
    assert runs.returncode == 0 and "list-me" in runs.stdout and "100.0%" in runs.stdout
    show = subprocess.run(
        [sys.executable, "-m", "goldeval.cli.main", "show", "list-me", "--store", target.url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=golden_project,
    )
    assert show.returncode == 0 and "# AI eval report" in show.stdout


def test_postgres_stopped_mid_run_gives_75_and_keeps_what_was_graded(
    pytester: pytest.Pytester,
    golden_project: Path,
    llm: FakeLLMServer,
    run_files: RunFiles,
) -> None:
    binaries = find_postgres_binaries()
    if binaries is None:
        pytest.fail("PostgreSQL binaries are required (install the postgresql package)")
    server = ThrowawayPostgres(binaries)
    server.start()
    try:
        server.wait_ready()
        url = server.admin_url()
        graded_before_stop = {"n": 0}
        replay = llm.responder

        def responder(req):  # type: ignore[no-untyped-def]
            # Stop the database after five answers: the rest of the run has no store.
            graded_before_stop["n"] += 1
            if graded_before_stop["n"] == 6:
                server.stop()
            return replay(req)

        llm.responder = responder
        result = pytester.runpytest(
            *LIVE,
            f"--golden-base-url={llm.base_url}",
            f"--golden-store={url}",
            "--golden-concurrency=1",
        )
        assert result.ret == 75, result.stdout.str()
        result.stdout.fnmatch_lines(["*run store*failed*"])
        assert not (run_files.runs / "LATEST").exists()  # never pointed at as complete
        (run_json,) = run_files.runs.glob("*/run.json")
        run = json.loads(run_json.read_text())
        assert run["status"] == "INTERRUPTED"
        assert run["attemptsTotal"] == 10  # everything graded is kept in the run folder
    finally:
        with contextlib.suppress(RuntimeError):  # already stopped by the responder
            server.stop()
