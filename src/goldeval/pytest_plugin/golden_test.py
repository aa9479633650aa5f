"""The test function every golden row × attempt becomes (collected from the dataset file).

Kept in its own module so pytest collects it like an ordinary test module: fixtures,
markers, ``-k`` and fixture overrides in a conftest all work through public API.
"""

from __future__ import annotations

from typing import Any

from goldeval.pytest_plugin.state import grade_item


def test_golden(golden_answer: Any) -> None:
    """Grade one recorded or live answer of one golden case with the hard graders."""

    grade_item(golden_answer)
