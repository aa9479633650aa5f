"""Issue 31: a pytest outcome raised inside a provider, grader or judge call ends THAT attempt.

``pytest.fail()``, ``pytest.skip()`` and pytest-timeout's signal method raise pytest's
``OutcomeException`` (a BaseException): it used to escape the pipeline, leave the attempt
without the run's model, and split one session into two run folders "side by side", both
COMPLETED, the gate off. Here one row's provider call ends that way while another row
regresses against the baseline: one run folder, LATEST on it, every case in it, the attempt
ERROR TIMEOUT / PROVIDER_RAISED or SKIPPED, the gate applied, exit 1 (the gate's failure comes
before "an attempt is ERROR" in verdict/exit_codes.py). Black box, serial and (the provider's
rows) ``-n 2``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.helpers import SERIAL_ONLY, RunFiles

ROWS = 8
LIVE = [
    "--golden=simple-v1",
    "--golden-mode=live",
    "--golden-baseline=baselines/b.json",
    "-p",
    "no:cacheprovider",
]

#: The team's app: every row answers ok-N; HOW says how r3 and r5 behave instead.
CONFTEST = """
import asyncio, os, sys, time
import pytest

class AppStopped(BaseException):  # an app's own (as asyncio's CancelledError is one)
    pass

def _answer(case):
    how = os.environ.get("HOW", "").split("-")
    if case.id == "r3" and "regress" in how:
        return "no"
    if case.id == "r5":
        if "fail" in how:
            pytest.fail("the app refused this row")
        if "skip" in how:
            pytest.skip("the app has no answer today")
        if "sleep" in how:
            time.sleep(4)
        if "exit" in how:
            sys.exit(0)  # a library giving up the process's way
        if "base" in how:
            raise AppStopped("the app stopped")
    return "ok-" + case.id[1:]

def app(case):
    return _answer(case)

async def async_app(case):  # thread-safe: called through the prefetch pool
    if case.id == "r5" and "sleep" in os.environ.get("HOW", "").split("-"):
        await asyncio.sleep(3)
    return _answer(case)

async_app.__name__ = "app"  # the same provider name as the baseline's (a protocol key)

@pytest.fixture(scope="session")
def golden_provider():
    return async_app if os.environ.get("ASYNC") else app
"""


@pytest.fixture
def simple_project(pytester: pytest.Pytester) -> Path:
    ds = pytester.path / "golden" / "simple"
    ds.mkdir(parents=True)
    (ds / "dataset.yaml").write_text(
        "version: simple-v1\nname: simple\npack: none\n"
        "gate:\n  live:\n    allowedRegression: 0.0\n",
        encoding="utf-8",
    )
    rows = [
        {"id": f"r{i}", "prompt": f"say ok-{i}", "expect": {"contains_any": [f"ok-{i}"]}}
        for i in range(1, ROWS + 1)
    ]
    (ds / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\n")
    (pytester.path / "baselines").mkdir()
    baseline = pytester.path / "baselines" / "b.json"
    if "text" not in _BASELINE:  # captured once (a good run of the same rows), then copied
        captured = pytester.runpytest_subprocess(
            *LIVE, "--golden-save-baseline=baselines/b.json", "--golden-out=.capture"
        )
        assert captured.ret == 0, captured.stdout.str()
        _BASELINE["text"] = baseline.read_text(encoding="utf-8")
    baseline.write_text(_BASELINE["text"], encoding="utf-8")
    return pytester.path


_BASELINE: dict[str, str] = {}


def _run_dirs(project: Path) -> list[Path]:
    return sorted(p.parent for p in (project / ".goldeval" / "runs").glob("*/run.json"))


def _attempt(run: dict, case_id: str) -> dict:
    (case,) = [c for c in run["cases"] if c["caseId"] == case_id]
    (attempt,) = case["attempts"]
    return attempt  # type: ignore[no-any-return]


def _one_gated_run(project: Path, result: pytest.RunResult) -> dict:
    """One run folder, LATEST on it, all 8 cases, one model, the gate applied."""
    out = result.stdout.str() + result.stderr.str()
    assert "side by side" not in out, out
    assert "INTERNALERROR" not in out, out
    dirs = _run_dirs(project)
    assert len(dirs) == 1, (dirs, out)
    files = RunFiles(project)
    assert files.latest_dir() == dirs[0]
    run = files.latest()
    assert run["casesTotal"] == ROWS and run["attemptsTotal"] == ROWS
    assert {a["model"] for c in run["cases"] for a in c["attempts"]} == {run["model"]}
    assert run["qualityGate"] is not None and run["qualityGate"]["passed"] is False, out
    assert _attempt(run, "r3")["status"] == "FAIL"  # the real regression is graded
    assert run["exitDecision"]["code"] == 1, run["exitDecision"]
    assert result.ret == 1, out
    return run


@pytest.mark.parametrize(
    "how,status,kind,text",
    [
        ("fail", "ERROR", "PROVIDER_RAISED", "the app refused this row"),
        ("skip", "SKIPPED", None, "the app has no answer today"),
        ("sleep", "ERROR", "TIMEOUT", "Timeout (>1.0s) from pytest-timeout"),
        # Not Exceptions either: they end that attempt, and no later item is hit (let
        # through, pytest's fixture cache broke: r6-r8 were ERROR "AssertionError").
        ("exit", "ERROR", "PROVIDER_ERROR", "SystemExit in app: 0"),
        ("base", "ERROR", "PROVIDER_ERROR", "AppStopped in app: the app stopped"),
    ],
    ids=["pytest.fail", "pytest.skip", "timeout-signal", "sys.exit", "BaseException"],
)
def test_a_pytest_outcome_in_the_provider_ends_that_attempt_in_one_gated_run(
    pytester: pytest.Pytester,
    simple_project: Path,
    plugin_args: list[str],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    status: str,
    kind: str | None,
    text: str,
) -> None:
    monkeypatch.setenv("HOW", f"regress-{how}")
    started = time.monotonic()
    result = pytester.runpytest_subprocess(
        *LIVE, "--timeout=1", "--timeout-method=signal", *plugin_args
    )
    run = _one_gated_run(simple_project, result)
    attempt = _attempt(run, "r5")
    assert attempt["status"] == status
    assert attempt.get("errorKind") == kind
    assert text in (attempt.get("errorMessage") or attempt.get("skipReason") or "")
    assert run["status"] == "COMPLETED"
    if how == "skip":
        assert run["attemptsSkipped"] == 1 and run["attemptsPassed"] == ROWS - 2
    else:
        assert run["attemptsError"] == 1
    assert time.monotonic() - started < 60


def test_a_timeout_while_waiting_for_a_prefetched_call_is_a_timeout(
    pytester: pytest.Pytester,
    simple_project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A thread-safe provider runs in the prefetch pool: the signal reaches the main thread
    while it waits for the result, and the attempt still ends as ERROR TIMEOUT."""
    monkeypatch.setenv("HOW", "regress-sleep")
    monkeypatch.setenv("ASYNC", "1")
    result = pytester.runpytest_subprocess(*LIVE, "--timeout=1", "--timeout-method=signal")
    run = _one_gated_run(simple_project, result)
    attempt = _attempt(run, "r5")
    assert (attempt["status"], attempt["errorKind"]) == ("ERROR", "TIMEOUT")


def test_thread_method_timeout_under_xdist_is_a_lost_attempt_of_the_same_run(
    pytester: pytest.Pytester,
    simple_project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pytest-timeout's thread method ends the worker (os._exit): nothing can be caught in
    it. The controller records the lost item as ERROR WORKER_CRASH under the run's model:
    still one run, the gate still applied."""
    monkeypatch.setenv("HOW", "regress-sleep")
    result = pytester.runpytest_subprocess(
        *LIVE, "--timeout=1", "--timeout-method=thread", "-n", "2"
    )
    run = _one_gated_run(simple_project, result)
    attempt = _attempt(run, "r5")
    assert (attempt["status"], attempt["errorKind"]) == ("ERROR", "WORKER_CRASH")
    assert "thread method" in attempt["errorMessage"]


GRADER_CONFTEST = """
import os
import pytest
from goldeval.core.models import GraderOutcome
from goldeval.graders.base import Grader

class Picky(Grader):
    name = "picky"
    hard = True
    def applies(self, case):
        return True
    def grade(self, ctx):
        if ctx.case.id == "r5":
            if os.environ.get("HOW") == "grader_skip":
                pytest.skip("picky cannot grade r5")
            if os.environ.get("HOW") == "grader_exit":
                raise SystemExit("picky exits on r5")
            pytest.fail("picky gave up on r5")
        return GraderOutcome(grader=self.name, passed=True)

def pytest_goldeval_register_graders(config):
    return [Picky()]
"""


@pytest.mark.parametrize(
    "how,status,kind",
    [
        ("grader_fail", "ERROR", "GRADER_ERROR"),
        ("grader_skip", "SKIPPED", None),
        ("grader_exit", "ERROR", "GRADER_ERROR"),
    ],
)
@SERIAL_ONLY
def test_a_pytest_outcome_in_a_grader_ends_that_attempt(
    pytester: pytest.Pytester,
    simple_project: Path,
    monkeypatch: pytest.MonkeyPatch,
    plugin_args: list[str],
    how: str,
    status: str,
    kind: str | None,
) -> None:
    conftest = simple_project / "conftest.py"
    conftest.write_text(conftest.read_text() + GRADER_CONFTEST, encoding="utf-8")
    monkeypatch.setenv("HOW", how)
    result = pytester.runpytest_subprocess(*LIVE, "--golden-no-gate", *plugin_args)
    out = result.stdout.str()
    assert len(_run_dirs(simple_project)) == 1, out
    run = RunFiles(simple_project).latest()
    assert run["casesTotal"] == ROWS
    attempt = _attempt(run, "r5")
    assert attempt["status"] == status and attempt.get("errorKind") == kind
    assert "picky" in (attempt.get("errorMessage") or "")
    assert run["attemptsPassed"] == ROWS - 1  # the skip is not counted as a pass
    assert result.ret == run["exitDecision"]["code"]
    if status == "ERROR":
        assert result.ret == 75, out
