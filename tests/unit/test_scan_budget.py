"""Graders whose every step scans the answer spend the grader's time budget (a probe: 9,000
``contains_any`` needles on a 15 MiB answer ran 112 s, ``must_not`` and a contract's
``contains`` alike, and ``json_equals`` with 2,000 ignored paths over 50,000 items 100 s).

The budget is set to nothing (0 s), so the first check stops the grader: what is tested is
that the loop checks the budget at all, not how fast it runs (no timed unit tests)."""

from __future__ import annotations

from typing import Any

import pytest

from goldeval.dataset.case import GoldenCase
from goldeval.graders import budget
from goldeval.graders.base import GradeContext
from goldeval.graders.contract import ContractGrader
from goldeval.graders.json_paths import ANY, json_diff
from goldeval.graders.registry import builtin_graders
from goldeval.providers.base import Answer

ANSWER = "a" * 10_000


def _grader(name: str) -> Any:
    if name == "contract":
        return ContractGrader()
    return next(g for g in builtin_graders() if g.name == name)


CASES = {
    "contains_any": ({"contains_any": [f"needle {i}" for i in range(50)]}, (), ANSWER),
    "must_not": ({}, tuple(f"banned {i}" for i in range(50)), ANSWER),
    "contract": ({"contains": [f"needle {i}" for i in range(50)]}, (), ANSWER),
    "json_equals": (
        {
            "json_equals": list(range(500)),
            "json_ignore": [f"$[{i + 10_000}]" for i in range(50)] + ["$[*]"],
        },
        (),
        # every item differs (equal plain items are passed over unvisited), every one ignored
        str(list(range(1, 501))),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_scanning_grader_stops_at_its_budget(name: str) -> None:
    expect, must_not, text = CASES[name]
    case = GoldenCase("c1", "p", expect, must_not=must_not)
    ctx = GradeContext(case=case, answer=Answer(text=text), retrieved=[], pack=None, options={})
    grader = _grader(name)
    with pytest.raises(budget.GraderTimeout) as stopped, budget.budget(grader.name, 0.0):
        grader.grade(ctx)
    doing = {"contract": "contains", "json_equals": "json_equals"}.get(name, name)
    assert doing in str(stopped.value)  # stopped in the scanning loop itself
    with budget.budget(grader.name, 60.0):  # within its budget it grades as before
        assert grader.grade(ctx) is not None


def test_each_yields_every_item_within_the_budget() -> None:
    with budget.budget("g", 60.0):
        assert list(budget.each([1, 2, 3], grader="g", doing="x")) == [1, 2, 3]


def test_a_large_enum_under_items_spends_the_budget() -> None:
    """A re-probe: ``{"items": {"enum": [1..5000]}}`` over a 10,000-item answer ran 38 s with
    a 1 s budget: leaf keywords were outside the budget."""
    schema = {"type": "array", "items": {"enum": list(range(1, 5001))}}
    case = GoldenCase("c1", "p", {"json_schema": schema})
    text = str([5000] * 100)
    ctx = GradeContext(case=case, answer=Answer(text=text), retrieved=[], pack=None, options={})
    grader = _grader("json_schema")
    with pytest.raises(budget.GraderTimeout), budget.budget(grader.name, 0.0):
        grader.grade(ctx)
    with budget.budget(grader.name, 60.0):
        assert grader.grade(ctx).passed


def test_json_equals_without_ignored_paths_spends_the_budget_too() -> None:
    """Without ``json_ignore`` the comparison checked no budget, and wrote every node's path
    out (a 2 MB answer 60 levels deep: 23 s). Objects are visited, so the budget is checked."""
    value: Any = [{"k": i} for i in range(1000)]
    for level in range(60):
        value = {f"k_{level}": value}
    with pytest.raises(budget.GraderTimeout), budget.budget("json_equals", 0.0):
        list(json_diff(value, value))
    with budget.budget("json_equals", 60.0):
        assert list(json_diff(value, value)) == []
        changed = {"k_59": {"k_58": 1}}
        assert list(json_diff({"k_59": {"k_58": [1]}}, changed)) == [
            ("$.k_59.k_58", "expected array, got integer 1")
        ]


def test_json_equals_checks_the_budget_over_an_object_s_keys() -> None:
    """The loops over a mapping's keys matched each against every ignored path with no
    budget check (50,000 keys, 2,000 paths: 155 s over a 2 s budget)."""
    answer = {f"k{i}": i for i in range(500)}
    ignore = [["z", i] for i in range(50)] + [[ANY]]
    with pytest.raises(budget.GraderTimeout), budget.budget("json_equals", 0.0):
        list(json_diff({}, answer, ignore))
