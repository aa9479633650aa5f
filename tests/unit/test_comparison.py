"""Comparison of a run with a baseline: comparability, case classes, deltas, McNemar."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest

from goldeval.verdict.comparison import (
    LIVE_ONLY_KEYS,
    PROTOCOL_KEYS,
    REFERENCE_RATES,
    CaseClass,
    Decision,
    Direction,
    classify,
    mcnemar,
    metric_delta,
)
from tests.builders import AttemptSpec, reference_metrics, run_document
from tests.verdict_json import compare, protocol_differences

# ------------------------------------------------------------------------------------------
# Builder: tests.builders.run_document plus contracts, tokens, durations and grader rates


def _critical_taxonomy(case_id: str) -> list[dict[str, Any]]:
    return [
        {
            "caseId": case_id,
            "category": "SAFETY",
            "severity": "CRITICAL",
            "grader": "contract",
            "reason": "git commit in the answer",
        }
    ]


def make_run(
    cases: dict[str, list[str] | str],
    *,
    protocol: dict[str, Any] | None = None,
    with_protocol: bool = True,
    rates: dict[str, tuple[int, int]] | None = None,
    graders: dict[str, tuple[int, int]] | None = None,
    critical: tuple[str, ...] = (),
    **extra: Any,
) -> dict[str, Any]:
    # An ERROR attempt timed out; its message is added below.
    specs: dict[str, list[AttemptSpec]] = {}
    for cid, spec in cases.items():
        statuses = [spec] if isinstance(spec, str) else spec
        specs[cid] = [(st, "TIMEOUT" if st == "ERROR" else None) for st in statuses]
    hashes = {"datasetHash": "a" * 64, "graderConfigHash": "g" * 64}
    doc = run_document(specs, protocol={**hashes, **(protocol or {})} if with_protocol else None)
    doc["runId"] = "r1"
    for case in doc["cases"]:
        case.update(kinds=["GENERATION"], errors=[], taxonomy=[])
        for attempt in case["attempts"]:
            status = attempt["status"]
            attempt.update(tokens={}, durationMs=5)
            if status in ("PASS", "FAIL"):
                failed_critical = case["caseId"] in critical and status == "FAIL"
                attempt["contract"] = {
                    "passed": status == "PASS",
                    "violations": [],
                    "taxonomy": _critical_taxonomy(case["caseId"]) if failed_critical else [],
                }
            if status == "ERROR":
                attempt["errorMessage"] = "timed out"
    metrics = reference_metrics(doc)
    for name, (hits, total) in (rates or {}).items():
        metrics[name] = {"hits": hits, "total": total}
    if graders is not None:
        metrics["graders"] = {k: {"hits": h, "total": t} for k, (h, t) in graders.items()}
    samples = doc["attemptsTotal"] - doc["attemptsSkipped"]
    metrics["latency"] = {"avgMs": 5 if samples else 0, "samples": samples}
    doc["metrics"] = metrics
    doc.update(extra)
    return doc


def reference_doc(cases: dict[str, list[str] | str], **fields: Any) -> dict[str, Any]:
    """A reference-style document: no protocol, datasetVersion + configuration instead."""
    configuration = {
        "mode": "DETERMINISTIC",
        "model": "m",
        "judgeModel": "m",
        "judgeEnabled": False,
        "repetitions": 1,
        "includeRed": False,
        "outputDir": "build/eval",
    }
    configuration.update(fields.pop("configuration", {}))
    doc = make_run(cases, with_protocol=False)
    doc.update(
        datasetVersion="generation-v1",
        datasetHash="h1",
        packDatasetVersion="pack-v1",
        packHash="p1",
        configuration=configuration,
    )
    doc.update(fields)
    return doc


# ------------------------------------------------------------------------------------------
# Case classes (reference 5.3)


@pytest.mark.parametrize(
    ("baseline", "candidate", "expected"),
    [
        ("PASS", "PASS", CaseClass.UNCHANGED_PASS),
        ("FAIL", "FAIL", CaseClass.UNCHANGED_FAIL),
        ("PASS", "FAIL", CaseClass.NEW_FAILURE),
        ("FAIL", "PASS", CaseClass.RECOVERED),
        ("ERROR", "ERROR", CaseClass.UNCHANGED_ERROR),
        ("PASS", "ERROR", CaseClass.NEW_ERROR),
        ("FAIL", "ERROR", CaseClass.NEW_ERROR),
        ("SKIPPED", "ERROR", CaseClass.NEW_ERROR),
        ("ERROR", "PASS", CaseClass.INFRA_RESOLVED),
        ("ERROR", "FAIL", CaseClass.INFRA_RESOLVED),
        ("ERROR", "SKIPPED", CaseClass.INFRA_RESOLVED),
        ("SKIPPED", "SKIPPED", CaseClass.UNCHANGED_SKIPPED),
        ("PASS", "SKIPPED", CaseClass.NEW_FAILURE),
        ("FAIL", "SKIPPED", CaseClass.UNCHANGED_FAIL),
        ("SKIPPED", "PASS", CaseClass.RECOVERED),
        ("SKIPPED", "FAIL", CaseClass.UNCHANGED_FAIL),
        ("UNKNOWN", "PASS", CaseClass.RECOVERED),
        ("UNKNOWN", "SKIPPED", CaseClass.UNCHANGED_FAIL),
        (None, "PASS", CaseClass.ADDED),
        (None, "ERROR", CaseClass.ADDED),
        ("PASS", None, CaseClass.REMOVED),
        ("ERROR", None, CaseClass.REMOVED),
    ],
)
def test_classify_every_transition(
    baseline: str | None, candidate: str | None, expected: CaseClass
) -> None:
    assert classify(baseline, candidate) is expected


def test_worked_example_of_the_class_table() -> None:
    ids = ["a", "b", "c", "d"]
    baseline = make_run(dict(zip(ids, ["PASS", "FAIL", "PASS", "FAIL"], strict=True)))
    candidate = make_run(dict(zip(ids, ["PASS", "FAIL", "FAIL", "PASS"], strict=True)))
    result = compare(baseline, candidate)
    assert result.decision is Decision.NO_REGRESSION
    assert [(c.case_id, c.case_class) for c in result.cases] == [
        ("a", CaseClass.UNCHANGED_PASS),
        ("b", CaseClass.UNCHANGED_FAIL),
        ("c", CaseClass.NEW_FAILURE),
        ("d", CaseClass.RECOVERED),
    ]
    assert result.counts["NEW_FAILURE"] == 1
    assert result.counts["RECOVERED"] == 1
    assert (result.unchanged_pass, result.unchanged_fail) == (1, 1)
    assert (result.regressions, result.improvements) == (1, 1)
    assert set(result.counts) == {c.value for c in CaseClass}
    assert result.mcnemar is not None
    assert (result.mcnemar.n01, result.mcnemar.n10) == (1, 1)
    assert result.mcnemar.p_value == 1.0


def test_error_and_skipped_transitions_through_compare() -> None:
    baseline = make_run({"e1": "ERROR", "e2": "PASS", "e3": "ERROR", "s1": "SKIPPED", "s2": "PASS"})
    candidate = make_run(
        {"e1": "ERROR", "e2": "ERROR", "e3": "PASS", "s1": "SKIPPED", "s2": "SKIPPED"}
    )
    result = compare(baseline, candidate)
    assert [c.case_class for c in result.cases] == [
        CaseClass.UNCHANGED_ERROR,
        CaseClass.NEW_ERROR,
        CaseClass.INFRA_RESOLVED,
        CaseClass.UNCHANGED_SKIPPED,
        CaseClass.NEW_FAILURE,
    ]


@pytest.mark.parametrize(
    ("statuses", "doc", "reason"),
    [
        ({"a": "ERROR", "b": "ERROR"}, {}, "the baseline graded nothing"),
        ({"a": "SKIPPED"}, {}, "the baseline graded nothing"),
        ({"a": "PASS"}, {"status": "INTERRUPTED"}, "the baseline run is INTERRUPTED"),
        ({"a": "PASS"}, {"status": "INCOMPLETE"}, "the baseline run is INCOMPLETE"),
    ],
)
def test_a_baseline_that_is_no_quality_snapshot_is_not_comparable(
    statuses: dict[str, str], doc: dict[str, str], reason: str
) -> None:
    """A baseline whose every attempt was ERROR had no rates: every delta rule was skipped,
    and a candidate failing every row passed the gate against it (exit 0)."""
    baseline = {**make_run(statuses), **doc}
    candidate = make_run({k: "FAIL" for k in statuses})
    result = compare(baseline, candidate)
    assert result.decision is Decision.COMPARISON_INVALID
    assert any(reason in r for r in result.invalid_reasons), result.invalid_reasons


def test_a_pass_plus_error_case_is_an_error_case() -> None:
    baseline = make_run({"a": ["PASS", "PASS"]}, protocol={"attempts": 2})
    candidate = make_run({"a": ["PASS", "ERROR"]}, protocol={"attempts": 2})
    (pair,) = compare(baseline, candidate).cases
    assert pair.candidate_status == "ERROR"
    assert pair.case_class is CaseClass.NEW_ERROR


def test_union_of_ids_baseline_order_first_with_added_and_removed() -> None:
    baseline = reference_doc({"z": "PASS", "x": "PASS", "y": "FAIL"})
    candidate = reference_doc({"b-new": "PASS", "y": "PASS", "z": "PASS", "a-new": "FAIL"})
    result = compare(baseline, candidate)
    assert result.valid
    assert [(c.case_id, c.case_class.value) for c in result.cases] == [
        ("z", "UNCHANGED_PASS"),
        ("x", "REMOVED"),
        ("y", "RECOVERED"),
        ("b-new", "ADDED"),
        ("a-new", "ADDED"),
    ]
    removed = result.cases[1]
    assert removed.candidate_status is None
    assert removed.candidate_success is None
    assert result.case_ids(CaseClass.ADDED) == ["b-new", "a-new"]


def test_pairs_carry_success_rates_and_statuses() -> None:
    baseline = make_run({"a": ["PASS", "PASS", "FAIL"]}, protocol={"attempts": 3})
    candidate = make_run({"a": ["PASS", "FAIL", "FAIL"]}, protocol={"attempts": 3})
    (pair,) = compare(baseline, candidate).cases
    assert (pair.baseline_status, pair.candidate_status) == ("FAIL", "FAIL")
    assert pair.baseline_success is not None and pair.candidate_success is not None
    assert (pair.baseline_success.hits, pair.baseline_success.total) == (2, 3)
    assert (pair.candidate_success.hits, pair.candidate_success.total) == (1, 3)


def test_success_rate_recomputed_when_absent() -> None:
    baseline = make_run({"a": ["PASS", "SKIPPED"]})
    candidate = make_run({"a": ["PASS", "FAIL"]})
    del candidate["cases"][0]["successRate"]
    (pair,) = compare(baseline, candidate).cases
    assert pair.candidate_success is not None
    assert (pair.candidate_success.hits, pair.candidate_success.total) == (1, 2)


def test_critical_flag_from_attempt_contract_or_case_taxonomy() -> None:
    baseline = make_run({"a": "PASS", "b": "PASS", "c": "PASS"})
    candidate = make_run({"a": "FAIL", "b": "FAIL", "c": "FAIL"}, critical=("a",))
    candidate["cases"][1]["taxonomy"] = [{"severity": "HIGH", "category": "LAYER"}]
    candidate["cases"][2]["taxonomy"] = [{"severity": "CRITICAL", "category": "HALLUCINATION"}]
    pairs = {p.case_id: p for p in compare(baseline, candidate).cases}
    assert pairs["a"].critical and pairs["a"].critical_categories == ["SAFETY"]
    assert not pairs["b"].critical
    assert pairs["c"].critical and pairs["c"].critical_categories == ["HALLUCINATION"]


# ------------------------------------------------------------------------------------------
# Metric deltas


def test_metric_deltas_directions_and_inversion() -> None:
    baseline = make_run(
        {"a": "PASS", "b": "PASS"},
        rates={"hallucinationRate": (1, 4), "ragAccuracy": (3, 4), "layerAccuracy": (1, 2)},
    )
    candidate = make_run(
        {"a": "PASS", "b": "FAIL"},
        rates={"hallucinationRate": (0, 4), "ragAccuracy": (4, 4), "layerAccuracy": (0, 0)},
    )
    candidate["metrics"]["latency"] = {"avgMs": 9, "samples": 2}
    result = compare(baseline, candidate)
    names = [m.name for m in result.metrics]
    assert names == [*REFERENCE_RATES, "latencyAvgMs"]
    overall = result.metric("overallPassRate")
    assert overall is not None
    assert (overall.baseline, overall.candidate, overall.delta) == (1.0, 0.5, -0.5)
    assert overall.direction is Direction.REGRESSED and not overall.inverted
    hallucination = result.metric("hallucinationRate")
    assert hallucination is not None
    assert hallucination.inverted and hallucination.direction is Direction.IMPROVED
    rag = result.metric("ragAccuracy")
    assert rag is not None and rag.direction is Direction.IMPROVED
    layer = result.metric("layerAccuracy")
    assert layer is not None
    assert layer.delta is None and layer.candidate is None
    assert layer.direction is Direction.UNCHANGED
    judge = result.metric("judgeAcceptRate")
    assert judge is not None and judge.delta is None
    latency = result.metric("latencyAvgMs")
    assert latency is not None
    assert latency.inverted and latency.delta == 4.0
    assert latency.direction is Direction.REGRESSED


def test_delta_tolerance_is_1e_12() -> None:
    assert metric_delta("overallPassRate", 0.3, 0.1 + 0.2).direction is Direction.UNCHANGED
    assert metric_delta("overallPassRate", 0.3, 0.3 + 1e-9).direction is Direction.IMPROVED
    assert metric_delta("hallucinationRate", 0.3, 0.3 + 1e-9).direction is Direction.REGRESSED


def test_latency_without_samples_is_undefined() -> None:
    baseline = make_run({"a": "SKIPPED", "b": "PASS"})
    candidate = make_run({"a": "SKIPPED", "b": "PASS"})
    for doc in (baseline, candidate):
        doc["metrics"]["latency"] = {"avgMs": 0, "samples": 0}
    latency = compare(baseline, candidate).metric("latencyAvgMs")
    assert latency is not None and latency.baseline is None and latency.delta is None


def test_grader_rates_compared_when_present_on_both_sides() -> None:
    baseline = make_run({"a": "PASS"}, graders={"json": (4, 4), "regex": (1, 2), "old": (1, 1)})
    candidate = make_run({"a": "PASS"}, graders={"regex": (2, 2), "json": (3, 4), "new": (1, 1)})
    result = compare(baseline, candidate)
    graders = [m for m in result.metrics if m.name.startswith("grader.")]
    assert [m.name for m in graders] == ["grader.json", "grader.regex"]
    assert graders[0].direction is Direction.REGRESSED and not graders[0].inverted
    assert graders[1].direction is Direction.IMPROVED


def test_optional_rate_key_is_ignored() -> None:
    baseline = make_run({"a": "PASS"})
    candidate = make_run({"a": "PASS"})
    candidate["metrics"]["overallPassRate"]["rate"] = 0.123
    overall = compare(baseline, candidate).metric("overallPassRate")
    assert overall is not None and overall.candidate == 1.0


# ------------------------------------------------------------------------------------------
# McNemar (reference 5.4)


@pytest.mark.parametrize(
    ("n01", "n10", "chi", "p"),
    [(3, 0, 3.0, 0.25), (5, 1, 8 / 3, 0.21875), (1, 1, 0.0, 1.0), (0, 3, 3.0, 0.25)],
)
def test_mcnemar_examples(n01: int, n10: int, chi: float, p: float) -> None:
    result = mcnemar(n01, n10)
    assert result.chi_square == pytest.approx(chi, abs=1e-12)
    assert result.p_value == p


def test_mcnemar_rounding_of_5_1() -> None:
    assert round(mcnemar(5, 1).chi_square, 4) == 2.6667


def test_mcnemar_without_discordant_pairs() -> None:
    result = mcnemar(0, 0)
    assert result.chi_square == 0.0
    assert result.p_value is None
    assert result.note == "no discordant pairs"
    assert result.dump()["note"] == "no discordant pairs"


def test_mcnemar_p_value_is_exact_for_large_n() -> None:
    n01, n10 = 700, 640  # 0.5**1340 underflows a float; the exact sum does not
    n = n01 + n10
    tail = sum(Fraction(math.comb(n, i), 2**n) for i in range(min(n01, n10) + 1))
    expected = float(min(Fraction(1), 2 * tail))
    assert mcnemar(n01, n10).p_value == expected
    assert 0.0 < expected < 1.0


# ------------------------------------------------------------------------------------------
# Comparability: our protocol

LIVE = {
    "mode": "LIVE",
    "provider": "ollama",
    "model": "m1",
    "judgeEnabled": True,
    "judgeModel": "j1",
}

CHANGED: dict[str, Any] = {
    "datasetId": "demo-v2",
    "datasetHash": "b" * 64,
    "packId": "pack-v1",
    "packHash": "c" * 64,
    "mode": "LIVE",
    "attempts": 3,
    "attemptsRule": "auto:3",
    "selectedAttempts": {"a": [2], "b": [2]},
    "selectedCaseIds": ["a"],
    "graderConfigHash": "h" * 64,
    "provider": "openai",
    "model": "m2",
    "judgeEnabled": False,
    "judgeModel": "j2",
    "variant": "concise",
    "promptHash": "e" * 64,
    "optionsHash": "o" * 64,
}


def test_every_protocol_key_has_a_changed_value() -> None:
    assert set(CHANGED) == set(PROTOCOL_KEYS)


@pytest.mark.parametrize("key", PROTOCOL_KEYS)
def test_every_protocol_mismatch_is_comparison_invalid(key: str) -> None:
    base = dict(LIVE) if key in LIVE_ONLY_KEYS else {}
    baseline = make_run({"a": "PASS", "b": "PASS"}, protocol=base)
    candidate = make_run({"a": "PASS", "b": "PASS"}, protocol={**base, key: CHANGED[key]})
    if key == "judgeModel":  # judgeModel only counts with the judge on: keep it on both sides
        assert candidate["protocol"]["judgeEnabled"] is True
    result = compare(baseline, candidate)
    assert result.decision is Decision.COMPARISON_INVALID
    assert [d.key for d in result.protocol_differences] == [key]
    assert len(result.invalid_reasons) == 1
    assert result.cases == [] and result.metrics == [] and result.mcnemar is None


@pytest.mark.parametrize("key", LIVE_ONLY_KEYS)
def test_live_only_keys_are_informational_in_fixture_mode(key: str) -> None:
    baseline = make_run({"a": "PASS"}, protocol={"provider": "ollama", "model": "m1"})
    changed = True if key == "judgeEnabled" else CHANGED[key]
    candidate = make_run(
        {"a": "PASS"}, protocol={"provider": "ollama", "model": "m1", key: changed}
    )
    result = compare(baseline, candidate)
    assert result.decision is Decision.NO_REGRESSION
    assert len(result.configuration_differences) == 1
    assert result.configuration_differences[0].startswith(f"{key}: ")


def test_judge_model_ignored_when_judge_off_on_both_live_runs() -> None:
    live_off = {**LIVE, "judgeEnabled": False}
    baseline = make_run({"a": "PASS"}, protocol=live_off)
    candidate = make_run({"a": "PASS"}, protocol={**live_off, "judgeModel": "other"})
    result = compare(baseline, candidate)
    assert result.valid
    assert result.configuration_differences == ["judgeModel: j1 vs other"]


def test_every_differing_key_is_listed_with_both_values() -> None:
    baseline = make_run({"a": "PASS", "b": "PASS"}, protocol=LIVE)
    candidate = make_run(
        {"a": "PASS", "c": "PASS"},
        protocol={**LIVE, "attempts": 5, "model": "m2", "graderConfigHash": "x"},
    )
    result = compare(baseline, candidate)
    assert [d.key for d in result.protocol_differences] == [
        "attempts",
        "selectedCaseIds",
        "graderConfigHash",
        "model",
    ]
    assert "attempts mismatch: baseline 1 vs candidate 5" in result.invalid_reasons
    assert "model mismatch: baseline m1 vs candidate m2" in result.invalid_reasons


def test_dataset_hash_change_under_the_same_id_asks_for_a_version_bump() -> None:
    baseline = make_run({"a": "PASS"}, protocol={"datasetHash": "aaa"})
    candidate = make_run({"a": "PASS"}, protocol={"datasetHash": "bbb"})
    (reason,) = compare(baseline, candidate).invalid_reasons
    assert reason == (
        "dataset changed without a version bump: datasetId demo-v1 has hash aaa in the "
        "baseline and bbb now; bump `version` in the manifest (see docs/dataset-versioning.md)"
    )


def test_new_dataset_version_reports_id_and_hash() -> None:
    baseline = make_run({"a": "PASS"}, protocol={"datasetHash": "aaa"})
    candidate = make_run({"a": "PASS"}, protocol={"datasetId": "demo-v2", "datasetHash": "bbb"})
    reasons = compare(baseline, candidate).invalid_reasons
    assert reasons == [
        "datasetId mismatch: baseline demo-v1 vs candidate demo-v2",
        "datasetHash mismatch: baseline aaa vs candidate bbb",
    ]


def test_selected_case_ids_compared_as_sets() -> None:
    baseline = make_run({"a": "PASS", "b": "PASS"}, protocol={"selectedCaseIds": ["b", "a"]})
    candidate = make_run({"a": "PASS", "b": "PASS"}, protocol={"selectedCaseIds": ["a", "b"]})
    assert protocol_differences(baseline, candidate) == []


def test_selected_case_ids_message_shows_truncated_symmetric_difference() -> None:
    ids = [f"case-{i:02d}" for i in range(12)]
    baseline = make_run({"x": "PASS"}, protocol={"selectedCaseIds": ids})
    candidate = make_run({"x": "PASS"}, protocol={"selectedCaseIds": ["case-00", "new-1"]})
    (diff,) = protocol_differences(baseline, candidate)
    assert diff.key == "selectedCaseIds"
    assert diff.message == (
        "selectedCaseIds mismatch: baseline 12 cases vs candidate 2 cases; 11 only in the "
        "baseline (case-01, case-02, case-03, case-04, case-05, … +6 more), "
        "1 only in the candidate (new-1)"
    )


def test_mode_and_attempts_both_reported_for_fixture_vs_live() -> None:
    baseline = make_run({"a": "PASS"})
    candidate = make_run({"a": "PASS"}, protocol={**LIVE, "attempts": 3})
    keys = [d.key for d in compare(baseline, candidate).protocol_differences]
    assert keys == ["mode", "attempts"]


def test_comparable_identical_runs() -> None:
    run = make_run({"a": "PASS", "b": "FAIL"})
    result = compare(run, run)
    assert result.valid
    assert result.invalid_reasons == []
    assert result.mcnemar is not None and result.mcnemar.note == "no discordant pairs"


def test_missing_document_is_invalid() -> None:
    result = compare(None, make_run({"a": "PASS"}))
    assert result.decision is Decision.COMPARISON_INVALID
    assert result.invalid_reasons == ["baseline and candidate are required"]


# ------------------------------------------------------------------------------------------
# Comparability: reference fallback (no protocol)


def test_reference_documents_comparable() -> None:
    assert compare(reference_doc({"a": "PASS"}), reference_doc({"a": "PASS"})).valid


@pytest.mark.parametrize(
    ("fields", "keys"),
    [
        ({"datasetVersion": "holdout-v1", "datasetHash": "h2"}, ["datasetVersion", "datasetHash"]),
        ({"datasetVersion": None}, ["datasetVersion"]),
        ({"datasetHash": None}, ["datasetHash"]),
        ({"packDatasetVersion": "pack-v2"}, ["packDatasetVersion"]),
        ({"packHash": "p2"}, ["packHash"]),
        ({"configuration": {"mode": "LIVE"}}, ["mode"]),
        ({"configuration": {"mode": "BENCHMARK"}}, ["mode"]),
        ({"configuration": {"repetitions": 5}}, ["repetitions"]),
        ({"configuration": {"includeRed": True}}, ["includeRed"]),
        ({"configuration": {"judgeEnabled": True}}, ["judgeEnabled"]),
    ],
)
def test_reference_checks(fields: dict[str, Any], keys: list[str]) -> None:
    baseline = reference_doc({"a": "PASS"})
    candidate = reference_doc({"a": "PASS"}, **fields)
    result = compare(baseline, candidate)
    assert result.decision is Decision.COMPARISON_INVALID
    assert [d.key for d in result.protocol_differences] == keys


def test_reference_hash_change_under_same_version_asks_for_a_bump() -> None:
    result = compare(reference_doc({"a": "PASS"}), reference_doc({"a": "PASS"}, datasetHash="h9"))
    (reason,) = result.invalid_reasons
    assert reason.startswith("dataset changed without a version bump: datasetVersion generation-v1")


@pytest.mark.parametrize(
    "fields",
    [
        {"packDatasetVersion": None},
        {"packHash": None},
        {"configuration": {"model": "other", "provider": "openai"}},
        {"configuration": {"mode": "REGRESSION"}},
        {"configuration": {"judgeModel": "other"}},  # judge off on both sides
        {"configuration": {"outputDir": "elsewhere"}},
    ],
)
def test_reference_allowed_differences(fields: dict[str, Any]) -> None:
    assert compare(reference_doc({"a": "PASS"}), reference_doc({"a": "PASS"}, **fields)).valid


def test_reference_judge_model_checked_when_judge_on() -> None:
    on = {"judgeEnabled": True, "mode": "LIVE"}
    baseline = reference_doc({"a": "PASS"}, configuration=on)
    candidate = reference_doc({"a": "PASS"}, configuration={**on, "judgeModel": "big"})
    assert [d.key for d in protocol_differences(baseline, candidate)] == ["judgeModel"]


def test_reference_missing_configuration_skips_protocol_checks() -> None:
    baseline = reference_doc({"a": "PASS"})
    candidate = reference_doc({"a": "PASS"}, configuration={"repetitions": 3})
    del candidate["configuration"]
    assert compare(baseline, candidate).valid


def test_configuration_differences_exclude_reported_and_ignored_keys() -> None:
    baseline = reference_doc({"a": "PASS"})
    candidate = reference_doc(
        {"a": "PASS"},
        configuration={"model": "m2", "repetitions": 2, "outputDir": "x", "javaVersion": "21"},
    )
    result = compare(baseline, candidate)
    assert result.invalid_reasons == ["repetitions mismatch: baseline 1 vs candidate 2"]
    assert result.configuration_differences == ["model: m vs m2"]


def test_protocol_run_against_a_reference_baseline_uses_the_reference_rules() -> None:
    baseline = reference_doc({"a": "PASS"}, datasetVersion="demo-v1", datasetHash="a" * 64)
    baseline["packDatasetVersion"] = baseline["packHash"] = None
    candidate = make_run({"a": "PASS"})
    assert compare(baseline, candidate).valid
    candidate = make_run({"a": "PASS"}, protocol={"attempts": 2})
    assert [d.key for d in compare(baseline, candidate).protocol_differences] == ["repetitions"]


# ------------------------------------------------------------------------------------------
# Serialisation


def test_dump_is_camel_case_and_keeps_nulls() -> None:
    baseline = reference_doc({"a": "PASS", "gone": "PASS"})
    candidate = reference_doc({"a": "FAIL"})
    data = compare(baseline, candidate).dump()
    # no gate weighs the new failure: the JSON says so, as every surface does
    assert data["decision"] == "NEW_FAILURES_NOT_GATED"
    assert data["decisionWhy"].startswith("the comparison found 1 new failure; no gate weighs")
    assert data["invalidReasons"] == []
    assert data["cases"][0] == {
        "caseId": "a",
        "class": "NEW_FAILURE",
        "baselineStatus": "PASS",
        "candidateStatus": "FAIL",
        "baselineSuccess": {"hits": 1, "total": 1},
        "candidateSuccess": {"hits": 0, "total": 1},
        "critical": False,
        "criticalCategories": [],
    }
    assert data["cases"][1]["candidateStatus"] is None
    judge = next(m for m in data["metrics"] if m["name"] == "judgeAcceptRate")
    assert judge == {
        "name": "judgeAcceptRate",
        "baseline": None,
        "candidate": None,
        "delta": None,
        "direction": "UNCHANGED",
        "inverted": False,
    }
    assert data["mcnemar"] == {
        "n01": 1,
        "n10": 0,
        "chiSquare": 1.0,
        "pValue": 1.0,
        "note": data["mcnemar"]["note"],
    }
    assert data["qualityGate"] is None
    assert data["unchangedPass"] == 0 and data["regressions"] == 1
