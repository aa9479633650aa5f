"""The quality gate: rule families, their order and details, live and fixture flavours."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import ValidationError

from goldeval.verdict.comparison import Decision
from goldeval.verdict.gate import (
    LIVE_NEEDS_KNOWN_MODE,
    GatePolicy,
    GateResult,
    GateRule,
    RuleKind,
    attach_gate,
)
from tests.builders import reference_metrics, run_document
from tests.verdict_json import compare, evaluate, evaluate_fixture, evaluate_live, incomplete_rule

# ------------------------------------------------------------------------------------------
# Builder: tests.builders.run_document plus contracts, durations and grader rates


def make_run(
    cases: Mapping[str, str | list[str]],
    *,
    rates: dict[str, tuple[int, int]] | None = None,
    graders: dict[str, tuple[int, int]] | None = None,
    protocol: dict[str, Any] | None = None,
    with_protocol: bool = True,
    critical: tuple[str, ...] = (),
    **extra: Any,
) -> dict[str, Any]:
    doc = run_document(cases, protocol=(protocol or {}) if with_protocol else None)
    doc["runId"] = "r"
    for case in doc["cases"]:
        case["taxonomy"] = []
        for attempt in case["attempts"]:
            status = attempt["status"]
            attempt["durationMs"] = 5
            if status in ("PASS", "FAIL"):
                taxonomy = (
                    [{"severity": "CRITICAL", "category": "SAFETY"}]
                    if case["caseId"] in critical and status == "FAIL"
                    else []
                )
                attempt["contract"] = {"passed": status == "PASS", "taxonomy": taxonomy}
    metrics = reference_metrics(doc)
    for name, (hits, total) in (rates or {}).items():
        metrics[name] = {"hits": hits, "total": total}
    if graders is not None:
        metrics["graders"] = {k: {"hits": h, "total": t} for k, (h, t) in graders.items()}
    doc["metrics"] = metrics
    if not with_protocol:  # reference-style: comparability from datasetVersion/datasetHash
        doc.update(datasetVersion="demo-v1", datasetHash="h")
    doc.update(extra)
    return doc


LIVE = {"mode": "LIVE", "provider": "ollama", "model": "m", "judgeEnabled": False}


def passing(n: int, total: int) -> dict[str, str]:
    """``total`` single-attempt cases of which the first ``n`` pass."""
    return {f"c{i:02d}": "PASS" if i < n else "FAIL" for i in range(total)}


def rules_of(gate: GateResult) -> list[tuple[str, str, bool]]:
    return [(r.name, r.detail, r.passed) for r in gate.rules]


STRICT = {
    "overallPassRate": 1.0,
    "contractPassRate": 1.0,
    "retrievalPassRate": 1.0,
    "negativeCasePassRate": 1.0,
    "refusalAccuracy": 1.0,
    "layerAccuracy": 1.0,
    "ragAccuracy": 1.0,
    "hallucinationRate": 0.0,
}

ALL_DEFINED = {
    "retrievalPassRate": (5, 5),
    "negativeCasePassRate": (5, 5),
    "hallucinationRate": (0, 2),
    "refusalAccuracy": (3, 3),
    "layerAccuracy": (5, 5),
    "ragAccuracy": (5, 5),
}


# ------------------------------------------------------------------------------------------
# Absolute rules


def test_reference_order_and_details_of_a_full_gate() -> None:
    run = make_run(passing(8, 8), rates=ALL_DEFINED)
    gate = evaluate(run, {"thresholds": STRICT, "allowedRegression": 0.02}, run)
    assert gate.passed and gate.verdict == "PASS"
    assert [(r.name, r.detail, r.actual, r.threshold, r.kind.value) for r in gate.rules] == [
        ("overallPassRate", "1.000 >= 1.000", 1.0, 1.0, "absolute"),
        ("contractPassRate", "1.000 >= 1.000", 1.0, 1.0, "absolute"),
        ("retrievalPassRate", "1.000 >= 1.000", 1.0, 1.0, "absolute"),
        ("negativeCasePassRate", "1.000 >= 1.000", 1.0, 1.0, "absolute"),
        ("refusalAccuracy", "1.000 >= 1.000", 1.0, 1.0, "absolute"),
        ("layerAccuracy", "1.000 >= 1.000", 1.0, 1.0, "absolute"),
        ("ragAccuracy", "1.000 >= 1.000", 1.0, 1.0, "absolute"),
        ("hallucinationRate", "0.000 <= 0.000", 0.0, 0.0, "absolute"),
        ("overallPassRate.delta", "candidate 1.000 >= baseline 1.000 - 0.020", 0.0, -0.02, "delta"),
        (
            "contractPassRate.delta",
            "candidate 1.000 >= baseline 1.000 - 0.020",
            0.0,
            -0.02,
            "delta",
        ),
        (
            "retrievalPassRate.delta",
            "candidate 1.000 >= baseline 1.000 - 0.020",
            0.0,
            -0.02,
            "delta",
        ),
        (
            "negativeCasePassRate.delta",
            "candidate 1.000 >= baseline 1.000 - 0.020",
            0.0,
            -0.02,
            "delta",
        ),
        ("refusalAccuracy.delta", "candidate 1.000 >= baseline 1.000 - 0.020", 0.0, -0.02, "delta"),
        ("layerAccuracy.delta", "candidate 1.000 >= baseline 1.000 - 0.020", 0.0, -0.02, "delta"),
        ("ragAccuracy.delta", "candidate 1.000 >= baseline 1.000 - 0.020", 0.0, -0.02, "delta"),
        ("hallucinationRate.delta", "PASS", 0.0, 0.02, "delta"),
    ]


def test_absolute_failure_details() -> None:
    run = make_run(passing(18, 20), rates={"hallucinationRate": (5, 20), "ragAccuracy": (1, 2)})
    gate = evaluate(
        run, {"thresholds": {"overallPassRate": 0.95, "ragAccuracy": 0.5, "hallucinationRate": 0.2}}
    )
    assert rules_of(gate) == [
        ("overallPassRate", "0.900 < 0.950", False),
        ("ragAccuracy", "0.500 >= 0.500", True),
        ("hallucinationRate", "0.250 > 0.200", False),
    ]
    assert not gate.passed and gate.verdict == "FAIL"
    assert [r.name for r in gate.failing_rules()] == ["overallPassRate", "hallucinationRate"]


def test_only_configured_thresholds_produce_rules() -> None:
    run = make_run(passing(3, 4), rates=ALL_DEFINED)
    gate = evaluate(run, {"thresholds": {"layerAccuracy": 0.9}})
    assert rules_of(gate) == [("layerAccuracy", "1.000 >= 0.900", True)]


def test_tolerance_of_absolute_rules() -> None:
    run = make_run(passing(1, 3))  # 1/3 = 0.333...
    gate = evaluate(run, {"thresholds": {"overallPassRate": 1 / 3 + 1e-13}})
    assert gate.passed
    gate = evaluate(run, {"thresholds": {"overallPassRate": 1 / 3 + 1e-9}})
    assert not gate.passed


def test_undefined_overall_and_contract_fail_others_are_omitted() -> None:
    run = make_run({"a": "SKIPPED", "b": "SKIPPED"})
    gate = evaluate(run, {"thresholds": STRICT})
    assert [(r.name, r.detail, r.passed, r.actual, r.kind) for r in gate.rules] == [
        (
            "qualityAttempts",
            "no quality attempts: empty dataset or all skipped",
            False,
            0.0,
            RuleKind.EXECUTION,
        ),
        (
            "overallPassRate",
            "undefined (no quality attempts) — not 100%",
            False,
            None,
            RuleKind.ABSOLUTE,
        ),
        (
            "contractPassRate",
            "undefined (no quality attempts) — not 100%",
            False,
            None,
            RuleKind.ABSOLUTE,
        ),
    ]


def test_all_errors_detail_mentions_infrastructure() -> None:
    run = make_run({"a": "ERROR", "b": "ERROR"})
    gate = evaluate(run, {})
    assert rules_of(gate) == [
        (
            "qualityAttempts",
            "no quality attempts: all infrastructure errors (2 attempts ERROR)",
            False,
        )
    ]


def test_quality_attempts_family_can_be_switched_off() -> None:
    run = make_run({"a": "SKIPPED"})
    assert evaluate(run, {"qualityAttempts": False}).rules == []


def test_judge_accept_rate_is_never_gated() -> None:
    run = make_run(passing(2, 2), rates={"judgeAcceptRate": (0, 2)})
    base = make_run(passing(2, 2), rates={"judgeAcceptRate": (2, 2)})
    gate = evaluate(run, {"thresholds": {"judgeAcceptRate": 1.0}, "allowedRegression": 0.0}, base)
    assert gate.passed
    assert all("judgeAcceptRate" not in r.name for r in gate.rules)
    assert gate.warnings == ["judgeAcceptRate is reported, never gated: threshold ignored"]


def test_unknown_threshold_name_is_a_warning() -> None:
    gate = evaluate(make_run(passing(1, 1)), {"thresholds": {"overalPassRate": 1.0}})
    assert gate.rules == []
    assert gate.warnings == ["threshold overalPassRate: unknown metric; ignored"]


# ------------------------------------------------------------------------------------------
# Delta rules


def test_drop_from_19_to_18_of_20_fails_with_zero_allowed_regression() -> None:
    baseline, run = make_run(passing(19, 20)), make_run(passing(18, 20))
    gate = evaluate(run, {"allowedRegression": 0.0}, baseline)
    overall = gate.rule("overallPassRate.delta")
    assert overall is not None and not overall.passed
    assert overall.detail == "REGRESSION: 0.900 < 0.950 - 0.000"
    assert overall.actual == pytest.approx(-0.05)
    assert overall.threshold == -0.0
    assert overall.kind is RuleKind.DELTA
    assert not gate.passed


def test_equal_rates_pass_with_zero_allowed_regression() -> None:
    baseline, run = make_run(passing(18, 20)), make_run(passing(18, 20))
    gate = evaluate(run, {"allowedRegression": 0.0}, baseline)
    assert gate.passed
    assert rules_of(gate)[:2] == [
        ("overallPassRate.delta", "candidate 0.900 >= baseline 0.900 - 0.000", True),
        ("contractPassRate.delta", "candidate 0.900 >= baseline 0.900 - 0.000", True),
    ]


def test_absolute_020_with_delta_002_on_20_to_5_fails_only_the_delta() -> None:
    baseline, run = make_run(passing(20, 20)), make_run(passing(5, 20))
    policy = {"thresholds": {"overallPassRate": 0.20}, "allowedRegression": 0.02}
    gate = evaluate(run, policy, baseline)
    assert rules_of(gate) == [
        ("overallPassRate", "0.250 >= 0.200", True),
        ("overallPassRate.delta", "REGRESSION: 0.250 < 1.000 - 0.020", False),
        ("contractPassRate.delta", "REGRESSION: 0.250 < 1.000 - 0.020", False),
    ]
    assert [r.kind for r in gate.failing_rules()] == [RuleKind.DELTA, RuleKind.DELTA]


def test_hallucination_absolute_max_and_inverted_delta() -> None:
    baseline = make_run(passing(20, 20), rates={"hallucinationRate": (0, 20)})
    run = make_run(passing(20, 20), rates={"hallucinationRate": (5, 20)})
    policy = {"thresholds": {"hallucinationRate": 0.20}, "allowedRegression": 0.02}
    gate = evaluate(run, policy, baseline)
    assert ("hallucinationRate", "0.250 > 0.200", False) in rules_of(gate)
    delta = gate.rule("hallucinationRate.delta")
    assert delta is not None
    assert (delta.detail, delta.passed) == ("REGRESSION: increased more than allowed", False)
    assert delta.threshold == 0.02 and delta.actual == 0.25
    improved = evaluate(baseline, policy, run).rule("hallucinationRate.delta")
    assert improved is not None and (improved.detail, improved.passed) == ("PASS", True)


def test_delta_within_allowance_and_tolerance() -> None:
    baseline, run = make_run(passing(50, 50)), make_run(passing(49, 50))
    assert evaluate(run, {"allowedRegression": 0.02}, baseline).passed
    assert not evaluate(run, {"allowedRegression": 0.019}, baseline).passed
    baseline = make_run(passing(3, 10))
    run = make_run(passing(3, 10), rates={"overallPassRate": (1, 10)})
    run["metrics"]["overallPassRate"] = {"hits": 3, "total": 10}
    assert evaluate(run, {"allowedRegression": 0.0}, baseline).passed


def test_no_allowed_regression_means_no_delta_rules() -> None:
    baseline, run = make_run(passing(20, 20)), make_run(passing(5, 20))
    gate = evaluate(run, {"thresholds": {"overallPassRate": 0.2}}, baseline)
    assert [r.name for r in gate.rules] == ["overallPassRate"]


def test_delta_rules_skip_undefined_sides() -> None:
    baseline = make_run(passing(2, 2), rates={"ragAccuracy": (1, 1)})
    run = make_run(passing(2, 2))
    names = [r.name for r in evaluate(run, {"allowedRegression": 0.0}, baseline).rules]
    assert names == ["overallPassRate.delta", "contractPassRate.delta"]


# ------------------------------------------------------------------------------------------
# Grader rates


def test_grader_thresholds_and_deltas() -> None:
    baseline = make_run(passing(2, 2), graders={"json": (4, 4), "regex": (2, 2)})
    run = make_run(passing(2, 2), graders={"json": (3, 4), "regex": (2, 2), "fresh": (0, 0)})
    policy = {
        "thresholds": {"grader.regex": 1.0, "grader.json": 0.9, "grader.missing": 0.5},
        "allowedRegression": 0.0,
    }
    gate = evaluate(run, policy, baseline)
    assert rules_of(gate) == [
        ("grader.json", "0.750 < 0.900", False),
        ("grader.regex", "1.000 >= 1.000", True),
        ("overallPassRate.delta", "candidate 1.000 >= baseline 1.000 - 0.000", True),
        ("contractPassRate.delta", "candidate 1.000 >= baseline 1.000 - 0.000", True),
        ("grader.json.delta", "REGRESSION: 0.750 < 1.000 - 0.000", False),
        ("grader.regex.delta", "candidate 1.000 >= baseline 1.000 - 0.000", True),
    ]
    assert gate.warnings == ["threshold grader.missing: no such grader rate in this run; no rule"]


def test_undefined_grader_rate_omits_its_rule() -> None:
    run = make_run(passing(1, 1), graders={"json": (0, 0)})
    assert evaluate(run, {"thresholds": {"grader.json": 1.0}}).rules == []


# ------------------------------------------------------------------------------------------
# Identity and severity rules


def test_added_removed_and_critical_new_failure() -> None:
    baseline = make_run({"a": "PASS", "b": "PASS", "gone": "PASS"}, with_protocol=False)
    run = make_run({"a": "FAIL", "b": "FAIL", "new": "PASS"}, with_protocol=False, critical=("a",))
    gate = evaluate(run, {}, baseline)
    assert [(r.name, r.kind.value, r.passed) for r in gate.rules] == [
        ("added.new", "identity", False),
        ("removed.gone", "identity", False),
        ("criticalNewFailure.a", "severity", False),
    ]
    assert gate.rules[2].detail == "new failure with a CRITICAL violation: SAFETY"


@pytest.mark.parametrize(
    ("switch", "left"),
    [
        ("added", ["removed.gone", "criticalNewFailure.a"]),
        ("removed", ["added.new", "criticalNewFailure.a"]),
        ("criticalNewFailure", ["added.new", "removed.gone"]),
    ],
)
def test_rule_families_can_be_switched_off(switch: str, left: list[str]) -> None:
    baseline = make_run({"a": "PASS", "gone": "PASS"}, with_protocol=False)
    run = make_run({"a": "FAIL", "new": "PASS"}, with_protocol=False, critical=("a",))
    gate = evaluate(run, {switch: False}, baseline)
    assert [r.name for r in gate.rules] == left


def test_critical_violation_without_new_failure_is_no_rule() -> None:
    baseline = make_run({"a": "FAIL"})
    run = make_run({"a": "FAIL"}, critical=("a",))
    assert evaluate(run, {}, baseline).rules == []


def test_precomputed_comparison_is_used() -> None:
    baseline = make_run({"a": "PASS", "gone": "PASS"}, with_protocol=False)
    run = make_run({"a": "PASS"}, with_protocol=False)
    comparison = compare(baseline, run)
    gate = evaluate_fixture(run, {}, baseline, comparison)
    assert [r.name for r in gate.rules] == ["removed.gone"]


# ------------------------------------------------------------------------------------------
# Fixture and live flavours


def test_fixture_without_baseline_is_absolute_only() -> None:
    run = make_run(passing(1, 2))
    gate = evaluate_fixture(run, {"thresholds": {"overallPassRate": 0.5}, "allowedRegression": 0})
    assert rules_of(gate) == [("overallPassRate", "0.500 >= 0.500", True)]


def test_fixture_with_incomparable_baseline_adds_an_informational_rule() -> None:
    baseline = make_run(passing(2, 2), protocol={"datasetHash": "old"})
    run = make_run(passing(1, 2))
    gate = evaluate_fixture(
        run, {"thresholds": {"overallPassRate": 0.5}, "allowedRegression": 0.0}, baseline
    )
    assert [r.name for r in gate.rules] == ["overallPassRate", "baseline"]
    rule = gate.rules[1]
    assert rule.passed and rule.kind is RuleKind.EXECUTION
    assert rule.detail.startswith("ignored incompatible baseline (dataset changed without")
    assert rule.detail.endswith("; absolute thresholds only")
    assert gate.passed


def test_live_needs_a_baseline() -> None:
    gate = evaluate_live(make_run(passing(2, 2), protocol=LIVE), {}, None)
    assert rules_of(gate) == [("baseline", "live quality gate needs a live baseline file", False)]
    assert evaluate(make_run(passing(2, 2), protocol=LIVE), {}, None, live=True) == gate


def test_live_rejects_a_fixture_snapshot() -> None:
    baseline = make_run(passing(2, 2))
    gate = evaluate_live(make_run(passing(2, 2), protocol=LIVE), {}, baseline)
    assert rules_of(gate) == [
        ("baseline", "live quality gate needs a live baseline, not a fixture snapshot", False)
    ]


def test_live_rejects_a_baseline_that_records_no_mode() -> None:
    """No protocol, no configuration: it may be a fixture snapshot, and it was taken for a
    live baseline (of any attempts). A reference-format baseline that names its mode LIVE
    in its configuration still stands (the reference's comparison rules)."""
    unknown = make_run(passing(2, 2), with_protocol=False)
    unknown.pop("configuration", None)
    run = make_run(passing(2, 2), protocol={**LIVE, "attempts": 3})
    gate = evaluate_live(run, {}, unknown)
    assert rules_of(gate) == [("baseline", LIVE_NEEDS_KNOWN_MODE, False)]
    reference = make_run(passing(2, 2), with_protocol=False)
    reference["configuration"] = {"mode": "LIVE", "model": "m", "judgeEnabled": False}
    assert evaluate_live(make_run(passing(2, 2), protocol=LIVE), {}, reference).passed


def test_live_rejects_an_incomparable_baseline_with_the_reasons() -> None:
    baseline = make_run(passing(2, 2), protocol=LIVE)
    run = make_run(passing(2, 2), protocol={**LIVE, "model": "other", "attempts": 3})
    gate = evaluate_live(run, {}, baseline)
    (rule,) = gate.rules
    assert rule.name == "baseline" and not rule.passed
    assert rule.detail == (
        "baseline not comparable: attempts mismatch: baseline 1 vs candidate 3; "
        "model mismatch: baseline m vs candidate other"
    )


def test_live_defaults_to_zero_allowed_regression() -> None:
    baseline = make_run(passing(19, 20), protocol=LIVE)
    worse = make_run(passing(18, 20), protocol=LIVE)
    same = make_run(passing(19, 20), protocol=LIVE)
    gate = evaluate_live(worse, {}, baseline)
    assert gate.summary_line() == (
        "GATE FAIL: overallPassRate.delta (REGRESSION: 0.900 < 0.950 - 0.000), "
        "contractPassRate.delta (REGRESSION: 0.900 < 0.950 - 0.000)"
    )
    assert evaluate_live(same, {}, baseline).passed
    assert evaluate_live(worse, {"allowedRegression": 0.05}, baseline).passed


# ------------------------------------------------------------------------------------------
# Incomplete runs


def test_incomplete_run_fails_rule_complete() -> None:
    run = make_run(passing(2, 2), incomplete=True, notStartedBeforeDeadline=3)
    gate = evaluate(run, {})
    assert [(r.name, r.kind, r.detail, r.passed) for r in gate.rules] == [
        (
            "complete",
            RuleKind.EXECUTION,
            "run incomplete: 3 attempts not started before the deadline",
            False,
        )
    ]
    # No deadline count: no deadline is named (a run stopped by -x or a signal had none).
    assert incomplete_rule({"incomplete": True}).detail == (
        "run incomplete: not every selected attempt was graded"
    )
    assert evaluate(make_run(passing(1, 1), incomplete=False), {}).rules == []


def test_skipped_attempts_fail_rule_graded() -> None:
    """A run with a SKIPPED attempt exited 1, but its gate said PASS (``passed: true``): the
    JUnit suite, the site and the HTML summary showed PASS for a run that did not grade
    every selected attempt."""
    run = make_run({"a": "PASS", "b": "SKIPPED", "c": "PASS"})
    gate = evaluate(run, {})
    assert not gate.passed and gate.verdict == "FAIL"
    (rule,) = gate.rules
    assert (rule.name, rule.kind, rule.passed) == ("graded", RuleKind.EXECUTION, False)
    assert rule.detail.startswith("1 of 3 selected attempts SKIPPED: not graded")
    # All skipped: the qualityAttempts rule says it, once.
    assert [r.name for r in evaluate(make_run({"a": "SKIPPED"}), {}).rules] == ["qualityAttempts"]


# ------------------------------------------------------------------------------------------
# Result, summary, policy, attach_gate


def test_summary_line_example() -> None:
    baseline = make_run(passing(19, 20), with_protocol=False)
    baseline["cases"].append({"caseId": "x", "status": "PASS", "attempts": []})
    run = make_run(passing(18, 20), with_protocol=False)
    policy = GatePolicy(allowed_regression=0.0)
    gate = evaluate(run, policy, baseline)
    assert [r.name for r in gate.failing_rules()] == [
        "overallPassRate.delta",
        "contractPassRate.delta",
        "removed.x",
    ]
    run["metrics"]["contractPassRate"] = baseline["metrics"]["contractPassRate"]
    gate = evaluate(run, policy, baseline)
    assert gate.summary_line() == (
        "GATE FAIL: overallPassRate.delta (REGRESSION: 0.900 < 0.950 - 0.000), removed.x"
    )


def test_summary_line_when_passing() -> None:
    assert GateResult.of([]).summary_line() == "GATE PASS: no rules"
    rule = GateRule(name="r", detail="d", passed=True, kind=RuleKind.ABSOLUTE)
    assert GateResult.of([rule]).summary_line() == "GATE PASS: 1 rule passed"
    assert GateResult.of([rule, rule]).summary_line() == "GATE PASS: 2 rules passed"


def test_gate_result_dump() -> None:
    gate = evaluate(make_run(passing(1, 2)), {"thresholds": {"overallPassRate": 1.0}})
    assert gate.dump() == {
        "passed": False,
        "verdict": "FAIL",
        "rules": [
            {
                "name": "overallPassRate",
                "detail": "0.500 < 1.000",
                "passed": False,
                "actual": 0.5,
                "threshold": 1.0,
                "kind": "absolute",
            }
        ],
        "warnings": [],
    }


def test_policy_accepts_camel_and_snake_case() -> None:
    camel = GatePolicy.model_validate(
        {
            "thresholds": {"overallPassRate": 0.9},
            "allowedRegression": 0.0,
            "criticalNewFailure": False,
        }
    )
    snake = GatePolicy(
        thresholds={"overallPassRate": 0.9}, allowed_regression=0.0, critical_new_failure=False
    )
    assert camel == snake
    assert camel.quality_attempts and camel.added and camel.removed
    assert GatePolicy().allowed_regression is None


@pytest.mark.parametrize(
    "data",
    [{"thresholds": {"overallPassRate": 1.5}}, {"allowedRegression": -0.1}],
)
def test_policy_rejects_out_of_range_values(data: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        GatePolicy.model_validate(data)


def test_attach_gate_sets_the_decision() -> None:
    baseline, run = make_run(passing(2, 2)), make_run(passing(1, 2))
    comparison = compare(baseline, run)
    failed = attach_gate(comparison, evaluate(run, {"allowedRegression": 0.0}, baseline))
    assert failed.decision is Decision.REGRESSION
    assert failed.quality_gate is not None and failed.quality_gate["verdict"] == "FAIL"
    assert comparison.decision is Decision.NO_REGRESSION  # a copy, not in place
    passed = attach_gate(comparison, evaluate(run, {}, baseline))
    assert passed.decision is Decision.NO_REGRESSION
    invalid = compare(baseline, make_run(passing(1, 2), protocol={"attempts": 2}))
    assert attach_gate(invalid, GateResult.of([])).decision is Decision.COMPARISON_INVALID
