"""Statistics of repeated attempts and of two variants on the same cases (issue 35).

Pure functions over per-case tallies (how many attempts of a case were graded, how many
passed): pass@k and pass^k with their per-dataset means, seeded bootstrap intervals over
cases, the exact McNemar test on per-case outcomes, the paired (case-clustered) bootstrap
interval of a difference in pass rate (the non-inferiority decision built on it is
:mod:`goldeval.results.non_inferiority`), and the minimum detectable difference of a paired
design. The formulas, and when not to trust them,
are in docs/methodology.md ("Repeated attempts and paired comparisons").

Only the standard library: ``random.Random(seed)`` draws the resamples, so a figure is the
same on every machine and every run with the same seed (no numpy, no scipy).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal, NamedTuple

from goldeval.core.stats import binomial_two_sided

#: Bootstrap resamples by default: the 2.5% and 97.5% percentiles move by well under 0.5
#: percentage points between seeds at 2000 (Efron and Tibshirani recommend 1000 or more
#: for percentile intervals).
DEFAULT_RESAMPLES = 2000
#: The seed of every figure written to run.json: a run's intervals are reproducible.
DEFAULT_SEED = 0
DEFAULT_CONFIDENCE = 0.95
#: Above this many cases an interval uses the normal approximation instead of the
#: bootstrap: resampling costs resamples × cases draws per k (about 0.3 s per k at 500
#: cases in pure Python, measured), and at this size the mean of independent bounded
#: per-case values is close to normal (the two intervals agree to about a percentage point
#: at 200 cases already, tests/unit/test_sampling.py).
BOOTSTRAP_MAX_CASES = 500

BOOTSTRAP = "bootstrap-percentile"
NORMAL = "normal"

#: How one case's attempts become one pass/fail outcome for McNemar: a strict majority of
#: the graded attempts passed (2 of 4 is a fail), or every graded attempt passed.
OutcomeRule = Literal["majority", "all"]
Verdict = Literal["PASS", "FAIL", "UNDERPOWERED"]


class Tally(NamedTuple):
    """One case of one variant: ``passed`` of ``graded`` quality attempts (PASS or FAIL)."""

    passed: int
    graded: int


@dataclass(frozen=True)
class Interval:
    """A two-sided interval and how it was computed (``bootstrap-percentile`` or ``normal``)."""

    lower: float
    upper: float
    method: str

    def dump(self) -> dict[str, Any]:
        return {"lower": self.lower, "upper": self.upper, "method": self.method}


# --- pass@k and pass^k -------------------------------------------------------------------


def _check_nck(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"passed attempts must be between 0 and {n}, got {c}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the graded attempts ({n}), got {k}")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of k attempts drawn without replacement from the n
    graded attempts passed, of which c passed: ``1 − C(n−c, k) / C(n, k)``, the unbiased
    estimator of pass@k of Chen et al. 2021 ("Evaluating Large Language Models Trained on
    Code"), as their stable product ``1 − Π_{i=n−c+1..n} (1 − k/i)`` (no huge binomials)."""
    _check_nck(n, c, k)
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: the chance that all k attempts drawn without replacement passed,
    ``C(c, k) / C(n, k) = Π_{i=0..k−1} (c−i) / (n−i)`` (the unbiased estimator of the
    tau-bench paper, Yao et al. 2024). 0 when fewer than k attempts passed."""
    _check_nck(n, c, k)
    if c < k:
        return 0.0
    product = 1.0
    for i in range(k):
        product *= (c - i) / (n - i)
    return product


def mean_over_cases(
    tallies: Iterable[Tally], k: int, estimator: Callable[[int, int, int], float]
) -> float | None:
    """The per-dataset figure: the mean of the per-case estimates over the cases with at
    least k graded attempts (each case weighs the same); None when no case has k."""
    values = [estimator(t.graded, t.passed, k) for t in tallies if t.graded >= k]
    return sum(values) / len(values) if values else None


# --- bootstrap ---------------------------------------------------------------------------


def _percentile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values, interpolated linearly between order statistics
    (Hyndman and Fan type 7, what numpy.percentile does by default)."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _resampled(
    cases: int,
    statistics: Sequence[Callable[[list[int]], float]],
    resamples: int,
    seed: int,
    confidence: float,
) -> list[tuple[float, float]]:
    """Percentile intervals of each statistic over the same ``resamples`` draws of ``cases``
    case indices with replacement, from ``random.Random(seed)`` (one draw serves them all)."""
    rng = random.Random(seed)
    population = range(cases)
    values: list[list[float]] = [[] for _ in statistics]
    for _ in range(resamples):
        idx = rng.choices(population, k=cases)
        for column, statistic in zip(values, statistics, strict=True):
            column.append(statistic(idx))
    tail = (1.0 - confidence) / 2.0
    out = []
    for column in values:
        column.sort()
        out.append((_percentile(column, tail), _percentile(column, 1.0 - tail)))
    return out


def z_value(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def mean_interval(
    values: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Interval | None:
    """Interval of the mean of per-case values (one value per case, so attempts of a case
    stay together): the seeded percentile bootstrap up to BOOTSTRAP_MAX_CASES cases, the
    normal approximation ``mean ± z·s/√m`` above; None without a case."""
    return mean_intervals([values], resamples=resamples, seed=seed, confidence=confidence)[0]


def mean_intervals(
    columns: Sequence[Sequence[float]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> list[Interval | None]:
    """:func:`mean_interval` of several columns over the same cases (the i-th value of each
    column is case i), from the same resamples: the same figures as one call per column
    with the same seed, at the cost of one."""
    m = len(columns[0]) if columns else 0
    if any(len(column) != m for column in columns):
        raise ValueError("every column must hold one value per case")
    if m == 0:
        return [None for _ in columns]
    if m > BOOTSTRAP_MAX_CASES:
        return [_normal_mean(column, confidence) for column in columns]
    means = [_mean_of(list(column)) for column in columns]
    bounds = _resampled(m, means, resamples, seed, confidence)
    return [Interval(lower, upper, BOOTSTRAP) for lower, upper in bounds]


def _mean_of(column: list[float]) -> Callable[[list[int]], float]:
    """The mean of the column over a resample's case indices."""
    get = column.__getitem__
    size = len(column)
    return lambda idx: sum(map(get, idx)) / size


def _normal_mean(values: Sequence[float], confidence: float) -> Interval:
    m = len(values)
    mean = sum(values) / m
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / (m - 1) / m)
    half = z_value(confidence) * spread
    return Interval(mean - half, mean + half, NORMAL)


def pass_at_k_table(
    tallies: Sequence[Tally],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict[str, Any]:
    """``metrics.passAtK`` of run.json: for k = 1..(most graded attempts of a case), pass@k
    and pass^k over the cases with at least k graded attempts, each with its interval.

    The tallies are sorted first, so the figures depend on the cases' tallies only, not on
    the order the cases arrived in (a run and its rebuild agree).
    """
    ordered = sorted(tallies)
    most = max((t.graded for t in ordered), default=0)
    rows = []
    for k in range(1, most + 1):
        eligible = [t for t in ordered if t.graded >= k]
        at = [pass_at_k(t.graded, t.passed, k) for t in eligible]
        hat = [pass_hat_k(t.graded, t.passed, k) for t in eligible]
        at_ci, hat_ci = mean_intervals([at, hat], resamples=resamples, seed=seed)
        rows.append(
            {
                "k": k,
                "cases": len(eligible),
                "passAtK": sum(at) / len(at),
                "passAtKCi95": dumped_interval(at_ci),
                "passHatK": sum(hat) / len(hat),
                "passHatKCi95": dumped_interval(hat_ci),
            }
        )
    return {
        "cases": len(ordered),
        "resamples": resamples,
        "seed": seed,
        "confidence": DEFAULT_CONFIDENCE,
        "byK": rows,
    }


def dumped_interval(interval: Interval | None) -> dict[str, Any] | None:
    return None if interval is None else interval.dump()


# --- paired comparison -------------------------------------------------------------------


def case_outcome(tally: Tally, rule: OutcomeRule) -> bool:
    """One case's pass/fail under ``rule``: ``majority`` (more than half of the graded
    attempts passed; a tie fails) or ``all`` (every graded attempt passed). A case with no
    graded attempt has no outcome: callers pair only cases both sides graded."""
    if tally.graded <= 0:
        raise ValueError("a case with no graded attempt has no outcome")
    if rule == "majority":
        return 2 * tally.passed > tally.graded
    return tally.passed == tally.graded


@dataclass(frozen=True)
class McNemar:
    """The exact McNemar test over paired per-case outcomes: ``control_only`` cases passed
    for the control and failed for the candidate, ``candidate_only`` the reverse. ``p_value``
    is None when no case is discordant (nothing to test)."""

    rule: OutcomeRule
    cases: int
    control_only: int
    candidate_only: int
    p_value: float | None


def paired(control: Sequence[Tally], candidate: Sequence[Tally]) -> list[tuple[Tally, Tally]]:
    """The cases both sides graded (the i-th tally of each side is the same case)."""
    if len(control) != len(candidate):
        raise ValueError("control and candidate must list the same cases in the same order")
    return [(a, b) for a, b in zip(control, candidate, strict=True) if a.graded and b.graded]


def mcnemar_exact(pairs: Sequence[tuple[Tally, Tally]], rule: OutcomeRule) -> McNemar:
    """Two-sided exact binomial test of the discordant pairs: under "no difference" each
    discordant case is equally likely to go either way, so
    ``p = min(1, 2·Σ_{i≤min(b,c)} C(b+c, i) / 2^(b+c))``."""
    control_only = candidate_only = 0
    for a, b in pairs:
        first, second = case_outcome(a, rule), case_outcome(b, rule)
        control_only += first and not second
        candidate_only += second and not first
    discordant = control_only + candidate_only
    p = binomial_two_sided(discordant, min(control_only, candidate_only)) if discordant else None
    return McNemar(rule, len(pairs), control_only, candidate_only, p)


def rate_difference(pairs: Sequence[tuple[Tally, Tally]]) -> float | None:
    """Candidate minus control attempt-weighted pass rate (passed / graded attempts summed
    over the paired cases); None when nothing is paired."""
    if not pairs:
        return None
    return _difference(pairs, range(len(pairs)))


def _difference(pairs: Sequence[tuple[Tally, Tally]], idx: Iterable[int]) -> float:
    pa = ga = pb = gb = 0
    for i in idx:
        a, b = pairs[i]
        pa += a.passed
        ga += a.graded
        pb += b.passed
        gb += b.graded
    return pb / gb - pa / ga


def difference_interval(
    pairs: Sequence[tuple[Tally, Tally]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Interval | None:
    """Interval of :func:`rate_difference`, clustered by case: a resample draws whole
    cases with both sides' attempts (attempts of one case are correlated; resampling them
    one by one gives intervals that are too narrow). Bootstrap up to BOOTSTRAP_MAX_CASES
    paired cases; above, the normal approximation with the linearised (delta-method)
    cluster variance of the two ratios. None when nothing is paired."""
    m = len(pairs)
    if m == 0:
        return None
    if m > BOOTSTRAP_MAX_CASES:
        return _difference_normal(pairs, confidence)
    ((lower, upper),) = _resampled(
        m, [lambda idx: _difference(pairs, idx)], resamples, seed, confidence
    )
    return Interval(lower, upper, BOOTSTRAP)


def _difference_normal(pairs: Sequence[tuple[Tally, Tally]], confidence: float) -> Interval:
    m = len(pairs)
    mean_ga = sum(a.graded for a, _ in pairs) / m
    mean_gb = sum(b.graded for _, b in pairs) / m
    rate_a = sum(a.passed for a, _ in pairs) / (mean_ga * m)
    rate_b = sum(b.passed for _, b in pairs) / (mean_gb * m)
    residuals = [
        (b.passed - rate_b * b.graded) / mean_gb - (a.passed - rate_a * a.graded) / mean_ga
        for a, b in pairs
    ]
    spread = math.sqrt(sum(r * r for r in residuals) / (m - 1) / m)
    half = z_value(confidence) * spread
    centre = rate_b - rate_a
    return Interval(centre - half, centre + half, NORMAL)


def minimum_detectable_difference(
    cases: int, discordance: float, *, alpha: float = 0.05, power: float = 0.8
) -> float | None:
    """The smallest difference in per-case pass rate a paired design of ``cases`` cases
    detects with the two-sided McNemar test at ``alpha`` with probability ``power``.

    Connor (1987, Biometrics 43:207) sample size for McNemar, with ψ the discordance rate
    (the share of cases whose outcome differs between the two variants) and δ the difference:
    ``n = (z_{1−α/2}·√ψ + z_{power}·√(ψ − δ²))² / δ²``, solved for δ by bisection (the right
    side falls as δ grows). δ can be at most ψ (every discordant case going one way); None
    when even that needs more cases, or when ψ is 0 (two variants that never disagree show
    no difference at any n).
    """
    if cases <= 0 or not 0.0 < discordance <= 1.0:
        return None
    za = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    zb = NormalDist().inv_cdf(power)

    def needed(delta: float) -> float:
        spread = za * math.sqrt(discordance) + zb * math.sqrt(max(discordance - delta**2, 0.0))
        return spread**2 / delta**2

    return _smallest_delta(needed, cases, discordance)


def detectable_floor(cases: int, *, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """The smallest difference ``cases`` paired cases can detect whatever the discordance: the
    figure to know before a comparison has run (no discordance measured yet).

    For a given δ the sample size of :func:`minimum_detectable_difference` grows with ψ, and
    ψ ≥ δ, so the fewest cases any ψ needs is at ψ = δ (every discordant case going one way):
    ``n = (z_{1−α/2} + z_{power}·√(1 − δ))² / δ``. Solved for δ by bisection; no real pair of
    variants does better, and most need more (ψ above δ). None when even δ = 1 needs more
    cases than there are.
    """
    if cases <= 0:
        return None
    za = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    zb = NormalDist().inv_cdf(power)

    def needed(delta: float) -> float:
        return (za + zb * math.sqrt(1.0 - delta)) ** 2 / delta

    return _smallest_delta(needed, cases, 1.0)


def _smallest_delta(needed: Callable[[float], float], cases: int, largest: float) -> float | None:
    """The smallest δ in (0, ``largest``] whose ``needed(δ)`` cases are at most ``cases``, by
    bisection (``needed`` falls as δ grows); None when even ``largest`` needs more."""
    if needed(largest) > cases:
        return None
    low, high = 0.0, largest
    for _ in range(100):
        middle = (low + high) / 2.0
        if middle == 0.0 or needed(middle) > cases:
            low = middle
        else:
            high = middle
    return high


def noise_discordance(tallies: Iterable[Tally]) -> float | None:
    """A floor of the discordance rate from one variant's run: the share of cases on which
    two independent single attempts of the same variant disagree, ``mean(2·p·(1 − p))``
    with p a case's pass rate. Two different variants disagree at least this often when
    their attempts vary as much; use a measured rate when there is one. None without a
    graded case."""
    rates = [t.passed / t.graded for t in tallies if t.graded > 0]
    if not rates:
        return None
    return sum(2.0 * p * (1.0 - p) for p in rates) / len(rates)
