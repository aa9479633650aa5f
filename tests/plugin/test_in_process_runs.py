"""Two in-process runs in one test process (pytester.runpytest), as plugin authors test.

pytester drops the modules a run imported, but the package of the pytest entry point stays
loaded; a submodule reached through the package's attribute was the first run's, bound to the
first run's classes, and the second run reported its failing answers as passes (a false
green). The inner test runs in a fresh subprocess with no project conftest, so no module of
ours is loaded before the inner runs, as in a user's plugin tests.
"""

from __future__ import annotations

import pytest

from tests.helpers import ROOT

INNER = f"""
import shutil
from pathlib import Path

ROOT = Path({str(ROOT)!r})
ARGS = ("-p", "no:cacheprovider", "--golden=generation-v1", "--golden-no-gate")


def _project(pytester):
    for name in ("golden", "pack", "baselines"):
        shutil.copytree(ROOT / name, pytester.path / name)
    for fixture in (pytester.path / "golden" / "generation" / "fixtures").glob("*.out.md"):
        fixture.write_text("nonsense answer\\n", encoding="utf-8")


def test_first(pytester):
    _project(pytester)
    pytester.runpytest(*ARGS).assert_outcomes(failed=10)


def test_second(pytester):
    _project(pytester)
    pytester.runpytest(*ARGS).assert_outcomes(failed=10)
    pytester.runpytest(*ARGS).assert_outcomes(failed=10)
"""


def test_later_in_process_runs_grade_like_the_first(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "pytester", "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=2)
