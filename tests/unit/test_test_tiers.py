"""The fast tier (`pytest -m "not e2e" -n 2`) still unit-tests every package (issue 34).

tests/conftest.py marks the e2e tests by path; this checks that the paths it names exist, that
the marking rule does what it says, and that every package of ``src/goldeval`` is imported by
at least one test module of the fast tier.
"""

from __future__ import annotations

import re

import pytest

from tests.conftest import E2E_PATHS, FAST_PATHS, TESTS, is_e2e
from tests.helpers import ROOT

PACKAGES = sorted(
    p.name for p in (ROOT / "src" / "goldeval").iterdir() if (p / "__init__.py").is_file()
)


def _fast_modules() -> list[str]:
    return [
        p.relative_to(TESTS).as_posix()
        for p in sorted(TESTS.rglob("test_*.py"))
        if not is_e2e(p.relative_to(TESTS).as_posix(), {})
    ]


def test_every_e2e_path_exists() -> None:
    missing = [p for p in (*E2E_PATHS, *FAST_PATHS) if not (TESTS / p).exists()]
    assert not missing, f"tests/conftest.py names paths that do not exist: {missing}"


@pytest.mark.parametrize(
    ("relative", "params", "e2e"),
    [
        ("unit/test_limits.py", {}, False),
        ("reliability/test_signals.py", {}, True),
        ("plugin/test_baselines.py", {}, True),
        ("server/test_hygiene.py", {}, True),
        ("server/test_queue.py", {}, False),
        ("plugin/test_spine.py", {"plugin_args": []}, False),
        ("plugin/test_spine.py", {"plugin_args": ["-n", "2"]}, True),
        ("reports/test_junit.py", {"plugin_args": ["-n", "2"]}, True),
    ],
)
def test_marking_rule(relative: str, params: dict[str, object], e2e: bool) -> None:
    assert is_e2e(relative, params) is e2e


def test_every_package_has_unit_tests_in_the_fast_tier() -> None:
    fast = _fast_modules()
    assert "unit/test_limits.py" in fast and "reliability/test_signals.py" not in fast
    sources = {m: (TESTS / m).read_text(encoding="utf-8") for m in fast}
    uncovered = [
        package
        for package in PACKAGES
        if not any(re.search(rf"\bgoldeval\.{package}\b", text) for text in sources.values())
    ]
    assert not uncovered, f"no fast-tier test module imports goldeval.{uncovered}"


def test_the_marker_is_applied(pytestconfig: pytest.Config, request: pytest.FixtureRequest) -> None:
    """This module is in the fast tier: the hook left it unmarked."""
    assert request.node.get_closest_marker("e2e") is None
    assert any(line.startswith("e2e:") for line in pytestconfig.getini("markers"))
