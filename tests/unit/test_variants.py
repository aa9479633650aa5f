"""Variants (issue 35), the pure parts: the manifest block and its errors, the selection, the
paired comparison's figures, the verdict's label and the exit status it gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from goldeval.core.errors import GoldevalError
from goldeval.dataset.manifest import read_manifest
from goldeval.dataset.variants import Variant, select_variants
from goldeval.results.documents import RunDocument, VariantComparisonDoc
from goldeval.results.variant_comparison import case_tallies, compare_variants
from goldeval.verdict.comparison import AttemptCounts
from goldeval.verdict.exit_codes import decide_exit
from goldeval.verdict.outcome import RunOutcome
from goldeval.verdict.variants import VariantDecision, decide_variants
from tests.helpers import assert_manifest_refused

VARIANTS = "variants:\n  - {name: a, model: m1}\n  - {name: b, model: m2}\n"


def _manifest(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "dataset.yaml"
    path.write_text("version: x-v1\n" + body, encoding="utf-8")
    return path


def test_variants_and_compare_gate_read(tmp_path: Path) -> None:
    path = _manifest(
        tmp_path, VARIANTS + "gate:\n  compare: {control: a, candidate: b, nonInferiority: 0.05}\n"
    )
    manifest = read_manifest(path)
    assert [(v.name, v.model) for v in manifest.variants or []] == [("a", "m1"), ("b", "m2")]
    assert manifest.gate is not None and manifest.gate.compare is not None
    assert manifest.gate.compare.non_inferiority == 0.05
    assert manifest.gate.compare.outcome == "majority"


@pytest.mark.parametrize(
    "body,field,fragment",
    [
        ("variants:\n  - {name: 'a b', model: m}\n", "variants[0].name", "not a variant name"),
        (
            "variants:\n  - {name: a, model: m}\n  - {name: a, model: n}\n",
            "variants[1].name",
            "declared twice",
        ),
        ("variants:\n  - {name: a, model: '  '}\n", "variants[0].model", "blank"),
        (
            "variants:\n  - {name: a, model: m}\n  - {name: b}\n",
            "variants[1].model",
            "name a model and this one does not",
        ),
        (
            "variants:\n  - {name: a, model: m}\n  - {name: b, model: m}\n",
            "variants[1].model",
            "name the same provider, model and prompt",
        ),
        (
            "variants:\n  - {name: a, prompt: {system: s}}\n  - {name: b, prompt: {system: s}}\n",
            "variants[1].prompt",
            "name the same provider, model and prompt",
        ),
        ("variants:\n  - {name: a, prompt: {}}\n", "variants[0].prompt", "neither system nor user"),
        (
            "variants:\n  - {name: a, prompt: {user: '{{ x'}}\n",
            "variants[0].prompt.user",
            "template syntax error",
        ),
        (
            "variants:\n  - {name: a, prompt: {sytem: s}}\n",
            "variants.0.prompt.sytem",
            "Extra inputs",
        ),
        (
            "variants:\n  - {name: a, model: m, options: {temprature: 1}}\n",
            "variants[0].options.temprature",
            "unknown option",
        ),
        (
            "variants:\n  - {name: a, model: m, options: {temperature: 0.5}}\n"
            "  - {name: b, model: m, options: {temperature: 0.5}}\n",
            "variants[1].model",
            "name the same provider, model and prompt",
        ),
        (
            "variants:\n  - {name: a, model: m, provider: ' '}\n",
            "variants[0].provider",
            "blank",
        ),
        (
            "variants:\n  - {name: a, model: m, baseUrl: 'http://x'}\n"
            "  - {name: b, model: m, baseUrl: 'http://x'}\n",
            "variants[1].model",
            "name the same provider, model and prompt",
        ),
        ("variants:\n  - {name: a, model: m, modle: x}\n", "variants.0.modle", "Extra inputs"),
        (
            VARIANTS + "gate:\n  compare: {control: a, candidate: c, nonInferiority: 0.05}\n",
            "gate.compare.candidate",
            "no variant 'c'",
        ),
        (
            VARIANTS + "gate:\n  compare: {control: a, candidate: a, nonInferiority: 0.05}\n",
            "gate.compare",
            "the same variant",
        ),
        (
            VARIANTS + "gate:\n  compare: {control: a, candidate: b, nonInferiority: 5}\n",
            "gate.compare.nonInferiority",
            "outside [0, 1)",
        ),
        (
            "variants:\n" + "".join(f"  - {{name: v{i}, model: m{i}}}\n" for i in range(33)),
            "variants",
            "33 variants declared, at most 32",
        ),
        (
            "gate:\n  compare: {control: a, candidate: b, nonInferiority: 0.1}\n",
            "gate.compare",
            "declares none",
        ),
    ],
)
def test_bad_variants_name_the_file_and_field(
    tmp_path: Path, body: str, field: str, fragment: str
) -> None:
    path = _manifest(tmp_path, body)
    assert_manifest_refused(path, field, fragment)


def test_selection_keeps_the_order_given_and_refuses_unknown_names() -> None:
    declared = [Variant(name="a", model="m1"), Variant(name="b", model="m2")]
    assert select_variants(declared, None) == declared
    assert [v.name for v in select_variants(declared, "b, a,b")] == ["b", "a"]
    with pytest.raises(GoldevalError, match="did you mean 'bb'"):
        select_variants([Variant(name="bb", model="m")], "b")
    with pytest.raises(GoldevalError, match="names no variant"):
        select_variants(declared, " , ")


def _run(model: str, statuses: dict[str, list[str]]) -> RunDocument:
    cases: list[dict[str, Any]] = [
        {
            "caseId": cid,
            "status": "PASS",
            "attempts": [{"index": i + 1, "status": s} for i, s in enumerate(per)],
        }
        for cid, per in statuses.items()
    ]
    return RunDocument.model_validate({"model": model, "cases": cases})


def test_tallies_leave_error_and_skipped_attempts_out() -> None:
    run = _run("m", {"c1": ["PASS", "FAIL", "ERROR"], "c2": ["SKIPPED"]})
    tallies = case_tallies(run)
    assert tallies["c1"] == (1, 2) and tallies["c2"] == (0, 0)


def _compare(control: dict[str, list[str]], candidate: dict[str, list[str]], margin: float) -> Any:
    figures = compare_variants(
        _run("m1", control), _run("m2", candidate), control="a", candidate="b", margin=margin
    )
    return figures, decide_variants(VariantComparisonDoc.model_validate(figures))


def test_comparison_figures_on_a_designed_pair() -> None:
    ids = [f"c{i:02d}" for i in range(20)]
    control = {cid: ["PASS"] for cid in ids}
    # Six cases flip to FAIL; one case the candidate never graded (ERROR) is not paired.
    candidate = {cid: ["FAIL" if i < 6 else "PASS"] for i, cid in enumerate(ids)}
    candidate["c19"] = ["ERROR"]
    figures, result = _compare(control, candidate, 0.05)
    assert figures["cases"] == 19 and figures["unpaired"] == 1
    assert figures["flippedWorse"] == ids[:6] and figures["flippedBetter"] == []
    # Exact McNemar, 6 discordant pairs all one way: p = 2 · (1/2)^6.
    assert figures["mcnemar"]["pValue"] == pytest.approx(2 / 64)
    assert figures["difference"] == pytest.approx(-6 / 19)
    assert figures["ci95"]["upper"] < -0.05
    assert result.decision is VariantDecision.INFERIOR
    assert "flipped to FAIL: c00, c01, c02, c03, c04 ..." in result.reason
    # Seeded: the same figures again, whatever order the cases came in.
    again, _ = _compare(dict(reversed(control.items())), dict(reversed(candidate.items())), 0.05)
    assert again == figures


def test_equal_variants_are_non_inferior_and_one_flip_is_inconclusive() -> None:
    ids = [f"c{i:02d}" for i in range(80)]
    same = {cid: ["PASS", "PASS"] for cid in ids}
    figures, result = _compare(same, same, 0.05)
    assert result.decision is VariantDecision.NON_INFERIOR
    assert figures["minimumDetectableDifference"] is None  # no discordance measured
    # Ten identical cases are not proof of anything within 5 points: the bootstrap alone
    # collapses to [0, 0]; the score interval says [-27.8, +27.8] and 63 more cases (73).
    few = {cid: same[cid] for cid in ids[:10]}
    figures, result = _compare(few, few, 0.05)
    assert result.decision is VariantDecision.INCONCLUSIVE
    assert figures["ci95"]["lower"] == pytest.approx(-0.2775, abs=1e-4)
    assert figures["moreCases"] == 63
    one_flip = {**same, "c00": ["FAIL", "FAIL"]}
    figures, result = _compare(same, one_flip, 0.05)
    assert result.decision is VariantDecision.INCONCLUSIVE
    assert figures["moreCases"] >= 1
    assert "more paired cases" in result.reason and "not a pass" in result.reason


def test_no_paired_case_is_inconclusive() -> None:
    figures, result = _compare({"c": ["ERROR"]}, {"c": ["PASS"]}, 0.05)
    assert figures["cases"] == 0
    assert result.decision is VariantDecision.INCONCLUSIVE
    assert "no case was graded by both" in result.reason


def _outcome(doc: VariantComparisonDoc, **facts: Any) -> RunOutcome:
    facts.setdefault("attempts", AttemptCounts(10, 8, 2, 0, 0))
    return RunOutcome(
        pytest_status=1, cases_total=10, cases_graded=10, variants=decide_variants(doc), **facts
    )


def _doc(verdict: str) -> VariantComparisonDoc:
    figures, _ = _compare({"c": ["PASS"]}, {"c": ["PASS"]}, 0.05)
    return VariantComparisonDoc.model_validate({**figures, "nonInferiority": verdict})


def test_exit_status_comes_from_the_variant_decision() -> None:
    passed = decide_exit(_outcome(_doc("PASS")))
    assert passed.code == 0 and "NON_INFERIOR" in passed.reason
    assert decide_exit(_outcome(_doc("FAIL"))).code == 1
    inconclusive = decide_exit(_outcome(_doc("UNDERPOWERED")))
    assert inconclusive.code == 1 and "INCONCLUSIVE" in inconclusive.reason
    # A hand-edited statistic verdict is never read as a pass.
    assert decide_exit(_outcome(_doc("OK"))).code == 1
    # ERROR attempts: the run is not a verdict, retry it (75) before any comparison.
    errors = _outcome(_doc("PASS"), attempts=AttemptCounts(10, 7, 2, 0, 1))
    assert decide_exit(errors).code == 75
    # --golden-no-gate: the comparison is reported, FAIL attempts give pytest's 1.
    ungated = decide_exit(_outcome(_doc("PASS"), gate_enabled=False))
    assert ungated.code == 1 and "no gate" in ungated.reason


def test_a_saved_run_is_regated_from_its_figures() -> None:
    doc = _doc("UNDERPOWERED").dump()
    run = RunDocument.model_validate(
        {"variantComparison": {**doc, "decision": "NON_INFERIOR"}, "cases": []}
    )
    outcome = RunOutcome.from_run(run)
    assert outcome.variants is not None
    assert outcome.variants.decision is VariantDecision.INCONCLUSIVE


def test_the_site_run_page_shows_the_variant_decision(tmp_path: Path) -> None:
    from goldeval.reports.site import build_site
    from goldeval.results.documents import typed_run
    from tests.builders import run_document

    ids = [f"c{i:02d}" for i in range(20)]
    figures, result = _compare({cid: ["PASS"] for cid in ids}, {cid: ["FAIL"] for cid in ids}, 0.05)
    run = run_document({"c": ["FAIL"]})
    run["runId"] = "r1"
    run["variantComparison"] = {**figures, "decision": result.decision.value, "reason": "why"}
    build_site(tmp_path, [typed_run(run)])
    page = (tmp_path / "runs" / "r1.html").read_text(encoding="utf-8")
    assert "<h2>Variants</h2>" in page
    assert '<span class="goldeval-fail">INFERIOR</span>' in page
    assert "Flipped to FAIL</th><td>c00, c01," in page


def test_before_the_run_the_selection_says_the_smallest_difference_it_can_detect() -> None:
    from goldeval.dataset.variants import CompareGate
    from goldeval.pytest_plugin.variants import SessionVariants, power_line

    pair = (Variant(name="a", model="m1"), Variant(name="b", model="m2"))
    gate = CompareGate(control="a", candidate="b", nonInferiority=0.05)
    line = power_line(SessionVariants(pair, gate), 10)
    assert line is not None
    assert line.startswith("variants: b vs a on 10 selected cases: no difference under 61.6 pts")
    assert line.endswith("margin 5.0 pts")
    assert "too few to detect any difference" in (power_line(SessionVariants(pair, gate), 3) or "")
    # No compared pair (no gate.compare, or one side not selected): nothing to say.
    assert power_line(SessionVariants(pair, None), 10) is None
    assert power_line(SessionVariants(pair[:1], gate), 10) is None
    assert power_line(None, 10) is None


def test_every_report_shows_the_label_decided_from_the_figures(tmp_path: Path) -> None:
    """A run.json whose recorded label says NON_INFERIOR while its figures say the pair
    cannot tell (hand-edited, or written before a rule was added): the site page, the
    report.md section and the JUnit testcase show the verdict's INCONCLUSIVE, never green."""
    from goldeval.reports.junit import dashboard_xml
    from goldeval.reports.markdown_variants import variant_lines
    from goldeval.reports.site import build_site
    from goldeval.results.documents import typed_run
    from tests.builders import run_document

    run = run_document({"c": ["PASS"]})
    run["runId"] = "r1"
    figures = _doc("PASS").dump()
    run["variantComparison"] = {**figures, "unpaired": 3, "decision": "NON_INFERIOR", "reason": "x"}
    typed = typed_run(run)
    build_site(tmp_path, [typed])
    page = (tmp_path / "runs" / "r1.html").read_text(encoding="utf-8")
    assert '<span class="goldeval-error">INCONCLUSIVE</span>' in page
    assert 'goldeval-pass">NON_INFERIOR' not in page
    assert "**INCONCLUSIVE**" in "\n".join(variant_lines(typed.variant_comparison))
    xml = dashboard_xml([typed])
    assert 'type="golden.variants.INCONCLUSIVE"' in xml


def test_a_single_variants_run_is_gated_like_any_run() -> None:
    """A run of one variant (``--golden-variants=concise``: no pair, no variantComparison)
    was decided by `goldeval gate` as a pair's run (no manifest policy, no live-baseline
    rule): exit 0 where its session exited 1. Only a run holding its pair's comparison is."""
    from goldeval.results.documents import typed_run
    from goldeval.verdict.decide import decide_pair
    from tests.builders import run_document

    root = Path(__file__).resolve().parents[2] / "golden" / "generation"
    run = run_document({"c": ["PASS"]}, protocol={"mode": "LIVE", "datasetId": "generation-v1"})
    run["variant"] = "concise"
    alone = decide_pair(typed_run(run), None, dataset_dir=root, gate_enabled=True)
    assert alone.code == 1 and "live baseline" in alone.reason, alone.reason
