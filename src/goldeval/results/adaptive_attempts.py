"""Adaptive attempts (issue 35, ``--golden-attempts=auto:MAX``): which cases get one more
attempt in a variant session gated on a compared pair.

A session runs its attempts in rounds (every selected case's attempt 1 for every variant,
then attempt 2, ...). Before round k > 1 the rule looks at what the rounds before measured:
if the paired comparison already decides (the non-inferiority statistic is PASS or FAIL at
the manifest's margin, goldeval.results.non_inferiority), no case gets another attempt;
otherwise a case gets attempt k when its outcome is not settled: the two variants disagree on
it (its per-case outcomes differ under the comparison's rule), either variant's attempts on
it are mixed (some pass, some fail), or either has no graded attempt of it yet. Cases where
both variants agree, consistently, are left at the attempts they have. Pure logic: the
pytest side is goldeval.pytest_plugin.adaptive.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from goldeval.results.non_inferiority import non_inferiority
from goldeval.results.sampling import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    OutcomeRule,
    Tally,
    case_outcome,
)

#: Verdicts of the non-inferiority statistic that decide the comparison.
DECIDED = ("PASS", "FAIL")


@dataclass(frozen=True)
class RoundPlan:
    """What the next round runs: nothing when ``decided``, else the ``cases`` listed."""

    decided: bool
    #: The statistic's verdict on the rounds so far (PASS / FAIL / UNDERPOWERED).
    verdict: str
    cases: frozenset[str]


def unsettled(a: Tally | None, b: Tally | None, rule: OutcomeRule) -> bool:
    """Whether a case needs another attempt: a side with nothing graded, a side whose
    attempts are mixed, or the two sides' per-case outcomes differing."""
    if a is None or b is None or not a.graded or not b.graded:
        return True
    if 0 < a.passed < a.graded or 0 < b.passed < b.graded:
        return True
    return case_outcome(a, rule) != case_outcome(b, rule)


def plan_round(
    control: Mapping[str, Tally],
    candidate: Mapping[str, Tally],
    cases: list[str],
    margin: float,
    *,
    rule: OutcomeRule = "majority",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> RoundPlan:
    """The next round over ``cases`` (the selected ones) from the tallies so far: the
    comparison's statistic on the cases both graded, as the gate will compute it, then the
    unsettled cases when it does not decide yet."""
    ids = sorted(c for c in cases if c in control and c in candidate)
    pairs = [(control[c], candidate[c]) for c in ids if control[c].graded and candidate[c].graded]
    verdict = non_inferiority(pairs, margin, rule=rule, resamples=resamples, seed=seed).verdict
    if verdict in DECIDED:
        return RoundPlan(True, verdict, frozenset())
    needing = frozenset(c for c in cases if unsettled(control.get(c), candidate.get(c), rule))
    return RoundPlan(False, verdict, needing)
