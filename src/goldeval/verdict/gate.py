"""The quality gate (reference section 5.5): rules over one run, optionally against a baseline.

Pure logic over JSON-plain run documents, no pytest imports. Rules are appended in the
reference's order and the gate passes iff every rule passed:

1. execution — ``qualityAttempts`` FAIL when the run has no PASS/FAIL attempt ("all
   infrastructure errors" or "empty dataset or all skipped"); ``complete`` FAIL when the run
   hit its deadline (``incomplete: true``; ``notStartedBeforeDeadline`` gives the count).
2. absolute — for each metric with a threshold: minimums for overallPassRate, contractPassRate,
   retrievalPassRate, negativeCasePassRate, refusalAccuracy, layerAccuracy, ragAccuracy and
   ``grader.<name>``, a maximum for hallucinationRate. Undefined overall/contract rates FAIL
   (``undefined (no quality attempts) — not 100%``); other undefined rates omit their rule.
3. delta — with a baseline and ``allowedRegression``: ``<metric>.delta`` for the same rates
   (both sides defined; hallucinationRate inverted), then ``grader.<name>`` for every general
   (hard) grader rate present on both sides, higher is better.
4. identity — ``added.<id>`` / ``removed.<id>`` for cases only in the run / only in the baseline.
5. severity — ``criticalNewFailure.<id>`` for a NEW_FAILURE whose case has a CRITICAL violation.

judgeAcceptRate is reported, never gated: a threshold naming it only adds a warning.

Where gates apply: :func:`evaluate_fixture` (no baseline → absolute only; baseline not
comparable → absolute only plus an informational passing ``baseline`` rule, the caller exits 65
on the invalid comparison) and :func:`evaluate_live` (a live baseline is required and must be
comparable; ``allowedRegression`` defaults to 0.0, so any drop fails and equality passes).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from pydantic import Field, field_validator

from goldeval.core.models import Record
from goldeval.core.rates import GATED_RATES, GRADER_PREFIX, LOWER_IS_BETTER
from goldeval.results.documents import RunDocument
from goldeval.verdict.comparison import (
    EPSILON,
    CaseClass,
    ComparisonResult,
    Decision,
    attempt_counts,
    compare,
    grader_names,
    metric_value,
    rate_of,
    run_mode,
)

#: Absolute rules, reference order (judgeAcceptRate sits here in the reference; never gated).
ABSOLUTE_METRICS: tuple[str, ...] = GATED_RATES
#: Delta rules, reference order.
DELTA_METRICS: tuple[str, ...] = ABSOLUTE_METRICS
#: Metrics whose threshold is a maximum (lower is better).
MAXIMUM_METRICS: frozenset[str] = LOWER_IS_BETTER & frozenset(GATED_RATES)
#: Undefined → FAIL instead of omitting the rule.
REQUIRED_METRICS: frozenset[str] = frozenset({"overallPassRate", "contractPassRate"})
NEVER_GATED: frozenset[str] = frozenset({"judgeAcceptRate"})

UNDEFINED_DETAIL = "undefined (no quality attempts) — not 100%"
LIVE_NEEDS_BASELINE = "live quality gate needs a live baseline file"
LIVE_NEEDS_LIVE_BASELINE = "live quality gate needs a live baseline, not a fixture snapshot"
#: A baseline that records no mode at all (no protocol, no configuration.mode): it may be a
#: fixture snapshot, so it does not stand for a live baseline (it was taken for one).
LIVE_NEEDS_KNOWN_MODE = (
    "live quality gate needs a live baseline: this one records no mode (no protocol, no "
    "configuration.mode), so it may be a fixture snapshot"
)


class RuleKind(str, Enum):
    ABSOLUTE = "absolute"
    DELTA = "delta"
    EXECUTION = "execution"
    IDENTITY = "identity"
    SEVERITY = "severity"


class GateRule(Record):
    name: str
    detail: str
    passed: bool
    actual: float | None = None
    threshold: float | None = None
    kind: RuleKind


class GateResult(Record):
    passed: bool
    verdict: str
    rules: list[GateRule] = Field(default_factory=list)
    #: Problems with the policy that produce no rule (e.g. a judgeAcceptRate threshold).
    warnings: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, rules: list[GateRule], warnings: list[str] | None = None) -> GateResult:
        passed = all(r.passed for r in rules)
        return cls(
            passed=passed,
            verdict="PASS" if passed else "FAIL",
            rules=rules,
            warnings=list(warnings or []),
        )

    def failing_rules(self) -> list[GateRule]:
        return [r for r in self.rules if not r.passed]

    def rule(self, name: str) -> GateRule | None:
        for r in self.rules:
            if r.name == name:
                return r
        return None

    def summary_line(self) -> str:
        """One line for the terminal, e.g. ``GATE FAIL: overallPassRate.delta (...), removed.x``.

        Identity and severity rules are named only; their name already says it all.
        """
        failing = self.failing_rules()
        if not failing:
            if not self.rules:
                return "GATE PASS: no rules"
            count = len(self.rules)
            return f"GATE PASS: {count} rule{'s' if count != 1 else ''} passed"
        parts = []
        for r in failing:
            if r.kind in (RuleKind.IDENTITY, RuleKind.SEVERITY):
                parts.append(r.name)
            else:
                parts.append(f"{r.name} ({r.detail})")
        return "GATE FAIL: " + ", ".join(parts)


class GatePolicy(Record):
    """What the gate checks. Accepts camelCase (``allowedRegression``) or snake_case keys."""

    #: Minimums per metric (reference rate names or ``grader.<name>``); hallucinationRate is a
    #: maximum.
    thresholds: dict[str, float] = Field(default_factory=dict)
    #: Allowed drop against the baseline; None → no delta rules (evaluate_live uses 0.0).
    allowed_regression: float | None = None
    quality_attempts: bool = True
    added: bool = True
    removed: bool = True
    critical_new_failure: bool = True

    @field_validator("thresholds")
    @classmethod
    def _thresholds_in_range(cls, value: dict[str, float]) -> dict[str, float]:
        for name, threshold in value.items():
            if not 0.0 <= threshold <= 1.0:
                raise ValueError(f"threshold {name}={threshold} is outside [0, 1]")
        return value

    @field_validator("allowed_regression")
    @classmethod
    def _allowed_in_range(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 <= value <= 1.0:
            raise ValueError(f"allowedRegression={value} is outside [0, 1]")
        return value


PolicyLike = GatePolicy | Mapping[str, Any] | None


def as_policy(policy: PolicyLike) -> GatePolicy:
    if policy is None:
        return GatePolicy()
    if isinstance(policy, GatePolicy):
        return policy
    return GatePolicy.model_validate(dict(policy))


# ------------------------------------------------------------------------------------------
# Rule families


def _execution_rules(run: RunDocument, policy: GatePolicy) -> list[GateRule]:
    rules: list[GateRule] = []
    counts = attempt_counts(run)
    if policy.quality_attempts and counts.quality == 0:
        why = (
            f"all infrastructure errors ({counts.error} attempts ERROR)"
            if counts.error > 0
            else "empty dataset or all skipped"
        )
        rules.append(
            GateRule(
                name="qualityAttempts",
                detail=f"no quality attempts: {why}",
                passed=False,
                actual=0.0,
                threshold=1.0,
                kind=RuleKind.EXECUTION,
            )
        )
    if run.incomplete:
        rules.append(incomplete_rule(run))
    if counts.skipped and counts.quality:
        # Not graded, so the gate cannot have passed them (an all-skipped run has its
        # qualityAttempts rule above).
        rules.append(
            GateRule(
                name="graded",
                detail=(
                    f"{counts.skipped} of {counts.total} selected attempts SKIPPED: not graded;"
                    " deselect rows with -m/-k instead of skipping them"
                ),
                passed=False,
                actual=float(counts.skipped),
                threshold=0.0,
                kind=RuleKind.EXECUTION,
            )
        )
    return rules


def incomplete_rule(run: RunDocument) -> GateRule:
    """FAIL rule ``complete``: the run did not grade every selected attempt (its deadline or
    budget left some unstarted, or it was cut short)."""
    over = run.not_started_over_budget
    # The deadline's count when the run recorded one (even null), else the older key.
    missing = (
        run.not_started_before_deadline
        if "not_started_before_deadline" in run.model_fields_set
        else run.attempts_not_started
    )
    if over is not None and over > 0:
        detail = (
            f"run incomplete: {over} attempts not started, the budget (--golden-max-cost / "
            "--golden-max-tokens) was spent"
        )
        actual: float | None = float(over + (missing if missing is not None else 0))
    elif missing is not None:
        detail = f"run incomplete: {missing} attempts not started before the deadline"
        actual = float(missing)
    else:
        # No deadline or budget count: the run was cut short some other way (-x, a signal);
        # naming a deadline that was never set would send the user looking for one.
        detail = "run incomplete: not every selected attempt was graded"
        actual = None
    return GateRule(
        name="complete",
        detail=detail,
        passed=False,
        actual=actual,
        threshold=0.0,
        kind=RuleKind.EXECUTION,
    )


def _policy_warnings(run: RunDocument, policy: GatePolicy) -> list[str]:
    warnings: list[str] = []
    present = set(grader_names(run))
    for name in policy.thresholds:
        if name in NEVER_GATED:
            warnings.append(f"{name} is reported, never gated: threshold ignored")
        elif name.startswith(GRADER_PREFIX):
            if name[len(GRADER_PREFIX) :] not in present:
                warnings.append(f"threshold {name}: no such grader rate in this run; no rule")
        elif name not in ABSOLUTE_METRICS:
            warnings.append(f"threshold {name}: unknown metric; ignored")
    return warnings


def _gated_graders(policy: GatePolicy) -> list[str]:
    return sorted(n for n in policy.thresholds if n.startswith(GRADER_PREFIX))


def _absolute_rules(run: RunDocument, policy: GatePolicy) -> list[GateRule]:
    rules: list[GateRule] = []
    for name in [*ABSOLUTE_METRICS, *_gated_graders(policy)]:
        if name not in policy.thresholds:
            continue
        threshold = policy.thresholds[name]
        if name.startswith(GRADER_PREFIX) and rate_of(run, name) is None:
            continue  # warned about in _policy_warnings
        value = metric_value(run, name)
        kind = RuleKind.ABSOLUTE
        if value is None:
            if name in REQUIRED_METRICS:
                rules.append(
                    GateRule(
                        name=name,
                        detail=UNDEFINED_DETAIL,
                        passed=False,
                        actual=None,
                        threshold=threshold,
                        kind=kind,
                    )
                )
            continue
        if name in MAXIMUM_METRICS:
            passed = value - EPSILON <= threshold
            detail = f"{value:.3f} {'<=' if passed else '>'} {threshold:.3f}"
        else:
            passed = value + EPSILON >= threshold
            detail = f"{value:.3f} {'>=' if passed else '<'} {threshold:.3f}"
        rules.append(
            GateRule(
                name=name,
                detail=detail,
                passed=passed,
                actual=value,
                threshold=threshold,
                kind=kind,
            )
        )
    return rules


def _delta_rules(run: RunDocument, baseline: RunDocument, allowed: float) -> list[GateRule]:
    rules: list[GateRule] = []
    in_run = set(grader_names(run))
    graders = sorted(GRADER_PREFIX + g for g in grader_names(baseline) if g in in_run)
    for name in [*DELTA_METRICS, *graders]:
        base, cand = metric_value(baseline, name), metric_value(run, name)
        if base is None or cand is None:
            continue
        if name in MAXIMUM_METRICS:
            passed = cand - EPSILON <= base + allowed
            detail = "PASS" if passed else "REGRESSION: increased more than allowed"
            threshold = allowed
        else:
            passed = cand + EPSILON >= base - allowed
            detail = (
                f"candidate {cand:.3f} >= baseline {base:.3f} - {allowed:.3f}"
                if passed
                else f"REGRESSION: {cand:.3f} < {base:.3f} - {allowed:.3f}"
            )
            threshold = -allowed
        rules.append(
            GateRule(
                name=f"{name}.delta",
                detail=detail,
                passed=passed,
                actual=cand - base,
                threshold=threshold,
                kind=RuleKind.DELTA,
            )
        )
    return rules


def _pair_rules(comparison: ComparisonResult, policy: GatePolicy) -> list[GateRule]:
    rules: list[GateRule] = []
    pairs = comparison.cases
    if policy.added:
        for p in pairs:
            if p.case_class is CaseClass.ADDED:
                rules.append(
                    GateRule(
                        name=f"added.{p.case_id}",
                        detail=f"case {p.case_id} is not in the baseline",
                        passed=False,
                        kind=RuleKind.IDENTITY,
                    )
                )
    if policy.removed:
        for p in pairs:
            if p.case_class is CaseClass.REMOVED:
                rules.append(
                    GateRule(
                        name=f"removed.{p.case_id}",
                        detail=f"case {p.case_id} is in the baseline but not in this run",
                        passed=False,
                        kind=RuleKind.IDENTITY,
                    )
                )
    if policy.critical_new_failure:
        for p in pairs:
            if p.case_class is CaseClass.NEW_FAILURE and p.critical:
                categories = ", ".join(p.critical_categories)
                rules.append(
                    GateRule(
                        name=f"criticalNewFailure.{p.case_id}",
                        detail=f"new failure with a CRITICAL violation: {categories}",
                        passed=False,
                        kind=RuleKind.SEVERITY,
                    )
                )
    return rules


def _baseline_rule(detail: str, *, passed: bool) -> GateRule:
    return GateRule(name="baseline", detail=detail, passed=passed, kind=RuleKind.EXECUTION)


def _run_rules(
    run: RunDocument,
    policy: GatePolicy,
    baseline: RunDocument | None,
    comparison: ComparisonResult | None,
    allowed: float | None,
) -> list[GateRule]:
    """Rule families 1–5 in order; baseline rules only with a comparable baseline."""
    rules = _execution_rules(run, policy) + _absolute_rules(run, policy)
    if baseline is None:
        return rules
    if allowed is not None:
        rules += _delta_rules(run, baseline, allowed)
    if comparison is not None:
        rules += _pair_rules(comparison, policy)
    return rules


# ------------------------------------------------------------------------------------------
# Entry points


def evaluate_fixture(
    run: RunDocument,
    policy: PolicyLike,
    baseline: RunDocument | None = None,
    comparison: ComparisonResult | None = None,
) -> GateResult:
    """Fixture (DETERMINISTIC) gate.

    No baseline → absolute rules only. Baseline not comparable → absolute rules plus a passing
    informational ``baseline`` rule (the invalid comparison itself makes the caller exit 65).
    Comparable → every family; delta rules only when ``allowedRegression`` is set.
    """
    gate_policy = as_policy(policy)
    warnings = _policy_warnings(run, gate_policy)
    if baseline is None:
        return GateResult.of(_run_rules(run, gate_policy, None, None, None), warnings)
    if comparison is None:
        comparison = compare(baseline, run)
    if not comparison.valid:
        rules = _run_rules(run, gate_policy, None, None, None)
        reasons = "; ".join(comparison.invalid_reasons)
        rules.append(
            _baseline_rule(
                f"ignored incompatible baseline ({reasons}); absolute thresholds only",
                passed=True,
            )
        )
        return GateResult.of(rules, warnings)
    rules = _run_rules(run, gate_policy, baseline, comparison, gate_policy.allowed_regression)
    return GateResult.of(rules, warnings)


def evaluate_live(
    run: RunDocument,
    policy: PolicyLike,
    baseline: RunDocument | None,
    comparison: ComparisonResult | None = None,
) -> GateResult:
    """Live gate: needs a comparable live baseline; ``allowedRegression`` defaults to 0.0.

    Missing baseline, a fixture snapshot as baseline or an incomparable baseline each add a
    FAIL rule ``baseline`` (after the execution and absolute rules) instead of passing silently.
    """
    gate_policy = as_policy(policy)
    warnings = _policy_warnings(run, gate_policy)
    problem: str | None = None
    if baseline is None:
        problem = LIVE_NEEDS_BASELINE
    elif run_mode(baseline) == "DETERMINISTIC":
        problem = LIVE_NEEDS_LIVE_BASELINE
    elif run_mode(baseline) is None:
        problem = LIVE_NEEDS_KNOWN_MODE
    else:
        if comparison is None:
            comparison = compare(baseline, run)
        if not comparison.valid:
            problem = "baseline not comparable: " + "; ".join(comparison.invalid_reasons)
    if problem is not None:
        rules = _run_rules(run, gate_policy, None, None, None)
        rules.append(_baseline_rule(problem, passed=False))
        return GateResult.of(rules, warnings)
    allowed = gate_policy.allowed_regression
    rules = _run_rules(run, gate_policy, baseline, comparison, 0.0 if allowed is None else allowed)
    return GateResult.of(rules, warnings)


def evaluate(
    run: RunDocument,
    policy: PolicyLike,
    baseline: RunDocument | None = None,
    comparison: ComparisonResult | None = None,
    *,
    live: bool = False,
) -> GateResult:
    """Evaluate the gate: :func:`evaluate_live` when ``live`` else :func:`evaluate_fixture`."""
    if live:
        return evaluate_live(run, policy, baseline, comparison)
    return evaluate_fixture(run, policy, baseline, comparison)


def attach_gate(comparison: ComparisonResult, gate: GateResult) -> ComparisonResult:
    """A copy of ``comparison`` carrying the gate: REGRESSION if it failed, else NO_REGRESSION.

    An invalid comparison stays COMPARISON_INVALID.
    """
    decision = comparison.decision
    if comparison.valid:
        decision = Decision.NO_REGRESSION if gate.passed else Decision.REGRESSION
    return comparison.model_copy(update={"quality_gate": gate.dump(), "decision": decision})
