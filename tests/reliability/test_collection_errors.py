"""A test file that does not import is a failure even beside a passing golden gate (a probe:
``--continue-on-collection-errors`` ran the golden rows, the gate passed and the session
exited 0 over pytest's "1 error")."""

from __future__ import annotations

import pytest

from tests.helpers import make_bot_dataset

GATE = "    thresholds:\n      overallPassRate: 0.5\n"


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_collection_error_keeps_the_session_failed(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    make_bot_dataset(pytester.path, GATE)
    pytester.makepyfile(test_broken="import nonexistent_module_of_this_probe\n")
    pytester.makepyfile(test_fine="def test_fine():\n    assert True\n")
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--golden=bot-v1",
        "--continue-on-collection-errors",
        "test_broken.py",
        "test_fine.py",
        *workers,
    )
    out = result.stdout.str()
    assert result.ret == 1, out[-2000:]
    assert "1 error" in out
    decision = [ln for ln in out.splitlines() if ln.startswith("goldeval decision:")]
    assert decision and "exit 1" in decision[-1], decision
    last = (pytester.path / ".goldeval" / "runs" / "LAST_SESSION").read_text(encoding="utf-8")
    assert '"exitCode": 1' in last
