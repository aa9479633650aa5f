"""Another plugin failing at the end of the session, after goldeval decided (a probe: pytest's
``--junitxml`` to a place it cannot write, the cache under ``-W error``, a project hook): the
session ended in a traceback and exit 1 (the quality-failure code) while LAST_SESSION said
the decided 0. Now: exit 75 (infrastructure; a decided failure keeps its code), one line on
stderr naming the failure, and LAST_SESSION says the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import make_bot_dataset

FAILING_END = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    raise OSError(28, "No space left on device: 'reports/junit.xml'")
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
@pytest.mark.parametrize(("threshold", "code"), [("0.5", 75), ("1.0", 1)])
def test_a_plugin_failing_at_the_end_is_infrastructure(
    pytester: pytest.Pytester, workers: list[str], threshold: str, code: int
) -> None:
    make_bot_dataset(pytester.path, f"    thresholds:\n      overallPassRate: {threshold}\n")
    if threshold == "1.0":  # one row answers wrong: the gate fails (1)
        (pytester.path / "golden/bot/fixtures/greeting.out.md").write_text("Bye.\n")
    pytester.makeconftest(FAILING_END)
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=bot-v1", *workers)
    err = result.stderr.str()
    assert result.ret == code, result.stdout.str()[-2000:] + err
    assert "another plugin failed at the end of the session (OSError" in err
    assert "Traceback" not in err + result.stdout.str()
    last = json.loads((pytester.path / ".goldeval/runs/LAST_SESSION").read_text())
    assert last["exitCode"] == code
    assert "another plugin failed at the end of the session" in last["reason"]
    assert last["run"] and Path(last["run"]).is_dir()


@pytest.mark.parametrize(
    "listing",
    [
        "--fixtures",
        "--fixtures-per-test",
        "--markers",
        "--cache-show",
    ],
)
def test_a_listing_decides_nothing_and_records_nothing(
    pytester: pytest.Pytester, listing: str
) -> None:
    """``--fixtures`` printed "goldeval decision: exit 1" and recorded it in LAST_SESSION
    while pytest exited 0 (a probe); ``--markers`` left a "began" record with no end."""
    make_bot_dataset(pytester.path, "    thresholds:\n      overallPassRate: 0.5\n")
    assert pytester.runpytest("-p", "no:cacheprovider", "--golden=bot-v1").ret == 0
    last = pytester.path / ".goldeval/runs/LAST_SESSION"
    before = last.read_text()
    cache = [] if listing == "--cache-show" else ["-p", "no:cacheprovider"]
    result = pytester.runpytest(*cache, "--golden=bot-v1", listing)
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert "goldeval decision" not in result.stdout.str()
    assert last.read_text() == before


@pytest.mark.parametrize("setup_only", ["--setup-only", "--setup-plan"])
def test_setting_items_up_without_grading_them_is_refused(
    pytester: pytest.Pytester, setup_only: str
) -> None:
    """``--setup-only`` asked the model for every answer, graded none, and exited 0 with every
    item passed in junit.xml (a probe); ``--setup-plan`` wrote the same green test cases."""
    make_bot_dataset(pytester.path, "    thresholds:\n      overallPassRate: 0.5\n")
    (pytester.path / "golden/bot/fixtures/greeting.out.md").write_text("wrong", "utf-8")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--golden=bot-v1", setup_only, "--junitxml=junit.xml"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    assert f"--golden cannot be combined with {setup_only}" in result.stderr.str()
    assert "--collect-only" in result.stderr.str()
    assert not (pytester.path / "junit.xml").exists()


GATE_FAILS = "    thresholds:\n      overallPassRate: 1.0\n"


@pytest.mark.parametrize(
    ("hooks", "code"),
    [
        ("def pytest_terminal_summary(terminalreporter):\n    raise SystemExit(0)\n", 1),
        (
            "@pytest.hookimpl(trylast=True)\ndef pytest_sessionfinish(session):\n"
            "    raise SystemExit(0)\n",
            1,
        ),
        ("def pytest_unconfigure(config):\n    raise RuntimeError('late')\n", 1),
    ],
    ids=["terminal-summary-exit-0", "sessionfinish-exit-0", "unconfigure-raises"],
)
def test_a_later_hook_cannot_end_a_failed_gate_with_0(
    pytester: pytest.Pytester, hooks: str, code: int
) -> None:
    """A re-probe: ``sys.exit(0)`` in another plugin's sessionfinish or terminal summary
    ended a GATE FAIL session with exit 0 (only pytest.exit and unconfigure were guarded)."""
    make_bot_dataset(pytester.path, GATE_FAILS)
    (pytester.path / "golden/bot/fixtures/greeting.out.md").write_text("Bye.\n")
    pytester.makeconftest("import pytest\n\n" + hooks)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--golden=bot-v1")
    assert result.ret == code, result.stdout.str()[-2000:] + result.stderr.str()
    last = json.loads((pytester.path / ".goldeval/runs/LAST_SESSION").read_text())
    assert last["exitCode"] == code


def test_sys_exit_1_after_a_decided_0_is_recorded(pytester: pytest.Pytester) -> None:
    make_bot_dataset(pytester.path, "    thresholds:\n      overallPassRate: 0.5\n")
    pytester.makeconftest(
        "import pytest\n\n@pytest.hookimpl(trylast=True)\n"
        "def pytest_sessionfinish(session):\n    raise SystemExit(1)\n"
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--golden=bot-v1")
    last = json.loads((pytester.path / ".goldeval/runs/LAST_SESSION").read_text())
    assert result.ret == last["exitCode"] == 75, result.stderr.str()
