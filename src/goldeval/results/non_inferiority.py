"""The non-inferiority decision of two variants on the same cases (issue 35): the interval it
reads (the case-clustered bootstrap of :mod:`goldeval.results.sampling`, widened to Newcombe's
hybrid score interval of the per-case outcomes) and how many more cases would decide an
underpowered comparison. The formulas and when not to trust them are in docs/methodology.md
("Repeated attempts and paired comparisons").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from goldeval.core.stats import wilson
from goldeval.results.sampling import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Interval,
    OutcomeRule,
    Tally,
    Verdict,
    case_outcome,
    difference_interval,
    dumped_interval,
    rate_difference,
    z_value,
)

#: Newcombe's hybrid score interval for paired proportions (see :func:`paired_score_interval`).
SCORE = "newcombe-score"


def paired_score_interval(
    pairs: Sequence[tuple[Tally, Tally]],
    rule: OutcomeRule = "majority",
    confidence: float = DEFAULT_CONFIDENCE,
) -> Interval | None:
    """Newcombe's hybrid score interval (Statistics in Medicine 17:2635, 1998, method 10)
    for candidate − control in per-case pass rate (each case's outcome under ``rule``).

    With ``a`` cases passing on both sides, ``b`` only on the candidate's, ``c`` only on the
    control's and ``d`` on neither (``n`` cases): ``p1 = (a+b)/n`` (candidate), ``p2 =
    (a+c)/n`` (control), Wilson limits ``l1, u1`` and ``l2, u2``, and ``φ = (ad − bc) /
    √((a+b)(c+d)(a+c)(b+d))`` (0 when a margin is empty; when ``ad > bc``, ``ad − bc`` is
    replaced by ``max(ad − bc − n/2, 0)``, as Newcombe's method does); the interval of
    ``θ = p1 − p2`` is
    ``θ − √((p1−l1)² − 2φ(p1−l1)(u2−p2) + (u2−p2)²)`` to
    ``θ + √((u1−p1)² − 2φ(u1−p1)(p2−l2) + (p2−l2)²)``.

    Unlike the percentile bootstrap it does not shrink to a point when no case differs:
    nine cases that all pass on both sides give [−29.9, +29.9] points, not [0, 0]. None
    when nothing is paired.
    """
    if not pairs:
        return None
    return _score_interval(*_paired_counts(pairs, rule), z_value(confidence))


def _paired_counts(
    pairs: Sequence[tuple[Tally, Tally]], rule: OutcomeRule
) -> tuple[int, int, int, int]:
    """(both pass, candidate only, control only, neither) over the cases' outcomes."""
    a = b = c = d = 0
    for control, candidate in pairs:
        first, second = case_outcome(control, rule), case_outcome(candidate, rule)
        a += first and second
        b += second and not first
        c += first and not second
        d += not first and not second
    return a, b, c, d


def _score_interval(a: float, b: float, c: float, d: float, z: float) -> Interval:
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    first, second = wilson(a + b, n, z), wilson(a + c, n, z)
    assert first is not None and second is not None  # n > 0
    (l1, u1), (l2, u2) = first, second
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    # Newcombe's φ, with ad − bc reduced by n/2 (not below 0) when it is positive.
    concordance = a * d - b * c
    if concordance > 0:
        concordance = max(concordance - n / 2, 0.0)
    phi = concordance / math.sqrt(margins) if margins > 0 else 0.0
    below = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    above = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    theta = p1 - p2
    return Interval(
        max(-1.0, theta - math.sqrt(max(0.0, below))),
        min(1.0, theta + math.sqrt(max(0.0, above))),
        SCORE,
    )


def score_cases_to_decide(
    pairs: Sequence[tuple[Tally, Tally]],
    margin: float,
    rule: OutcomeRule = "majority",
    confidence: float = DEFAULT_CONFIDENCE,
) -> int | None:
    """How many more paired cases the score interval needs to leave −margin, if the four
    shares of outcomes stayed as they are: the smallest such total found by doubling then
    bisection (the interval narrows as cases are added), minus the cases there are. 0 when it
    already decides; None when even a million cases would not (the estimate sits on −margin).
    """
    n = len(pairs)
    if n == 0:
        return None
    counts = _paired_counts(pairs, rule)
    z = z_value(confidence)

    def decides(total: int) -> bool:
        a, b, c, d = (k * total / n for k in counts)
        scaled = _score_interval(a, b, c, d, z)
        return scaled.lower > -margin or scaled.upper < -margin

    if decides(n):
        return 0
    low, high = n, 2 * n
    while not decides(high):
        low, high = high, 2 * high
        if high > 1_000_000:
            return None
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if decides(mid) else (mid, high)
    return high - n


def decision_interval(
    pairs: Sequence[tuple[Tally, Tally]],
    rule: OutcomeRule = "majority",
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Interval | None:
    """The interval the non-inferiority decision reads: the case-clustered interval of the
    attempt-weighted difference (:func:`difference_interval`), widened to Newcombe's score
    interval on per-case outcomes (:func:`paired_score_interval`) wherever that one is wider.

    The bootstrap alone is overconfident exactly where a gate is most tempted: when few or
    no cases differ it collapses towards a point (9 identical cases: [0, 0], which would
    call any margin met), while n cases can never bound the difference closer than their
    score interval allows. The method names both when the score interval widened it.
    """
    boot = difference_interval(pairs, resamples=resamples, seed=seed, confidence=confidence)
    score = paired_score_interval(pairs, rule, confidence)
    if boot is None or score is None:
        return boot
    if score.lower >= boot.lower and score.upper <= boot.upper:
        return boot
    return Interval(
        min(boot.lower, score.lower), max(boot.upper, score.upper), f"{boot.method}+{SCORE}"
    )


@dataclass(frozen=True)
class NonInferiority:
    """Is the candidate not worse than the control by more than ``margin``?

    ``PASS``: the interval's lower bound is above −margin. ``FAIL``: its upper bound is
    below −margin (clearly worse). ``UNDERPOWERED``: the interval contains −margin, so
    these cases cannot tell; ``more_cases`` estimates how many more paired cases would
    decide it (None when no number would: the estimate sits on −margin, or nothing is
    paired). See :func:`cases_to_decide`.
    """

    verdict: Verdict
    margin: float
    cases: int
    difference: float | None
    interval: Interval | None
    more_cases: int | None

    def dump(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "margin": self.margin,
            "cases": self.cases,
            "difference": self.difference,
            "ci95": dumped_interval(self.interval),
            "moreCases": self.more_cases,
        }


def non_inferiority(
    pairs: Sequence[tuple[Tally, Tally]],
    margin: float,
    *,
    rule: OutcomeRule = "majority",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> NonInferiority:
    """The decision on the paired interval of candidate − control (see the class), the
    interval of :func:`decision_interval`."""
    if not 0.0 <= margin < 1.0:
        raise ValueError(f"the margin must be in [0, 1), got {margin}")
    interval = decision_interval(pairs, rule, resamples=resamples, seed=seed, confidence=confidence)
    difference = rate_difference(pairs)
    if interval is None or difference is None:
        return NonInferiority("UNDERPOWERED", margin, 0, None, None, None)
    if interval.lower > -margin:
        return NonInferiority("PASS", margin, len(pairs), difference, interval, 0)
    if interval.upper < -margin:
        return NonInferiority("FAIL", margin, len(pairs), difference, interval, 0)
    # Both intervals must leave −margin: the larger of the two estimates.
    boot = difference_interval(pairs, resamples=resamples, seed=seed, confidence=confidence)
    assert boot is not None  # pairs exist
    estimates = [
        0
        if boot.lower > -margin or boot.upper < -margin
        else cases_to_decide(len(pairs), difference, boot, margin),
        score_cases_to_decide(pairs, margin, rule, confidence),
    ]
    more = None if None in estimates else max(1, *(e for e in estimates if e is not None))
    return NonInferiority("UNDERPOWERED", margin, len(pairs), difference, interval, more)


def cases_to_decide(cases: int, difference: float, interval: Interval, margin: float) -> int | None:
    """How many more paired cases would move the interval off −margin, if the difference
    stayed where it is and the interval's half-width shrank as 1/√n.

    The side facing −margin decides: ``w = difference − lower`` when the estimate is above
    −margin (the lower bound must rise past it), ``w = upper − difference`` when below. With
    ``d = |difference + margin|`` the distance from the estimate to −margin, the half-width
    at n' cases is ``w·√(n/n')``, which is below d once ``n' > n·(w/d)²``; the answer is
    ``⌊n·(w/d)²⌋ + 1 − n`` (at least 1). None when d is 0. An estimate, not a promise:
    the difference moves as cases are added.
    """
    distance = abs(difference + margin)
    if distance == 0.0:
        return None
    width = difference - interval.lower if difference > -margin else interval.upper - difference
    needed = math.floor(cases * (width / distance) ** 2) + 1
    return max(needed - cases, 1)
