"""A run key stopped early, resumed with a narrower selection: never a whole run.

Session 1 stops after its first case (a plugin sets ``session.shouldstop``): INCOMPLETE,
exit 1, the other case never ran. Session 2 resumes the key with ``-k`` on the graded case
only: it used to rewrite the run as COMPLETED with one case and pass its gate (exit 0), and
``goldeval gate --run-key`` agreed. The stop records the cases it left ungraded
(``stoppedEarly.casesNotRun``); a resume that does not grade them is stopped early again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import make_bot_dataset, run_cli

STOPS_AFTER_GREETING = """
_SESSION = [None]

def pytest_sessionstart(session):
    _SESSION[0] = session

def pytest_runtest_logreport(report):
    if report.when == "call" and "greeting" in report.nodeid:
        _SESSION[0].shouldstop = "a plugin says stop"
"""
KEY = ("-p", "no:cacheprovider", "--golden=bot-v1", "--golden-run-key=STOP1")


def _the_run(project: Path) -> dict:
    """The run key's one run folder (a resume keeps its folder; LATEST names only a run
    that finished its selection)."""
    (found,) = (project / ".goldeval" / "runs").glob("*/run.json")
    return json.loads(found.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@pytest.fixture
def bot(pytester: pytest.Pytester) -> Path:
    make_bot_dataset(pytester.path, "    thresholds:\n      overallPassRate: 1.0\n")
    pytester.makeini("[pytest]\n")
    return pytester.path


def test_a_narrower_resume_of_a_stopped_run_is_still_incomplete(
    pytester: pytest.Pytester, bot: Path
) -> None:
    conftest = pytester.makeconftest(STOPS_AFTER_GREETING)
    stopped = pytester.runpytest(*KEY)
    assert stopped.ret == 1, stopped.stdout.str()
    run = _the_run(bot)
    assert run["stoppedEarly"]["casesNotRun"] == ["order-number"], run["stoppedEarly"]
    conftest.unlink()
    narrow = pytester.runpytest(*KEY, "-k", "greeting")
    out = narrow.stdout.str()
    assert narrow.ret == 1, out
    assert "order-number" in out and "GATE PASS" not in out
    run = _the_run(bot)
    assert run["status"] == "INCOMPLETE"
    assert run["stoppedEarly"]["casesNotRun"] == ["order-number"]  # carried to the next resume
    gate = run_cli("gate", "--run-key", "STOP1", cwd=bot)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    # The whole selection grades the rest: now a run, and its gate decides.
    whole = pytester.runpytest(*KEY)
    assert whole.ret == 0, whole.stdout.str()
    run = _the_run(bot)
    assert run["status"] == "COMPLETED" and run["casesTotal"] == 2
    assert run_cli("gate", "--run-key", "STOP1", cwd=bot).returncode == 0


def test_a_run_stopped_early_stores_no_passing_gate_and_a_red_dashboard(
    pytester: pytest.Pytester, bot: Path
) -> None:
    """It exited 1 (INCOMPLETE) while run.json stored `qualityGate: PASS` and the
    --golden-junit dashboard said failures="0" errors="0" (the attempt that never ran is no
    testcase): a dashboard counting failures showed green."""
    import xml.etree.ElementTree as ET

    pytester.makeconftest(STOPS_AFTER_GREETING)
    stopped = pytester.runpytest(*KEY, "--golden-junit=dash.xml")
    assert stopped.ret == 1, stopped.stdout.str()
    run = _the_run(bot)
    assert run["qualityGate"]["passed"] is False
    failed = [r for r in run["qualityGate"]["rules"] if not r["passed"]]
    assert [r["name"] for r in failed] == ["complete"]
    suite = ET.parse(bot / "dash.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("failures") or 0) >= 1, ET.tostring(suite)
