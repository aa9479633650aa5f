"""goldeval.results.variant_pairs: which pairs a variant session compares, and Holm's
adjustment of their McNemar p-values (issue 35)."""

from __future__ import annotations

import pytest

from goldeval.core.limits import LimitExceeded
from goldeval.results.variant_pairs import holm_adjusted, pair_names


@pytest.mark.parametrize(
    ("p_values", "expected"),
    [
        # worked by hand from Holm's definition: 5p, 4p, 3p, 2p, p with the running maximum
        ([0.01, 0.02, 0.03, 0.04, 0.05], [0.05, 0.08, 0.09, 0.09, 0.09]),
        # unsorted input: sorted 0.005, 0.01, 0.03, 0.04 -> 0.02, 0.03, 0.06, 0.06, in input order
        ([0.01, 0.04, 0.03, 0.005], [0.03, 0.06, 0.06, 0.02]),
        # capped at 1
        ([0.5, 0.6], [1.0, 1.0]),
        ([0.2], [0.2]),
        ([], []),
    ],
)
def test_holm_matches_worked_examples(p_values: list[float], expected: list[float]) -> None:
    assert holm_adjusted(p_values) == pytest.approx(expected)


def test_a_pair_without_p_value_counts_as_one_and_stays_none() -> None:
    # Three tests, one with no discordant case: the two others are adjusted over m = 3.
    assert holm_adjusted([0.01, None, 0.02]) == pytest.approx([0.03, None, 0.04])
    assert holm_adjusted([None, None]) == [None, None]


def test_adjusted_values_never_fall_below_the_raw_ones_and_keep_the_order() -> None:
    raw = [0.003, 0.2, 0.011, 0.04, 0.0001, 0.9, 0.05]
    adjusted = holm_adjusted(raw)
    assert all(a is not None and a >= p for a, p in zip(adjusted, raw, strict=True))
    ranked = sorted(zip(raw, adjusted, strict=True))
    assert [a for _, a in ranked] == sorted(a for _, a in ranked)


def test_pairs_against_the_control_and_all_pairs() -> None:
    names = ["a", "b", "c", "d"]
    assert pair_names(names, "c", "control") == [("c", "a"), ("c", "b"), ("c", "d")]
    # every pair once; the control is the control side of its pairs
    assert pair_names(names, "c", "all") == [
        ("a", "b"),
        ("c", "a"),
        ("a", "d"),
        ("c", "b"),
        ("b", "d"),
        ("c", "d"),
    ]


def test_more_pairs_than_the_limit_is_refused() -> None:
    eight = [f"v{i}" for i in range(8)]
    assert len(pair_names(eight, "v0", "all")) == 28
    with pytest.raises(LimitExceeded, match="makes 36 pairs, at most 28") as info:
        pair_names([*eight, "v8"], "v0", "all")
    assert info.value.limit == "variant_pairs"
    assert len(pair_names([f"v{i}" for i in range(29)], "v0", "control")) == 28
    with pytest.raises(LimitExceeded, match="makes 29 pairs"):
        pair_names([f"v{i}" for i in range(30)], "v0", "control")


def _step_down_rejects(p_values: list[float], alpha: float) -> set[int]:
    """Holm's procedure itself: reject in p order while p_(k) <= alpha / (m - k + 1)."""
    m = len(p_values)
    rejected: set[int] = set()
    for k, i in enumerate(sorted(range(m), key=p_values.__getitem__)):
        if p_values[i] > alpha / (m - k):
            break
        rejected.add(i)
    return rejected


def test_adjusted_values_are_the_smallest_level_at_which_the_procedure_rejects() -> None:
    """An independent check of the formula: a hypothesis is rejected by the step-down
    procedure at level alpha exactly when its adjusted p-value is at most alpha."""
    import random

    rng = random.Random(7)
    for _ in range(200):
        raw = [rng.choice([rng.random() * 0.1, rng.random()]) for _ in range(rng.randint(1, 8))]
        adjusted = holm_adjusted(raw)
        for alpha in (0.001, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5):
            by_formula = {i for i, a in enumerate(adjusted) if a is not None and a <= alpha}
            assert by_formula == _step_down_rejects(raw, alpha), (raw, alpha)
