"""Exit codes: one test per row of the precedence table in goldeval.verdict.exit_codes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from goldeval.verdict import exit_codes as exitcodes
from goldeval.verdict.comparison import (
    LIVE_ONLY_KEYS,
    PROTOCOL_KEYS,
    Decision,
)
from goldeval.verdict.exit_codes import (
    COMPARISON_INVALID,
    GATE_FAILED,
    INFRA,
    NO_TESTS,
    OK,
    USAGE,
    ExitDecision,
)
from goldeval.verdict.gate import GateResult, GateRule, RuleKind, attach_gate
from tests.builders import reference_metrics, run_document
from tests.helpers import decide_run_exit
from tests.verdict_json import compare, evaluate, metric_value

# ------------------------------------------------------------------------------------------
# Builder: tests.builders.run_document plus a contract result on each attempt


def make_run(cases: Mapping[str, str | list[str]], **protocol: Any) -> dict[str, Any]:
    doc = run_document(cases, protocol=protocol)
    for case in doc["cases"]:
        for attempt in case["attempts"]:
            attempt["contract"] = {"passed": attempt["status"] == "PASS", "taxonomy": []}
    doc["metrics"] = reference_metrics(doc)
    return doc


FAILED_GATE = GateResult.of(
    [GateRule(name="removed.x", detail="gone", passed=False, kind=RuleKind.IDENTITY)]
)
PASSED_GATE = GateResult.of(
    [GateRule(name="overallPassRate", detail="1.000 >= 1.000", passed=True, kind=RuleKind.ABSOLUTE)]
)


def test_constants() -> None:
    assert (OK, GATE_FAILED, USAGE, NO_TESTS, COMPARISON_INVALID, INFRA) == (0, 1, 4, 5, 65, 75)
    assert (exitcodes.INTERRUPTED, exitcodes.INTERNAL_ERROR) == (2, 3)


def test_the_table_names_every_code() -> None:
    table = exitcodes.markdown_table()
    for text in ("2/3/4", "| 65 |", "| 75 |", "COMPARISON_INVALID", "nothing was graded"):
        assert text in table


# Row 4: pytest's own INTERRUPTED / INTERNAL_ERROR / USAGE_ERROR are kept.


@pytest.mark.parametrize("status", [2, 3, 4])
def test_row1_pytest_status_kept(status: int) -> None:
    run = make_run({"a": "ERROR"})
    invalid = compare(None, run)
    decision = decide_run_exit(run, invalid, FAILED_GATE, pytest_status=status)
    assert decision.code == status
    assert f"(exit {status})" in decision.reason


# Row 2: comparison invalid → 65, for every protocol key.

LIVE = {
    "mode": "LIVE",
    "provider": "ollama",
    "model": "m1",
    "judgeEnabled": True,
    "judgeModel": "j",
}
CHANGED: dict[str, Any] = {
    "datasetId": "demo-v2",
    "datasetHash": "other",
    "packId": "pack-v1",
    "packHash": "p",
    "mode": "LIVE",
    "attempts": 3,
    "attemptsRule": "auto:3",
    "selectedAttempts": {"a": [2], "b": [2]},
    "selectedCaseIds": ["a"],
    "graderConfigHash": "g2",
    "provider": "openai",
    "model": "m2",
    "judgeEnabled": False,
    "judgeModel": "j2",
    "variant": "concise",
    "promptHash": "e" * 64,
    "optionsHash": "o" * 64,
}


@pytest.mark.parametrize("key", PROTOCOL_KEYS)
def test_row2_every_protocol_mismatch_exits_65(key: str) -> None:
    base = dict(LIVE) if key in LIVE_ONLY_KEYS else {}
    baseline = make_run({"a": "PASS", "b": "PASS"}, **base)
    run = make_run({"a": "PASS", "b": "PASS"}, **{**base, key: CHANGED[key]})
    comparison = compare(baseline, run)
    assert comparison.decision is Decision.COMPARISON_INVALID
    decision = decide_run_exit(run, comparison, PASSED_GATE, pytest_status=0)
    assert decision.code == COMPARISON_INVALID == 65
    assert decision.reason.startswith(f"comparison invalid: {key} ") or (
        key == "datasetHash" and "version bump" in decision.reason
    )


def test_row2_reason_counts_further_reasons() -> None:
    baseline = make_run({"a": "PASS"})
    run = make_run({"a": "PASS"}, attempts=2, graderConfigHash="x")
    decision = decide_run_exit(run, compare(baseline, run), None, pytest_status=1)
    assert decision == ExitDecision(
        65, "comparison invalid: attempts mismatch: baseline 1 vs candidate 2 (+1 more)"
    )


# Row 3: nothing graded → 1.


def test_row3_empty_selection() -> None:
    run = make_run({})
    decision = decide_run_exit(run, None, None, pytest_status=0)
    assert decision.code == GATE_FAILED
    assert decision.reason.startswith("nothing was graded")


def test_pytest_no_tests_is_kept_unless_a_resumed_key_graded_everything() -> None:
    assert decide_run_exit(make_run({}), pytest_status=5).code == NO_TESTS
    resumed = decide_run_exit(make_run({"a": "PASS"}), pytest_status=5, resumed_all=True)
    assert resumed.code == OK


def test_row3_all_skipped_even_without_a_gate() -> None:
    run = make_run({"a": "SKIPPED", "b": ["SKIPPED", "SKIPPED"]})
    decision = decide_run_exit(run, None, None, pytest_status=0)
    assert decision == ExitDecision(1, "nothing was graded: all 3 attempts skipped")


# Row 4: every attempt ERROR → 75, with undefined quality rates.


def test_row4_every_attempt_error() -> None:
    run = make_run({"a": "ERROR", "b": ["ERROR", "ERROR"], "c": "SKIPPED"})
    for name in ("overallPassRate", "contractPassRate", "ragAccuracy"):
        assert metric_value(run, name) is None
    gate = evaluate(run, {"thresholds": {"overallPassRate": 1.0}})
    assert not gate.passed
    decision = decide_run_exit(run, None, gate, pytest_status=1)
    assert decision.code == INFRA == 75
    assert decision.reason == "infrastructure failure: all 3 attempts ERROR, no quality verdict"


# Row 5: no case reached PASS/FAIL and some case is ERROR → 75, before the gate.


def test_row5_only_error_cases_beat_a_failed_gate() -> None:
    run = make_run({"a": ["PASS", "ERROR"], "b": "SKIPPED"})
    decision = decide_run_exit(run, None, FAILED_GATE, pytest_status=1)
    assert decision.code == INFRA
    assert "no case reached PASS/FAIL" in decision.reason


# Row 6: gate failed → 1.


def test_row6_failed_gate() -> None:
    run = make_run({"a": "PASS", "b": "FAIL"})
    decision = decide_run_exit(run, None, FAILED_GATE, pytest_status=1)
    assert decision == ExitDecision(1, "GATE FAIL: removed.x")


def test_row6_failed_gate_beats_infrastructure_errors() -> None:
    run = make_run({"a": "PASS", "b": "FAIL", "c": "ERROR"})
    assert decide_run_exit(run, None, FAILED_GATE, pytest_status=1).code == GATE_FAILED


def test_row6_regression_decision_without_gate_object() -> None:
    baseline, run = make_run({"a": "PASS"}), make_run({"a": "FAIL"})
    comparison = attach_gate(
        compare(baseline, run), evaluate(run, {"allowedRegression": 0.0}, baseline)
    )
    assert comparison.decision is Decision.REGRESSION
    assert decide_run_exit(run, comparison, None, pytest_status=0).code == GATE_FAILED


# Row 7: any attempt ERROR → 75 even when the gate passes.


def test_row7_partial_errors_with_passing_gate() -> None:
    run = make_run({"a": "PASS", "b": "ERROR"})
    decision = decide_run_exit(run, None, PASSED_GATE, pytest_status=0)
    assert decision.code == INFRA
    assert decision.reason == (
        "infrastructure errors: 1 of 2 attempts ERROR; the run is not a quality verdict, retry it"
    )


def test_row7_errors_without_a_gate() -> None:
    run = make_run({"a": "FAIL", "b": "ERROR"})
    assert decide_run_exit(run, None, None, pytest_status=1).code == INFRA


# Row 8: ordinary test failures without a gate → 1.


def test_fail_attempts_without_a_gate_fail_whatever_pytests_status() -> None:
    """A conftest that marks golden items xfail made pytest exit 0 with a FAIL attempt, and
    the ungated run exited 0 ("every graded attempt ok"); so did an edited pytestStatus."""
    run = make_run({"a": "PASS", "b": "FAIL"})
    for status in (0,):
        assert decide_run_exit(run, None, None, pytest_status=status) == ExitDecision(
            1, "1 FAIL attempt(s) and no gate to weigh them"
        )


def test_row8_item_failures_without_gate() -> None:
    run = make_run({"a": "PASS", "b": "FAIL"})
    assert decide_run_exit(run, None, None, pytest_status=1) == ExitDecision(
        1, "1 FAIL attempt(s) and no gate to weigh them"
    )
    assert decide_run_exit(run, pytest_status=1, other_failures=True) == ExitDecision(
        1, "test failures"
    )


def test_row8_item_failures_with_passing_gate() -> None:
    run = make_run({"a": "PASS", "b": "FAIL"})
    # The gate weighs the failed golden items; only a failing test of the user's own gives 1.
    assert decide_run_exit(run, None, PASSED_GATE, pytest_status=1).code == OK
    mixed = decide_run_exit(run, None, PASSED_GATE, pytest_status=1, other_failures=True)
    assert mixed.code == GATE_FAILED


# Rows 9 and 10.


def test_row9_other_pytest_status_kept() -> None:
    run = make_run({"a": "PASS"})
    assert decide_run_exit(run, None, None, pytest_status=7).code == 7


def test_row10_ok() -> None:
    run = make_run({"a": "PASS"})
    assert decide_run_exit(run, None, PASSED_GATE, pytest_status=0) == ExitDecision(
        0, "GATE PASS: 1 rule passed"
    )
    assert decide_run_exit(run, None, None, pytest_status=0).code == OK
    baseline = make_run({"a": "PASS"})
    assert decide_run_exit(run, compare(baseline, run), PASSED_GATE, pytest_status=0).code == OK


def test_fixture_gate_with_incomparable_baseline_still_exits_65() -> None:
    baseline = make_run({"a": "PASS"}, datasetHash="old")
    run = make_run({"a": "PASS"})
    comparison = compare(baseline, run)
    gate = evaluate(run, {"thresholds": {"overallPassRate": 1.0}}, baseline, comparison)
    assert gate.passed
    assert decide_run_exit(run, comparison, gate, pytest_status=0).code == COMPARISON_INVALID


def test_a_skipped_attempt_is_never_a_pass() -> None:
    run = make_run({"a": "PASS", "b": ["PASS", "SKIPPED"]})
    for gate in (None, PASSED_GATE):
        decision = decide_run_exit(run, None, gate, pytest_status=0)
        assert decision.code == GATE_FAILED
        assert "1 of 3 selected attempts SKIPPED" in decision.reason
