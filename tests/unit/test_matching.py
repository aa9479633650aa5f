"""The tool-call matcher (graders/matching.py): maximum matchings, iterative, budgeted.

A re-probe: 3,000 expected calls with ``tool_calls_order: any`` ended in a RecursionError
(GRADER_ERROR, exit 75 "retry") on a correct answer, and the matching had no time budget."""

from __future__ import annotations

import itertools
import random

import pytest

from goldeval.graders import budget
from goldeval.graders.matching import bipartite


def _best(ok: list[list[bool]], right: int) -> int:
    """The size of a maximum matching, by trying every assignment (small cases only)."""
    best = 0
    rights = list(range(right)) + [None] * len(ok)
    for choice in itertools.permutations(rights, len(ok)):
        if all(j is None or ok[i][j] for i, j in enumerate(choice)):
            best = max(best, sum(j is not None for j in choice))
    return best


def test_matchings_are_valid_and_maximum() -> None:
    rng = random.Random(7)
    for _ in range(300):
        left, right = rng.randint(0, 4), rng.randint(0, 4)
        ok = [[rng.random() < 0.45 for _ in range(right)] for _ in range(left)]
        matched = bipartite(ok, right)
        used = [j for j in matched if j is not None]
        assert len(used) == len(set(used))  # distinct
        assert all(j is None or ok[i][j] for i, j in enumerate(matched))
        assert len(used) == _best(ok, right), ok


def test_a_long_augmenting_chain_is_no_recursion_error() -> None:
    n = 1500  # past Python's default recursion limit of 1,000 frames
    # left 0 fits right 0, left k rights k-1 and k: each new left item first tries the right
    # item its predecessor holds, whose search runs down the whole chain (depth k)
    ok = [[j == 0 for j in range(n)]] + [[j in (k - 1, k) for j in range(n)] for k in range(1, n)]
    matched = bipartite(ok, n)
    assert matched == list(range(n))


def test_the_search_spends_the_budget() -> None:
    ok = [[True, True], [True, False]]
    with pytest.raises(budget.GraderTimeout), budget.budget("tool_calls", 0.0):
        bipartite(ok, 2, lambda: budget.check_time("tool_calls", "matching"))
