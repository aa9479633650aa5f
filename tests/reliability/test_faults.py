"""Faults against the real local LLM server: hangs, deadlines, SIGINT, SIGKILL, a worker crash.

Every scenario ends with the same questions: did the run end (quickly), was any attempt graded
twice (server requests vs attempts), was anything lost (every selected attempt is in the run),
and is an unfinished run kept apart from finished ones (INTERRUPTED, not pointed to by LATEST)?
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from goldeval.store import open_store
from goldeval.testing.llm_server import FakeLLMServer, Fault
from tests.helpers import LIVE_NO_GATE, RunFiles, chat_calls, spawn_pytest

LIVE = [*LIVE_NO_GATE]
CASES = 10


# --------------------------------------------------------------------------- hang / deadline


def test_a_provider_that_stalls_forever_is_a_quick_timeout_error(
    pytester: pytest.Pytester, llm: FakeLLMServer, run_files: RunFiles
) -> None:
    llm.set_fault(Fault.hang(60))
    start = time.monotonic()
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm.base_url}",
        "--golden-timeout=0.5",
        "--golden-retries=0",
        "-k",
        "api-login-wrong-password-401",
    )
    elapsed = time.monotonic() - start
    assert result.ret == 75, result.stdout.str()
    result.assert_outcomes(errors=1)
    assert elapsed < 15, elapsed  # not the 60 s of the hang
    (case,) = run_files.latest()["cases"]
    attempt = case["attempts"][0]
    assert (attempt["status"], attempt["errorKind"], attempt["tries"]) == ("ERROR", "TIMEOUT", 1)
    assert "0.5s" in attempt["errorMessage"]
    result.stdout.fnmatch_lines(["*ERROR TIMEOUT after 1 try*"])


def test_deadline_ends_a_run_where_every_call_hangs(
    pytester: pytest.Pytester, llm: FakeLLMServer, run_files: RunFiles
) -> None:
    """--golden-deadline stops starting attempts, and cuts the calls in flight at the
    deadline (issue 32), so the run ends after the deadline, not after the hang."""
    llm.set_fault(Fault.hang(60))
    start = time.monotonic()
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm.base_url}",
        "--golden-timeout=10",
        "--golden-retries=0",
        "--golden-concurrency=2",
        "--golden-deadline=3",
    )
    elapsed = time.monotonic() - start
    assert result.ret != 0 and result.ret == 75, result.stdout.str()
    assert elapsed < 20, elapsed
    run = run_files.latest()
    assert run["status"] == "INCOMPLETE" and run["incomplete"] is True
    attempts = [a for c in run["cases"] for a in c["attempts"]]
    assert len(attempts) == CASES  # nothing lost: every attempt is in the run
    skipped = [a for a in attempts if a["status"] == "SKIPPED"]
    errored = [a for a in attempts if a["status"] == "ERROR"]
    assert skipped and all(a["skipReason"] == "deadline" for a in skipped)
    assert errored and all(a["errorKind"] == "TIMEOUT" for a in errored)
    assert len(skipped) + len(errored) == CASES
    assert chat_calls(llm) == len(errored)  # a skipped attempt never called the model
    assert run["notStartedBeforeDeadline"] == len(skipped)


def test_calls_nobody_will_grade_do_not_keep_the_process_alive(
    golden_project: Path, llm: FakeLLMServer
) -> None:
    """``-x`` stops after the first FAIL while the prefetcher's calls of the next items hang:
    pytest is done and must exit, not wait for answers nobody will grade (a SIGINT-stopped
    run hung past 60 s after its summary so in CI)."""
    rows = [
        json.loads(line)
        for line in (golden_project / "golden" / "generation" / "golden-generation.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
        if line.startswith("{")
    ]
    first_prompt = json.dumps(rows[0]["prompt"])[1:-1]
    release = threading.Event()

    def responder(request: Any) -> Any:
        if first_prompt in json.dumps(request.messages):
            return "nothing the contract asks for"  # FAIL at once: -x stops the session
        release.wait(90)  # every other call hangs (a stuck server)
        return "late"

    llm.responder = responder
    proc = spawn_pytest(
        golden_project,
        *LIVE,
        f"--golden-base-url={llm.base_url}",
        "--golden-concurrency=4",
        "--golden-retries=0",
        "-x",
        "-p",
        "no:randomly",
    )
    try:
        start = time.monotonic()
        out, _ = proc.communicate(timeout=60)
        elapsed = time.monotonic() - start
    finally:
        release.set()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "1 failed" in out, out[-2000:]
    assert chat_calls(llm) > 1  # the next items' calls were in flight
    assert elapsed < 30, (elapsed, out[-2000:])


# --------------------------------------------------------------------------- interruptions


def _graded(store_url: str, key: str) -> int:
    try:
        with open_store(store_url) as store:
            row = store.get_run(key)
            return len(store.attempts(row.run_id)) if row else 0
    except Exception:  # the store may not exist yet
        return 0


def _wait_for_attempts(store_url: str, key: str, at_least: int, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    graded = 0
    while time.monotonic() < deadline:
        graded = _graded(store_url, key)
        if graded >= at_least:
            return graded
        time.sleep(0.1)
    return graded


@pytest.mark.parametrize(
    "sig,concurrency",
    [(signal.SIGINT, 1), (signal.SIGINT, 4), (signal.SIGKILL, 1)],
    ids=["SIGINT-serial-calls", "SIGINT-4-calls-in-flight", "SIGKILL"],
)
def test_interrupted_live_run_resumes_without_grading_twice(
    pytester: pytest.Pytester,
    golden_project: Path,
    llm: FakeLLMServer,
    run_files: RunFiles,
    sig: signal.Signals,
    concurrency: int,
) -> None:
    """Interrupt once at least 4 attempts are in the store, then resume with the same key.

    A call made before the interruption but not yet graded is made again on resume: with
    ``--golden-concurrency=1`` at most the one call in flight; with C > 1 the prefetcher
    (src/goldeval/pytest_plugin/prefetch.py) has up to its window (2·C) plus the current item
    started,
    so the server may see up to 2·C + 1 extra (paid) requests. Every attempt is still graded
    exactly once."""
    store_url = str(golden_project / "store" / "runs.sqlite3")
    (golden_project / "store").mkdir()
    key = f"pipeline-{sig.name}-{concurrency}"
    attempts = 2
    total = CASES * attempts
    args = [
        *LIVE,
        f"--golden-base-url={llm.base_url}",
        f"--golden-store={store_url}",
        f"--golden-run-key={key}",
        f"--golden-concurrency={concurrency}",
        f"--golden-attempts={attempts}",
    ]
    llm.latency = 0.25
    proc = spawn_pytest(golden_project, *args)
    try:
        graded = _wait_for_attempts(store_url, key, 4)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert 4 <= graded < total
    runs = golden_project / ".goldeval" / "runs"
    with open_store(store_url) as store:
        row = store.get_run(key)
        assert row is not None
        done_before = len(store.attempts(row.run_id))
        first_status = row.status
    calls_before = chat_calls(llm)
    in_flight_lost = calls_before - done_before  # called but never graded (cut mid-call)
    window = 2 * concurrency if concurrency > 1 else 0
    assert 0 <= in_flight_lost <= window + 1
    print(
        f"{sig.name} C={concurrency}: {done_before} graded before, {in_flight_lost} calls "
        "made but not graded (re-called on resume)"
    )
    if sig is signal.SIGINT:
        assert proc.returncode == pytest.ExitCode.INTERRUPTED, out[-2000:]
        assert first_status == "INTERRUPTED"
        (run_json,) = runs.glob("*/run.json")
        interrupted = json.loads(run_json.read_text(encoding="utf-8"))
        assert interrupted["status"] == "INTERRUPTED"
        assert interrupted["attemptsTotal"] == done_before  # what was graded is kept
        assert not (runs / "LATEST").exists()  # never pointed at as a finished run
    else:
        assert proc.returncode == -signal.SIGKILL
        assert first_status == "RUNNING"
        assert not list(runs.glob("*/run.json")) if runs.exists() else True
        assert not (runs / "LATEST").exists()

    llm.latency = 0.0
    resumed = pytester.runpytest(*args)
    assert resumed.ret == 0, resumed.stdout.str()[-3000:]
    new_calls = chat_calls(llm) - calls_before
    assert new_calls == total - done_before  # nothing graded twice
    assert chat_calls(llm) == total + in_flight_lost
    with open_store(store_url) as store:
        row = store.get_run(key)
        stored = store.attempts(row.run_id)
        assert row.status == "COMPLETED"
    assert len(stored) == total  # nothing lost
    assert len({(a["caseId"], a["index"]) for a in stored}) == total
    final = run_files.latest()
    assert final["status"] == "COMPLETED" and final["attemptsTotal"] == total
    assert final["metrics"]["overallPassRate"]["hits"] == total
    if sig is signal.SIGINT:
        # the resumed run keeps its id and folder: LATEST now points at it, COMPLETED
        assert run_files.latest_dir().name == row.run_id


# --------------------------------------------------------------------------- worker crash

CRASH_CONFTEST = """
import os
from pathlib import Path

import pytest

CRASH = "e2e-login-happy-alice"


@pytest.fixture(scope="session")
def golden_provider():
    fixtures = Path(__file__).parent / "golden" / "generation" / "fixtures"

    def answer(case):
        if case.id == CRASH and os.environ.get("PYTEST_XDIST_WORKER"):
            os._exit(1)  # the worker process dies mid-item
        return (fixtures / f"{case.id}.out.md").read_text(encoding="utf-8")

    return answer
"""


def test_xdist_worker_crash_is_an_error_and_the_run_is_not_green(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    pytester.makeconftest(CRASH_CONFTEST)
    result = pytester.runpytest("--golden=generation-v1", "-p", "no:cacheprovider", "-n", "2")
    out = result.stdout.str()
    assert result.ret != 0, out  # holds today: exit 3 (INTERNAL_ERROR)
    assert result.ret == 75, out  # an ERROR attempt: infrastructure, retry the run
    assert "crashed" in out
    run = run_files.latest()
    by_id = {c["caseId"]: c for c in run["cases"]}
    assert len(by_id) == CASES  # nothing lost: the other nine cases were graded
    crashed = by_id["e2e-login-happy-alice"]
    (attempt,) = crashed["attempts"]
    assert crashed["status"] == "ERROR"
    assert attempt["status"] == "ERROR" and attempt["errorKind"] == "WORKER_CRASH"
    assert "crashed" in attempt["errorMessage"]
    assert run["attemptsError"] == 1 and run["attemptsPassed"] == CASES - 1
    assert run["exitDecision"]["code"] == 75
    assert all(c["status"] == "PASS" for cid, c in by_id.items() if cid != crashed["caseId"])
    print("run.json says about the crashed case:", json.dumps(crashed, ensure_ascii=False))


# --------------------------------------------------------------------------- judge faults


def test_judge_calls_honour_timeout_and_retries(
    pytester: pytest.Pytester, llm: FakeLLMServer, run_files: RunFiles
) -> None:
    from goldeval.testing.llm_server import Reply

    replay = llm.responder

    def responder(req):  # type: ignore[no-untyped-def]
        if "CANDIDATE:" in (req.last_user_message or ""):
            return Reply(content="VERDICT: ПРИНЯТО", delay=1.0)  # slower than the timeout
        return replay(req)

    llm.responder = responder
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm.base_url}",
        "--golden-judge",
        "--golden-timeout=0.5",
        "--golden-retries=0",
        "-k",
        "api-login-wrong-password-401",
    )
    assert result.ret == 0, result.stdout.str()
    (case,) = run_files.latest()["cases"]
    judge = case["attempts"][0].get("judge") or {}
    assert "TIMEOUT" in (judge.get("error") or ""), judge
