"""verdict.decide: the one verdict path of pytest and the CLI, tested directly (no pytester)."""

from __future__ import annotations

from goldeval.dataset.manifest import Manifest
from goldeval.verdict.comparison import Decision
from goldeval.verdict.decide import CAPTURE_NOTE, NO_GATE_NOTE, policy_from_manifest
from goldeval.verdict.exit_codes import COMPARISON_INVALID, GATE_FAILED, INFRA, OK
from goldeval.verdict.gate import GatePolicy
from tests.unit.test_exitcodes import make_run
from tests.verdict_json import decide

POLICY = GatePolicy(thresholds={"overallPassRate": 0.5})


def test_no_gate_policy_and_all_pass_is_ok() -> None:
    run = make_run({"a": "PASS", "b": "PASS"})
    verdict = decide(run, baseline=None, policy=None, live=False)
    assert (verdict.code, verdict.gate, verdict.comparison) == (OK, None, None)
    assert verdict.reason == "every graded attempt ok (no gate)"


def test_fail_without_a_gate_is_exit_1_with_the_count() -> None:
    run = make_run({"a": "PASS", "b": "FAIL"})
    verdict = decide(run, baseline=None, policy=None, live=False, pytest_status=1)
    assert verdict.code == GATE_FAILED
    assert verdict.reason == "1 FAIL attempt(s) and no gate to weigh them"


def test_a_gate_weighs_golden_failures_but_not_the_users_own() -> None:
    run = make_run({"a": "PASS", "b": "PASS", "c": "FAIL"})
    weighed = decide(run, baseline=None, policy=POLICY, live=False, pytest_status=1)
    assert weighed.code == OK and weighed.gate is not None and weighed.gate.passed
    own = decide(
        run, baseline=None, policy=POLICY, live=False, pytest_status=1, other_failures=True
    )
    assert own.code == GATE_FAILED and own.reason == "test failures"


def test_threshold_missed_fails_the_gate() -> None:
    run = make_run({"a": "PASS", "b": "FAIL", "c": "FAIL"})
    verdict = decide(run, baseline=None, policy=POLICY, live=False, pytest_status=1)
    assert verdict.code == GATE_FAILED
    assert verdict.gate is not None and not verdict.gate.passed
    assert verdict.run_fields()["qualityGate"]["passed"] is False
    assert verdict.run_fields()["exitDecision"] == {"code": GATE_FAILED, "reason": verdict.reason}


def test_regression_against_a_comparable_baseline() -> None:
    baseline = make_run({"a": "PASS", "b": "PASS"})
    run = make_run({"a": "PASS", "b": "FAIL"})
    verdict = decide(run, baseline=baseline, policy=GatePolicy(allowed_regression=0.0), live=False)
    assert verdict.code == GATE_FAILED
    assert verdict.comparison is not None
    assert verdict.comparison.decision is Decision.REGRESSION
    assert "comparison" in verdict.run_fields()


def test_incomparable_baseline_is_65_unless_not_gated() -> None:
    baseline = make_run({"a": "PASS"}, attempts=3)
    run = make_run({"a": "PASS"})
    gated = decide(run, baseline=baseline, policy=POLICY, live=False)
    assert gated.code == COMPARISON_INVALID
    report_only = decide(run, baseline=baseline, policy=POLICY, live=False, gate_enabled=False)
    assert report_only.code == OK and report_only.gate is None
    assert report_only.notes == [NO_GATE_NOTE]


def test_live_run_is_gated_even_without_a_policy() -> None:
    run = make_run({"a": "PASS"}, mode="LIVE")
    verdict = decide(run, baseline=None, policy=None, live=True)
    assert verdict.gate is not None


def test_all_error_is_infrastructure_not_fail() -> None:
    run = make_run({"a": "ERROR", "b": "ERROR"})
    verdict = decide(run, baseline=None, policy=POLICY, live=False)
    assert verdict.code == INFRA


def test_capture_is_not_gated_and_says_what_it_captured() -> None:
    run = make_run({"a": "PASS", "b": "FAIL"})
    run["casesTotal"], run["casesFailed"] = 2, 1
    verdict = decide(run, baseline=None, policy=POLICY, live=False, capture=True, pytest_status=1)
    assert verdict.code == OK and verdict.gate is None
    assert verdict.notes == [CAPTURE_NOTE]
    assert verdict.reason.startswith("baseline capture (not gated): 2 cases, 1 FAIL")


def test_policy_from_manifest_per_mode() -> None:
    manifest = Manifest.model_validate(
        {"version": "demo-v1", "gate": {"fixture": {"thresholds": {"overallPassRate": 0.9}}}}
    )
    fixture = policy_from_manifest(manifest, live=False)
    assert fixture is not None and fixture.thresholds == {"overallPassRate": 0.9}
    live = policy_from_manifest(manifest, live=True)
    assert live is not None and live.allowed_regression == 0.0
    bare = Manifest.model_validate({"version": "demo-v1"})
    assert policy_from_manifest(bare, live=False) is None
