"""Baseline comparison: per-case classes, metric deltas, McNemar and the comparison label.

Pure functions over JSON-plain run documents (``run.json`` and baselines are the same document,
reference section 5.1), no pytest imports. The quality gate (``goldeval.verdict.gate``) builds on
this.

The comparability check lives in :mod:`goldeval.verdict.protocol_check`, the reading of run
documents in :mod:`goldeval.verdict.run_reading` and the typed (and JSON) form in
:mod:`goldeval.verdict.comparison_result`; their public names are re-exported here so that
``from goldeval.verdict.comparison import X`` keeps working for every importer.

Per-case classes (section 5.3), over the union of case ids, baseline order first:
    ``ADDED`` (only in the candidate), ``REMOVED`` (only in the baseline); either side ERROR →
    ``UNCHANGED_ERROR`` / ``NEW_ERROR`` / ``INFRA_RESOLVED``; neither side PASS/FAIL →
    ``UNCHANGED_SKIPPED`` (both SKIPPED) else ``UNCHANGED_FAIL``; PASS/PASS ``UNCHANGED_PASS``,
    FAIL/FAIL ``UNCHANGED_FAIL``, PASS→FAIL and PASS→SKIPPED ``NEW_FAILURE``, FAIL→PASS and
    SKIPPED→PASS ``RECOVERED``; anything else ``UNCHANGED_FAIL``.

Metric deltas: the 9 reference rates, ``latencyAvgMs`` and every ``grader.<name>`` present on
both sides; ``hallucinationRate`` and latency are lower-is-better; |Δ| < 1e-12 is UNCHANGED; an
undefined side gives ``delta`` null and UNCHANGED. ``latencyAvgMs`` is undefined when the run has
no latency samples (the reference would compare its placeholder 0).

McNemar (section 5.4) is informational only: ``n01`` = NEW_FAILURE count, ``n10`` = RECOVERED
count, χ² without continuity correction and the exact two-sided binomial p-value computed with
integers and fractions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from goldeval.core.models import Rate
from goldeval.core.rates import GRADER_PREFIX, LATENCY_METRIC, LOWER_IS_BETTER, RATE_NAMES
from goldeval.core.stats import binomial_two_sided
from goldeval.results.documents import Case, Comparison, RunDocument
from goldeval.verdict.comparison_result import (
    NEW_FAILURES_NOT_GATED,
    CaseClass,
    CaseComparison,
    ComparisonResult,
    Decision,
    Direction,
    McNemar,
    MetricDelta,
    ProtocolDifference,
    shown_decision,
)
from goldeval.verdict.protocol_check import (
    DATASET_VERSIONING_DOC,
    IGNORED_CONFIGURATION_KEYS,
    LIVE_ONLY_KEYS,
    MAX_IDS_SHOWN,
    PROTOCOL_KEYS,
    configuration_differences,
    normal_mode,
    protocol_differences,
    run_mode,
)
from goldeval.verdict.run_reading import (
    AttemptCounts,
    as_rate,
    attempt_counts,
    cases_total,
    grader_names,
    metric_value,
    rate_of,
)

__all__ = [
    "DATASET_VERSIONING_DOC",
    "EPSILON",
    "IGNORED_CONFIGURATION_KEYS",
    "LIVE_ONLY_KEYS",
    "MAX_IDS_SHOWN",
    "NEW_FAILURES_NOT_GATED",
    "PROTOCOL_KEYS",
    "QUALITY_STATUSES",
    "REFERENCE_RATES",
    "AttemptCounts",
    "CaseClass",
    "CaseComparison",
    "ComparisonResult",
    "Decision",
    "Direction",
    "McNemar",
    "MetricDelta",
    "ProtocolDifference",
    "attempt_counts",
    "cases_total",
    "classify",
    "compare",
    "compare_cases",
    "comparison_label",
    "configuration_differences",
    "grader_names",
    "mcnemar",
    "metric_delta",
    "metric_deltas",
    "metric_value",
    "normal_mode",
    "protocol_differences",
    "rate_of",
    "run_mode",
]

#: Tolerance of every comparison of rates (reference: 1e-12).
EPSILON = 1e-12

#: The reference's nine rates, in the reference's order.
REFERENCE_RATES: tuple[str, ...] = RATE_NAMES

QUALITY_STATUSES = frozenset({"PASS", "FAIL"})


def _critical_categories(case: Case) -> list[str]:
    """Categories of CRITICAL violations in a case's taxonomy or any contract taxonomy."""
    taxonomies: list[Any] = [case.taxonomy]
    if case.contract is not None:
        taxonomies.append(case.contract.get("taxonomy"))
    for attempt in case.attempts:
        if attempt.contract is not None:
            taxonomies.append(attempt.contract.get("taxonomy"))
    found: list[str] = []
    for taxonomy in taxonomies:
        if not isinstance(taxonomy, list):
            continue
        for violation in taxonomy:
            if isinstance(violation, Mapping) and violation.get("severity") == "CRITICAL":
                category = str(violation.get("category") or "CRITICAL")
                if category not in found:
                    found.append(category)
    return found


def _success(case: Case) -> Rate:
    rate = as_rate(case.success_rate)
    if rate is not None:
        return rate
    statuses = [a.status for a in case.attempts]
    return Rate(
        hits=sum(1 for s in statuses if s == "PASS"),
        total=sum(1 for s in statuses if s in QUALITY_STATUSES),
    )


def classify(baseline_status: str | None, candidate_status: str | None) -> CaseClass:
    """Class of one case from its two statuses (None = the case is absent on that side)."""
    b, c = baseline_status, candidate_status
    if b is None:
        return CaseClass.ADDED
    if c is None:
        return CaseClass.REMOVED
    if b == "ERROR" or c == "ERROR":
        if b == c:
            return CaseClass.UNCHANGED_ERROR
        return CaseClass.NEW_ERROR if c == "ERROR" else CaseClass.INFRA_RESOLVED
    b_quality, c_quality = b in QUALITY_STATUSES, c in QUALITY_STATUSES
    if not b_quality and not c_quality:
        both_skipped = b == "SKIPPED" and c == "SKIPPED"
        return CaseClass.UNCHANGED_SKIPPED if both_skipped else CaseClass.UNCHANGED_FAIL
    if b_quality and c_quality:
        if b == c:
            return CaseClass.UNCHANGED_PASS if b == "PASS" else CaseClass.UNCHANGED_FAIL
        return CaseClass.NEW_FAILURE if b == "PASS" else CaseClass.RECOVERED
    if b == "PASS" and c == "SKIPPED":
        return CaseClass.NEW_FAILURE
    if c == "PASS":
        return CaseClass.RECOVERED
    return CaseClass.UNCHANGED_FAIL


def compare_cases(baseline: RunDocument, candidate: RunDocument) -> list[CaseComparison]:
    """Per-case pairs over the union of case ids, baseline order first (section 5.3)."""
    b_cases = {c.case_id: c for c in baseline.cases}
    c_cases = {c.case_id: c for c in candidate.cases}
    order = list(b_cases) + [cid for cid in c_cases if cid not in b_cases]
    pairs: list[CaseComparison] = []
    for cid in order:
        b, c = b_cases.get(cid), c_cases.get(cid)
        b_status = b.status if b is not None else None
        c_status = c.status if c is not None else None
        critical = _critical_categories(c) if c is not None else []
        pairs.append(
            CaseComparison.model_validate(
                {
                    "caseId": cid,
                    "class": classify(b_status, c_status),
                    "baselineStatus": b_status,
                    "candidateStatus": c_status,
                    "baselineSuccess": _success(b) if b is not None else None,
                    "candidateSuccess": _success(c) if c is not None else None,
                    "critical": bool(critical),
                    "criticalCategories": critical,
                }
            )
        )
    return pairs


def metric_delta(name: str, baseline: float | None, candidate: float | None) -> MetricDelta:
    inverted = name in LOWER_IS_BETTER
    if baseline is None or candidate is None:
        return MetricDelta(name=name, baseline=baseline, candidate=candidate, inverted=inverted)
    delta = candidate - baseline
    if abs(delta) < EPSILON:
        direction = Direction.UNCHANGED
    elif (delta > 0) != inverted:
        direction = Direction.IMPROVED
    else:
        direction = Direction.REGRESSED
    return MetricDelta(
        name=name,
        baseline=baseline,
        candidate=candidate,
        delta=delta,
        direction=direction,
        inverted=inverted,
    )


def metric_deltas(baseline: RunDocument, candidate: RunDocument) -> list[MetricDelta]:
    """Deltas of the 9 rates, ``latencyAvgMs`` and every grader rate present on both sides."""
    names: list[str] = [*REFERENCE_RATES, LATENCY_METRIC]
    candidate_graders = set(grader_names(candidate))
    names += sorted(GRADER_PREFIX + g for g in grader_names(baseline) if g in candidate_graders)
    return [metric_delta(n, metric_value(baseline, n), metric_value(candidate, n)) for n in names]


def mcnemar(n01: int, n10: int) -> McNemar:
    """McNemar on the discordant pairs; exact two-sided binomial p (section 5.4).

    ``p = min(1, 2·Σ_{i=0..min(n01, n−n01)} C(n,i)·0.5ⁿ)``, computed exactly with integers.
    """
    n = n01 + n10
    if n == 0:
        return McNemar(n01=0, n10=0, chi_square=0.0, p_value=None, note="no discordant pairs")
    chi_square = Fraction((n01 - n10) ** 2, n)
    p_value = binomial_two_sided(n, min(n01, n - n01))
    return McNemar(
        n01=n01,
        n10=n10,
        chi_square=float(chi_square),
        p_value=float(p_value),
        note="exact two-sided binomial test on discordant pairs; informational, never a gate",
    )


def _class_counts(pairs: Iterable[CaseComparison]) -> dict[str, int]:
    counts = {cls.value: 0 for cls in CaseClass}
    for pair in pairs:
        counts[pair.case_class.value] += 1
    return counts


def _run_id(doc: RunDocument | None) -> str | None:
    return doc.run_id if doc is not None else None


def baseline_problems(baseline: RunDocument) -> list[str]:
    """Why ``baseline`` is no quality snapshot to compare with (empty: it is one). A run whose
    every attempt was ERROR has no rates, so every delta rule had nothing to weigh, and a
    candidate failing every row passed against it; a run that did not complete is what
    ``--golden-save-baseline`` refuses to save."""
    counts = attempt_counts(baseline)
    problems = []
    if baseline.status not in (None, "COMPLETED"):
        problems.append(f"the baseline run is {baseline.status}: not a complete run")
    if counts.quality == 0:
        # ERROR attempts beside graded ones are the reference's INFRA_RESOLVED/NEW_ERROR
        # classes; a baseline of nothing but ERROR or SKIPPED attempts has no rates at all.
        problems.append(
            "the baseline graded nothing (no PASS or FAIL attempt): not a quality snapshot"
            " (compare with a run whose provider was healthy)"
        )
    return problems


def compare(baseline: RunDocument | None, candidate: RunDocument | None) -> ComparisonResult:
    """Compare a candidate run with a baseline.

    Not comparable → ``COMPARISON_INVALID`` with every reason and no deltas or classes (no
    invented percentages). Comparable → NO_REGRESSION with per-case classes, metric deltas and
    McNemar; a gate attached later (``goldeval.verdict.gate.attach_gate``) may turn it into
    REGRESSION.
    """
    if baseline is None or candidate is None:
        return ComparisonResult(
            decision=Decision.COMPARISON_INVALID,
            invalid_reasons=["baseline and candidate are required"],
            baseline_run_id=_run_id(baseline),
            candidate_run_id=_run_id(candidate),
        )
    diffs = protocol_differences(baseline, candidate)
    common: dict[str, Any] = {
        "protocol_differences": diffs,
        "configuration_differences": configuration_differences(
            baseline, candidate, exclude=[d.key for d in diffs]
        ),
        "baseline_run_id": _run_id(baseline),
        "candidate_run_id": _run_id(candidate),
    }
    unusable = baseline_problems(baseline)
    if diffs or unusable:
        return ComparisonResult(
            decision=Decision.COMPARISON_INVALID,
            invalid_reasons=[d.message for d in diffs] + unusable,
            **common,
        )
    pairs = compare_cases(baseline, candidate)
    counts = _class_counts(pairs)
    return ComparisonResult(
        decision=Decision.NO_REGRESSION,
        cases=pairs,
        counts=counts,
        unchanged_pass=counts[CaseClass.UNCHANGED_PASS.value],
        unchanged_fail=counts[CaseClass.UNCHANGED_FAIL.value],
        regressions=counts[CaseClass.NEW_FAILURE.value],
        improvements=counts[CaseClass.RECOVERED.value],
        metrics=metric_deltas(baseline, candidate),
        mcnemar=mcnemar(counts[CaseClass.NEW_FAILURE.value], counts[CaseClass.RECOVERED.value]),
        **common,
    )


def comparison_label(cmp: Comparison | None) -> tuple[str, str | None]:
    """What every surface shows for a comparison (as run.json holds it, typed): a label and,
    when the label needs one, a sentence saying why.

    Never ``NO_REGRESSION`` when the comparison found new failures: a gate of thresholds only
    (or no gate) does not weigh them, so the label says what the comparison found, that the
    gate does not weigh it, and how to make it (``allowedRegression``).
    """
    if cmp is None:
        return "no baseline", None
    return shown_decision(
        cmp.decision, cmp.counts.get(CaseClass.NEW_FAILURE.value, 0), cmp.quality_gate is not None
    )
