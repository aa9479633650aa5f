"""Adaptive attempts (issue 35, ``--golden-attempts=auto:MAX``): which cases get one more
attempt in a variant session gated on a compared pair.

A session runs its attempts in rounds (every selected case's attempt 1 for every variant,
then attempt 2, ...). Before round k > 1 the rule looks at what the rounds before measured:
if the paired comparison already decides (the non-inferiority statistic is PASS or FAIL at
the manifest's margin, goldeval.results.non_inferiority), no case gets another attempt;
otherwise a case gets attempt k when its outcome is not settled: either variant has fewer than
two graded attempts of it (:data:`SETTLED_AFTER`), the two variants disagree on it (its
per-case outcomes differ under the comparison's rule), or either variant's attempts on it are
mixed (some pass, some fail). Cases where both variants agree, consistently over at least two
attempts each, are left at the attempts they have. Pure logic: the
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

#: Graded attempts each side needs before a case can count as settled: one attempt that
#: agrees says nothing of how often the two would disagree (a 40% and a 60% case agree by
#: chance about half the time), so every case gets a second one unless the comparison decides.
SETTLED_AFTER = 2

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
    """Whether a case needs another attempt: a side with fewer than two graded attempts, a
    side whose attempts are mixed, or the two sides' per-case outcomes differing."""
    if a is None or b is None or a.graded < SETTLED_AFTER or b.graded < SETTLED_AFTER:
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
