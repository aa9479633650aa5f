"""Issue 15 (no false green): run keys, early stops and rerun plugins.

A run key names ONE run: reusing it under another protocol (mode, attempts, model, provider,
...) is refused with exit 65 before anything runs; a key of another dataset or a store file
that is not a store is a usage error (4). A session that stops before every selected golden
item reported (-x, --maxfail, stepwise, a plugin stopping the session) is INCOMPLETE, never
COMPLETED, never LATEST, never exit 0. Rerun and repeat plugins are refused (exit 4); a
golden attempt reported twice by any other plugin is never silently overwritten.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from goldeval.store import open_store
from goldeval.testing.llm_server import FakeLLMServer, Fault
from tests.helpers import SERIAL_ONLY, chat_calls

FIXTURE = ["--golden=generation-v1", "-p", "no:cacheprovider"]
LIVE = [
    "--golden=generation-v1",
    "--golden-mode=live",
    "--golden-no-gate",
    "-p",
    "no:cacheprovider",
]
CASES = 10


def _nothing_ran(result: pytest.RunResult) -> None:
    out = result.stdout.str()
    assert not re.search(r"\d+ (passed|failed|error)", out), out
    assert "collected" not in out, out


def _run_dirs(project: Path) -> list[Path]:
    runs = project / ".goldeval" / "runs"
    return sorted(p.parent for p in runs.glob("*/run.json")) if runs.exists() else []


def _only_run(project: Path) -> dict:
    (run_dir,) = _run_dirs(project)
    return json.loads((run_dir / "run.json").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- run keys


@pytest.mark.parametrize(
    "second,differing",
    [
        (["--golden-attempts=3"], ["attempts"]),
        (["--golden-judge"], None),  # fixture mode ignores the judge: same protocol
    ],
    ids=["attempts", "judge-ignored-in-fixture-mode"],
)
def test_fixture_run_key_reused_with_other_options(
    pytester: pytest.Pytester,
    golden_project: Path,
    second: list[str],
    differing: list[str] | None,
) -> None:
    first = pytester.runpytest(*FIXTURE, "--golden-run-key=k1")
    assert first.ret == 0, first.stdout.str()
    again = pytester.runpytest(*FIXTURE, "--golden-run-key=k1", *second)
    out = again.stdout.str() + again.stderr.str()
    if differing is None:
        assert again.ret != 65, out
        return
    assert again.ret == 65, out
    for key in differing:
        assert f"{key}:" in out
    assert "Traceback" not in out
    _nothing_ran(again)
    assert len(_run_dirs(golden_project)) == 1  # no folder for the refused session
    with open_store(golden_project / ".goldeval" / "goldeval.sqlite3") as store:
        row = store.get_run("k1")
        assert row is not None and row.protocol["attempts"] == 1
        assert row.status == "COMPLETED"  # the key's run is left as it was
        assert len(store.attempts(row.run_id)) == CASES


@pytest.mark.parametrize(
    "first,second,differing",
    [
        ([], ["--golden-attempts=2"], ["attempts"]),
        (["--golden-model=model-a"], ["--golden-model=model-b"], ["model"]),
        (
            ["--golden-provider=openai", "--golden-model=m"],
            ["--golden-provider=ollama", "--golden-model=m"],
            ["provider"],
        ),
        ([], ["--golden-judge"], ["judgeEnabled", "judgeModel"]),
    ],
    ids=["attempts", "model", "provider", "judge"],
)
def test_live_run_key_reused_under_another_protocol_exits_65_before_any_call(
    pytester: pytest.Pytester,
    golden_project: Path,
    llm: FakeLLMServer,
    first: list[str],
    second: list[str],
    differing: list[str],
) -> None:
    base = [*LIVE, f"--golden-base-url={llm.base_url}", "--golden-run-key=live-1"]
    if not any(a.startswith("--golden-model=") for a in first):
        first = [*first, "--golden-model=fake-llm:latest"]
    if not any(a.startswith("--golden-model=") for a in second):
        second = [*second, "--golden-model=fake-llm:latest"]
    one = pytester.runpytest(*base, *first)
    assert one.ret == 0, one.stdout.str()
    calls = chat_calls(llm)
    assert calls == CASES
    two = pytester.runpytest(*base, *second)
    out = two.stdout.str() + two.stderr.str()
    assert two.ret == 65, out
    assert "--golden-run-key=live-1" in out
    for key in differing:
        assert f"{key}:" in out, out
    assert len(llm.requests) == calls  # refused before any model call


def test_fixture_key_reused_by_a_live_run_exits_65(
    pytester: pytest.Pytester, golden_project: Path, llm: FakeLLMServer
) -> None:
    """The issue's case: a live run passed on a fixture run's key (no live baseline)."""
    assert pytester.runpytest(*FIXTURE, "--golden-run-key=mixed").ret == 0
    live = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm.base_url}",
        "--golden-model=fake-llm:latest",
        "--golden-run-key=mixed",
    )
    out = live.stdout.str() + live.stderr.str()
    assert live.ret == 65, out
    assert "mode:" in out and "model:" in out
    assert not llm.requests


def test_shards_of_one_run_key_may_select_different_cases(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    """The selection is no protocol key: shards of a key select different cases."""
    a = pytester.runpytest(*FIXTURE, "--golden-run-key=sh", "--golden-no-gate", "-k", "api")
    b = pytester.runpytest(*FIXTURE, "--golden-run-key=sh", "--golden-no-gate", "-k", "not api")
    assert a.ret == 0 and b.ret == 0, b.stdout.str()
    with open_store(golden_project / ".goldeval" / "goldeval.sqlite3") as store:
        row = store.get_run("sh")
        assert row is not None and len(store.attempts(row.run_id)) == CASES


def test_a_run_key_session_that_selects_nothing_keeps_no_tests(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    """pytest's 5 becomes a decision on the stored attempts only when the run key itself left
    every selected attempt out as graded before; a ``-k`` that selects nothing still says 5
    (it used to print GATE PASS and exit 0 on the earlier session's attempts)."""
    done = pytester.runpytest(*FIXTURE, "--golden-run-key=k", *plugin_args)
    assert done.ret == 0, done.stdout.str()
    again = pytester.runpytest(*FIXTURE, "--golden-run-key=k", *plugin_args)
    assert again.ret == 0, again.stdout.str()  # every attempt graded before: decided, green
    assert "GATE PASS" in again.stdout.str()
    nothing = pytester.runpytest(*FIXTURE, "--golden-run-key=k", "-k", "no-such-row", *plugin_args)
    assert nothing.ret == pytest.ExitCode.NO_TESTS_COLLECTED, nothing.stdout.str()
    assert "GATE PASS" not in nothing.stdout.str()
    nothing.stdout.fnmatch_lines(["*goldeval decision: exit 5*this session selected nothing*"])
    # The run keeps its own record: the session that selected nothing rewrote nothing of it.
    (run,) = [json.loads(d.joinpath("run.json").read_text()) for d in _run_dirs(golden_project)]
    assert run["pytestStatus"] == 0 and run["exitDecision"]["code"] == 0
    assert run["attemptsTotal"] == CASES
    with open_store(golden_project / ".goldeval" / "goldeval.sqlite3") as store:
        row = store.get_run("k")
        assert row is not None and len(store.attempts(row.run_id)) == CASES  # nothing lost


@SERIAL_ONLY
def test_run_key_of_another_dataset_is_a_usage_error(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    assert pytester.runpytest(*FIXTURE, "--golden-run-key=shared").ret == 0
    other = pytester.runpytest(
        "--golden=holdout-v1", "-p", "no:cacheprovider", "--golden-run-key=shared", *plugin_args
    )
    out = other.stdout.str() + other.stderr.str()
    assert other.ret == 4, out
    assert "--golden-run-key=shared" in out and "generation-v1" in out
    assert "Traceback" not in out
    _nothing_ran(other)
    assert len(_run_dirs(golden_project)) == 1


@pytest.mark.parametrize("where", ["default", "explicit"])
@SERIAL_ONLY
def test_corrupt_store_file_is_a_usage_error_before_anything_runs(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str], where: str
) -> None:
    path = golden_project / (".goldeval/goldeval.sqlite3" if where == "default" else "st.db")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"this is not an SQLite database\x00\xff" * 100)
    args = [] if where == "default" else [f"--golden-store={path.name}"]
    result = pytester.runpytest(*FIXTURE, "--golden-run-key=k", *args, *plugin_args)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, out
    assert str(path) in out and "Traceback" not in out
    _nothing_ran(result)
    assert not _run_dirs(golden_project)
    # without a run key too: the store would fail mid-run (exit 75, retried for nothing)
    plain = pytester.runpytest(*FIXTURE, *args, *plugin_args)
    assert plain.ret == 4, plain.stdout.str()


# --------------------------------------------------------------------------- early stops

FAILING_FIRST = """
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "golden" / "generation" / "fixtures"


@pytest.fixture(scope="session")
def golden_provider():
    def answer(case):
        if case.id == "api-login-wrong-password-401":
            return "no test here"  # a contract FAIL
        time.sleep(0.02)
        return (FIXTURES / f"{case.id}.out.md").read_text(encoding="utf-8")

    return answer
"""

STOP_AFTER_THREE = """
import pytest

SEEN = []


def pytest_runtest_teardown(item):
    SEEN.append(item.nodeid)
    if len(SEEN) >= 3:
        item.session.shouldstop = "the plugin stopped the session"
"""


def _no_baselines(project: Path) -> None:
    # 5 attempts per case: the committed 1-attempt baseline would make the run 65 on its own.
    shutil.rmtree(project / "baselines")


def _assert_stopped_early(project: Path, result: pytest.RunResult, total: int) -> dict:
    out = result.stdout.str()
    assert result.ret == 1, out
    run = _only_run(project)
    assert run["status"] == "INCOMPLETE", run["status"]
    assert run["incomplete"] is True
    not_run = run["stoppedEarly"]["attemptsNotRun"]
    assert not_run > 0 and run["attemptsTotal"] + not_run == total
    assert run["exitDecision"]["code"] == 1
    assert not (project / ".goldeval" / "runs" / "LATEST").exists()
    with open_store(project / ".goldeval" / "goldeval.sqlite3") as store:
        (row,) = store.runs()
        assert row.status != "COMPLETED"
    return run


@pytest.mark.parametrize("stop", [["-x"], ["--maxfail=1"]], ids=["x", "maxfail"])
def test_x_and_maxfail_leave_an_incomplete_run(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str], stop: list[str]
) -> None:
    pytester.makeconftest(FAILING_FIRST)
    _no_baselines(golden_project)
    result = pytester.runpytest(*FIXTURE, "--golden-attempts=5", *stop, *plugin_args)
    run = _assert_stopped_early(golden_project, result, CASES * 5)
    assert "stopped early" in run["exitDecision"]["reason"] or run["attemptsFailed"] >= 1


@SERIAL_ONLY
def test_x_with_a_passing_gate_is_still_not_green(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    """No FAIL at all, but a user's own test fails first: -x stops the golden items."""
    pytester.makepyfile(test_aaa_first="def test_broken():\n    assert False\n")
    _no_baselines(golden_project)  # else the partial selection is 65 against the baseline
    result = pytester.runpytest(*FIXTURE, "-x", "test_aaa_first.py", *plugin_args)
    assert result.ret == 1, result.stdout.str()
    run = _only_run(golden_project)
    assert run["status"] == "INCOMPLETE"
    assert not (golden_project / ".goldeval" / "runs" / "LATEST").exists()


def test_a_plugin_stopping_the_session_leaves_an_incomplete_run(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    pytester.makeconftest(STOP_AFTER_THREE)
    _no_baselines(golden_project)
    result = pytester.runpytest(*FIXTURE, "--golden-attempts=5", *plugin_args)
    run = _assert_stopped_early(golden_project, result, CASES * 5)
    assert run["attemptsPassed"] == run["attemptsTotal"]  # every graded attempt passed
    assert "the plugin stopped the session" in run["stoppedEarly"]["reason"]


@pytest.mark.parametrize("flag", ["--sw", "--lf", "--sw-skip"])
def test_selections_from_pytests_cache_are_refused(
    pytester: pytest.Pytester, golden_project: Path, flag: str
) -> None:
    """--sw's second session (after the first stopped at a failure) and --lf ran only the
    rows that failed last time; with no baseline to call it partial, that subset passed its
    thresholds (GATE PASS, exit 0) and LATEST moved to it. A usage error now, naming how to
    select or retry instead."""
    pytester.makeconftest(FAILING_FIRST)
    _no_baselines(golden_project)
    result = pytester.runpytest("--golden=generation-v1", flag)
    assert result.ret == 4, result.stdout.str()
    assert "pytest's cache of the last session" in result.stderr.str()
    assert "--golden-run-key" in result.stderr.str()
    assert not (golden_project / ".goldeval" / "runs" / "LATEST").exists()


@SERIAL_ONLY
def test_a_run_that_reports_every_item_is_still_completed(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    result = pytester.runpytest(*FIXTURE, "-x", *plugin_args)
    assert result.ret == 0, result.stdout.str()
    run = _only_run(golden_project)
    assert run["status"] == "COMPLETED" and "stoppedEarly" not in run
    assert (golden_project / ".goldeval" / "runs" / "LATEST").exists()


# --------------------------------------------------------------------------- rerun plugins


@pytest.mark.parametrize(
    "args",
    [["--reruns=2"], ["--force-reruns=1"], ["--count=3"]],
    ids=["reruns", "force-reruns", "repeat-count"],
)
@SERIAL_ONLY
def test_rerun_and_repeat_plugins_are_refused(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str], args: list[str]
) -> None:
    result = pytester.runpytest(*FIXTURE, *args, *plugin_args)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, out
    assert "--golden-attempts" in out and "Traceback" not in out
    assert not _run_dirs(golden_project)


def test_reruns_in_the_ini_file_are_refused(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    pytester.makeini("[pytest]\nreruns = 1\n")
    result = pytester.runpytest(*FIXTURE)
    assert result.ret == 4, result.stdout.str()


def test_count_of_one_is_harmless(pytester: pytest.Pytester, golden_project: Path) -> None:
    assert pytester.runpytest(*FIXTURE, "--count=1", "--reruns=0").ret == 0


RERUN_PLUGIN = """
import pytest
from _pytest.runner import runtestprotocol

LOG_FIRST = {log_first}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    runtestprotocol(item, nextitem=nextitem, log=LOG_FIRST)  # the first try
    runtestprotocol(item, nextitem=nextitem, log=True)       # and the retry
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
"""


@pytest.mark.parametrize("log_first", [True, False], ids=["both-reported", "first-hidden"])
def test_an_attempt_run_twice_by_any_plugin_is_refused(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str], log_first: bool
) -> None:
    """Like pytest-rerunfailures (both tries reported) or flaky (the first try hidden)."""
    pytester.makeconftest(RERUN_PLUGIN.format(log_first=log_first))
    result = pytester.runpytest(*FIXTURE, *plugin_args)
    out = result.stdout.str()
    assert result.ret == 4, out
    run = _only_run(golden_project)
    assert run["status"] != "COMPLETED"
    assert len(run["duplicateAttempts"]) == CASES
    assert "--golden-attempts" in run["exitDecision"]["reason"]
    assert not (golden_project / ".goldeval" / "runs" / "LATEST").exists()


@SERIAL_ONLY
def test_x_against_the_committed_baseline_exits_1_not_65(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    """The attempts -x never ran shorten the selection; that is the early stop, not a protocol
    the user chose: exit 1 and INCOMPLETE, as with --golden-deadline."""
    pytester.makeconftest(FAILING_FIRST)
    result = pytester.runpytest(*FIXTURE, "-x", *plugin_args)
    run = _assert_stopped_early(golden_project, result, CASES)
    assert run["exitDecision"]["reason"].startswith("stopped early")


# --------------------------------------------------------------------------- retrying on 75


def test_rerunning_a_key_that_ended_75_retries_its_errors(
    pytester: pytest.Pytester,
    golden_project: Path,
    llm: FakeLLMServer,
) -> None:
    """Issue 31: exit 75 says "retry"; the same command with the same run key retries the
    ERROR attempts (it used to deselect them all, make no call and exit 75 again, forever).
    The 75 summary names that command, run key included."""
    with_password = llm.base_url.replace("http://", "http://me:s3cret-pw@")
    args = [
        *LIVE,
        f"--golden-base-url={with_password}",
        "--golden-model=fake-llm:latest",
        "--golden-run-key=retry-75",
        "--golden-retries=0",
    ]
    llm.set_fault(Fault.status(503))  # the provider is down for the whole first run
    down = pytester.runpytest(*args)
    out = down.stdout.str()
    assert down.ret == 75, out
    assert "goldeval: retry (resumes run key retry-75" in out
    shown = [a.replace(with_password, llm.base_url) for a in args]
    assert f"pytest {' '.join(shown)}" in out  # the exact command, run key included
    assert "s3cret-pw" not in out  # ... without the URL's credentials
    assert chat_calls(llm) == CASES

    llm.set_fault(None)  # up again
    up = pytester.runpytest(*args)
    out = up.stdout.str()
    assert up.ret == 0, out
    assert "deselected" not in out
    assert chat_calls(llm) == 2 * CASES  # every ERROR attempt called again, once
    up.assert_outcomes(passed=CASES)
    run = _latest_run(golden_project)
    assert run["status"] == "COMPLETED" and run["attemptsPassed"] == CASES
    with open_store(golden_project / ".goldeval" / "goldeval.sqlite3") as store:
        row = store.get_run("retry-75")
        assert row is not None and row.status == "COMPLETED"
        assert sorted(a["status"] for a in store.attempts(row.run_id)) == ["PASS"] * CASES


def test_errors_no_retry_fixes_are_kept_unless_rerun_errors_is_given(
    pytester: pytest.Pytester,
    golden_project: Path,
    llm: FakeLLMServer,
) -> None:
    """A 401 (exit 4) is not retried by an identical rerun; once the configuration is fixed,
    --golden-rerun-errors (the explicit form) retries every ERROR attempt."""
    args = [
        *LIVE,
        f"--golden-base-url={llm.base_url}",
        "--golden-model=fake-llm:latest",
        "--golden-run-key=auth-4",
        "--golden-retries=0",
    ]
    llm.set_fault(Fault.status(401))
    first = pytester.runpytest(*args)
    assert first.ret == 4, first.stdout.str()
    assert "goldeval: retry" not in first.stdout.str()  # 4 is not "retry"
    llm.set_fault(None)
    same = pytester.runpytest(*args)
    assert same.ret == 4, same.stdout.str()
    assert chat_calls(llm) == CASES  # nothing called again: the same rerun ends the same way
    fixed = pytester.runpytest(*args, "--golden-rerun-errors")
    assert fixed.ret == 0, fixed.stdout.str()
    assert chat_calls(llm) == 2 * CASES


def _latest_run(project: Path) -> dict:
    runs = project / ".goldeval" / "runs"
    latest = Path((runs / "LATEST").read_text(encoding="utf-8").strip())
    return json.loads((latest / "run.json").read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- a lost xdist worker

DEAD_ON_SEND = """
import os
import signal

import pytest


def pytest_configure(config):
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return  # the xdist controller only
    from xdist.workermanage import WorkerController

    send = WorkerController.send_runtest_some
    calls = []

    def send_runtest_some(self, indices):
        # The third batch xdist sends: the worker dies first, and execnet refuses the send
        # as it does when xdist sends to a worker that has just died (the race this is about).
        calls.append(indices)
        if len(calls) == 3:
            os.kill(self.gateway._rinfo().pid, signal.SIGKILL)
            raise OSError("cannot send (already closed?)")
        return send(self, indices)

    WorkerController.send_runtest_some = send_runtest_some
"""


def test_a_send_to_a_dead_xdist_worker_does_not_end_the_run(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    """xdist can send to a worker that has just died before it handles the worker's end:
    instead of an INTERNALERROR (exit 3) with the dead worker's item never reported, the run
    goes on, the item it was given is an ERROR WORKER_CRASH and the verdict says retry (75)."""
    pytester.makeconftest(DEAD_ON_SEND)
    result = pytester.runpytest(
        "--golden=generation-v1", "--golden-no-gate", "--golden-attempts=5", "-n", "2"
    )
    out = result.stdout.str()
    assert result.ret == 75, out
    assert "INTERNALERROR" not in out
    run = _only_run(golden_project)
    assert run["attemptsTotal"] == CASES * 5  # every selected attempt is in the run
    crashed = [
        a for c in run["cases"] for a in c["attempts"] if a.get("errorKind") == "WORKER_CRASH"
    ]
    assert len(crashed) >= 1 and run["attemptsError"] == len(crashed)
