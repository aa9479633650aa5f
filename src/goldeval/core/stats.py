"""The statistics of the project in one place: Wilson intervals, the exact McNemar p-value,
Cohen's kappa. Pure functions over counts; every caller (metrics, comparison, judge
calibration) reads them from here, so one formula cannot drift from its twin.
"""

from __future__ import annotations

import math
from fractions import Fraction

#: z for a two-sided 95% interval.
Z95 = 1.959963984540054


def wilson(hits: float, total: float, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval (reported next to a rate, as the reference prints it). None
    when nothing was counted. Counts may be real numbers: the variant comparison's search
    scales a table of counts (goldeval.results.sampling.score_cases_to_decide)."""
    if total <= 0:
        return None
    p = hits / total
    denom = 1 + z * z / total
    centre = p + z * z / (2 * total)
    spread = z * math.sqrt((p * (1 - p) + z * z / (4 * total)) / total)
    return max(0.0, (centre - spread) / denom), min(1.0, (centre + spread) / denom)


#: Up to this many discordant pairs the p-value is computed exactly with integers.
EXACT_LIMIT = 2000


def binomial_two_sided(n: int, k: int) -> float:
    """``min(1, 2·Σ_{i≤k} C(n,i)/2ⁿ)``: exact (integer recurrence) up to EXACT_LIMIT pairs,
    then in log space, where the float result is the same to double precision and the cost
    stays linear (summing math.comb terms took seconds over a million attempts)."""
    if n <= EXACT_LIMIT:
        term = 1
        tail = 1
        for i in range(k):
            term = term * (n - i) // (i + 1)
            tail += term
        return float(min(Fraction(1), Fraction(2 * tail, 2**n)))
    log_half_n = n * math.log(0.5)
    log_c = 0.0
    best = log_c
    logs = [log_c]
    for i in range(k):
        log_c += math.log(n - i) - math.log(i + 1)
        logs.append(log_c)
        best = max(best, log_c)
    total = sum(math.exp(v - best) for v in logs)
    return min(1.0, 2.0 * math.exp(best + math.log(total) + log_half_n))


def cohen_kappa(
    both_yes: int, only_first_yes: int, only_second_yes: int, both_no: int
) -> float | None:
    """Cohen's kappa of two raters over a 2x2 table; None when undefined (no items, or chance
    agreement 1).

    ``only_first_yes``: the first rater said yes and the second no (for the judge calibration:
    the judge accepted what the human rejected).
    """
    n = both_yes + only_first_yes + only_second_yes + both_no
    if n == 0:
        return None
    observed = (both_yes + both_no) / n
    first_yes = both_yes + only_first_yes
    second_yes = both_yes + only_second_yes
    first_no = only_second_yes + both_no
    second_no = only_first_yes + both_no
    chance = (first_yes * second_yes + first_no * second_no) / (n * n)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1.0 - chance)


def cohen_kappa_interval(
    both_yes: int, only_first_yes: int, only_second_yes: int, both_no: int, z: float = Z95
) -> tuple[float, float] | None:
    """A two-sided interval of Cohen's kappa over a 2x2 table (95% by default), from Cohen's
    (1960) large-sample standard error ``sqrt(po·(1 − po) / (n·(1 − pe)²))``, clamped to
    [-1, 1]; where that error is 0 (every item agrees, or none does) the Wilson interval of
    the observed agreement carried through kappa's formula; None when kappa is undefined.
    An approximation: with a few dozen items it is wide, which is the point when its lower
    bound is what must clear a bar.
    """
    kappa = cohen_kappa(both_yes, only_first_yes, only_second_yes, both_no)
    if kappa is None:
        return None
    n = both_yes + only_first_yes + only_second_yes + both_no
    agreed = both_yes + both_no
    observed = agreed / n
    first_yes, second_yes = both_yes + only_first_yes, both_yes + only_second_yes
    chance = (first_yes * second_yes + (n - first_yes) * (n - second_yes)) / (n * n)
    spread = z * math.sqrt(observed * (1 - observed) / (n * (1 - chance) ** 2))
    lower, upper = kappa - spread, kappa + spread
    bounds = wilson(agreed, n, z)
    if spread == 0 and bounds is not None:
        # Cohen's error is 0 when every item agrees (or none does): the interval collapsed
        # to [1, 1] at n = 2, a certainty no corpus gives. The observed agreement's Wilson
        # interval is taken through kappa's formula instead (2 of 2: lower bound -0.32).
        lower = (bounds[0] - chance) / (1 - chance)
        upper = (bounds[1] - chance) / (1 - chance)
    return max(-1.0, lower), min(1.0, upper)
