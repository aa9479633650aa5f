"""Variants side by side (issue 35): the manifest's ``variants:`` and ``gate.compare`` against
the real fake model server on 127.0.0.1, serially and under two xdist workers.

The server answers model ``m-good`` with the recorded answers and ``m-bad`` with a broken
answer for the rows a test picks, so the paired comparison has a designed difference.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from goldeval.testing.llm_server import FakeLLMServer

VARIANTS = """
variants:
  - {name: control, model: m-good}
  - {name: candidate, model: m-bad}
"""
COMPARE = """
  compare: {control: control, candidate: candidate, nonInferiority: 0.05}
"""


def _manifest(project: Path, *, compare: bool = True) -> None:
    path = project / "golden/generation/dataset.yaml"
    text = path.read_text(encoding="utf-8") + VARIANTS
    if compare:
        # The `gate:` block is the manifest's last mapping before ours: extend it.
        text = text.replace("\ngate:\n", "\ngate:" + COMPARE, 1)
    path.write_text(text, encoding="utf-8")


def _break(server: FakeLLMServer, broken: Callable[[str], bool]) -> None:
    """m-bad answers "broken" to the rows whose prompt ``broken`` picks."""
    replay = server.responder

    def responder(req: Any) -> Any:
        if req.model == "m-bad" and broken(req.last_user_message or ""):
            return "broken"
        return replay(req)

    server.responder = responder


def _runs(project: Path) -> dict[str, dict[str, Any]]:
    runs = [json.loads(p.read_text()) for p in (project / ".goldeval/runs").glob("*/run.json")]
    return {r["variant"]: r for r in runs}


def _live(server: FakeLLMServer, *extra: str) -> list[str]:
    return [
        "--golden=generation-v1",
        "--golden-mode=live",
        f"--golden-base-url={server.base_url}",
        *extra,
    ]


@pytest.fixture
def run_variants(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    golden_project: Path,
    plugin_args: list[str],
) -> Callable[..., pytest.RunResult]:
    """Runs the two variants (control on m-good, candidate on m-bad, the compare gate) live
    with the given extra options, serially or under xdist as ``plugin_args`` says."""
    _manifest(golden_project)

    def run(*extra: str) -> pytest.RunResult:
        return pytester.runpytest(*_live(llm_server, *extra), *plugin_args)

    return run


def test_equal_variants_on_ten_cases_are_not_a_pass(
    run_variants: Callable[..., pytest.RunResult], llm_server: FakeLLMServer, golden_project: Path
) -> None:
    result = run_variants()
    # Ten cases that agree cannot rule out a 5-point drop (the score interval of ten
    # identical outcomes reaches -27.8 pts): INCONCLUSIVE, exit 1, never green.
    assert result.ret == 1, result.stdout.str()
    result.assert_outcomes(passed=20)
    # Before the first item: what 10 paired cases can detect at best, next to the margin.
    result.stdout.fnmatch_lines(
        [
            "variants: candidate vs control on 10 selected cases: no difference under 61.6 pts "
            "can be detected*margin 5.0 pts",
        ]
    )
    assert {r.model for r in llm_server.requests} == {"m-good", "m-bad"}
    runs = _runs(golden_project)
    assert set(runs) == {"control", "candidate"}
    assert runs["control"]["model"] == "m-good" and runs["candidate"]["model"] == "m-bad"
    cmp = runs["candidate"]["variantComparison"]
    assert cmp == runs["control"]["variantComparison"]
    assert cmp["decision"] == "INCONCLUSIVE" and cmp["nonInferiority"] == "UNDERPOWERED"
    assert cmp["cases"] == 10 and cmp["difference"] == 0.0 and cmp["moreCases"] == 63
    assert cmp["ci95"]["method"] == "bootstrap-percentile+newcombe-score"
    assert cmp["mcnemar"]["pValue"] is None  # no discordant case: nothing to test
    assert "INCONCLUSIVE" in runs["candidate"]["exitDecision"]["reason"]
    reports = list((golden_project / ".goldeval/runs").glob("*/report.md"))
    assert len(reports) == 2
    for report in reports:
        text = report.read_text(encoding="utf-8")
        assert "## Variants: candidate vs control" in text
        assert "**INCONCLUSIVE**" in text and "p = n/a (no discordant case)" in text
        assert "| Variant | Latency median | p95 | Tokens | Estimated cost |" in text
    costs = cmp["costs"]
    assert costs["control"]["totalTokens"] > 0 and costs["candidate"]["totalTokens"] > 0
    assert costs["control"]["p95Ms"] >= costs["control"]["medianMs"] >= 0
    # The same answers from the same server: the same tokens case by case, difference 0.
    tokens = cmp["pairedCosts"]["totalTokens"]
    assert tokens["cases"] == 10 and tokens["difference"] == 0.0
    assert tokens["ci95"]["lower"] == tokens["ci95"]["upper"] == 0.0
    assert cmp["pairedCosts"]["latencyMs"]["cases"] == 10
    assert cmp["pairedCosts"]["estimatedCost"] is None  # no prices configured
    pareto = cmp["pareto"]
    assert pareto["costBasis"] == "totalTokens"
    assert [r["variant"] for r in pareto["rows"]] == ["control", "candidate"]
    for report in reports:
        text = report.read_text(encoding="utf-8")
        assert "| Tokens per attempt | 10 |" in text
        assert "| Variant | Model | Pass rate | Tokens | p95 | On the front |" in text


def test_clearly_worse_candidate_is_inferior_and_names_flipped_cases(
    run_variants: Callable[..., pytest.RunResult], llm_server: FakeLLMServer, golden_project: Path
) -> None:
    _break(llm_server, lambda prompt: True)
    html = ("--html=report.html", "--self-contained-html")
    result = run_variants(*html)
    assert result.ret == 1, result.stdout.str()
    page = (golden_project / "report.html").read_text(encoding="utf-8")
    assert "<h3>Variants</h3>" in page
    assert '<span class="goldeval-fail">INFERIOR</span>' in page
    cmp = _runs(golden_project)["candidate"]["variantComparison"]
    assert cmp["decision"] == "INFERIOR"
    assert cmp["ci95"]["upper"] < -0.05
    assert cmp["mcnemar"]["controlOnly"] == len(cmp["flippedWorse"]) > 0
    assert cmp["mcnemar"]["pValue"] < 0.05
    result.stdout.fnmatch_lines(
        [
            "*variant candidate (model m-bad):*",
            "*variants: candidate vs control: INFERIOR*flipped to FAIL*",
            "*goldeval decision: exit 1*INFERIOR*",
        ]
    )
    reports = list((golden_project / ".goldeval/runs").glob("*/report.md"))
    assert all("- Flipped to FAIL: " in p.read_text(encoding="utf-8") for p in reports)


def test_small_difference_is_inconclusive_never_a_pass(
    run_variants: Callable[..., pytest.RunResult], llm_server: FakeLLMServer, golden_project: Path
) -> None:
    _break(llm_server, lambda prompt: "пустой пароль" in prompt)
    result = run_variants("--golden-junit=dash.xml")
    assert result.ret == 1, result.stdout.str()
    cmp = _runs(golden_project)["candidate"]["variantComparison"]
    assert cmp["decision"] == "INCONCLUSIVE"
    # JUnit: one suite per variant and one failed testcase for the pair's verdict.
    xml = ET.parse(golden_project / "dash.xml").getroot()
    suites = {s.get("name"): s for s in xml.iter("testsuite")}
    assert {"goldeval.generation-v1.control", "goldeval.generation-v1.candidate"} <= set(suites)
    (pair,) = suites["goldeval.generation-v1.variants"].iter("testcase")
    assert pair.get("name") == "candidate vs control"
    failure = pair.find("failure")
    assert failure is not None and failure.get("type") == "golden.variants.INCONCLUSIVE"
    assert cmp["ci95"]["lower"] < -0.05 < cmp["ci95"]["upper"]
    assert cmp["moreCases"] >= 1
    result.stdout.fnmatch_lines(["*INCONCLUSIVE, underpowered*more paired cases*not a pass*"])


def test_serial_and_xdist_give_the_same_comparison(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    _manifest(golden_project)
    _break(llm_server, lambda prompt: "пустой пароль" in prompt or "401" in prompt)
    figures = []
    for args in ([], ["-n", "2"]):
        result = pytester.runpytest(*_live(llm_server, "--golden-attempts=2"), *args)
        assert result.ret in (0, 1), result.stdout.str()
        runs = _runs(golden_project)
        # Everything but what holds measured latency, which differs between sessions.
        cmp = runs["candidate"]["variantComparison"]
        measured = ("costs", "pairedCosts", "pareto", "matrix")
        pair = {k: v for k, v in cmp.items() if k not in measured}
        pair["tokens"] = cmp["pairedCosts"]["totalTokens"]
        pair["matrix"] = [
            (row["caseId"], [(c["statuses"], c["totalTokens"]) for c in row["cells"]])
            for row in cmp["matrix"]["rows"]
        ]
        pair["front"] = [
            (r["variant"], r["passRate"], r["totalTokens"]) for r in cmp["pareto"]["rows"]
        ]
        figures.append(
            (
                pair,
                runs["control"]["metrics"]["passAtK"],
                runs["candidate"]["metrics"]["passAtK"],
            )
        )
        for path in (golden_project / ".goldeval/runs").glob("*/run.json"):
            path.unlink()  # the next session's runs only
    assert figures[0] == figures[1]


def test_item_ids_carry_the_variant_and_selection_picks_them(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    _manifest(golden_project)
    listed = pytester.runpytest(*_live(llm_server), "--collect-only", "-q")
    out = listed.stdout.str()
    assert "-attempt1-control]" in out and "-attempt1-candidate]" in out
    assert "m-good" not in out
    one = pytester.runpytest(*_live(llm_server, "--golden-variants=candidate"), "--collect-only")
    assert "-attempt1-candidate]" in one.stdout.str()
    assert "-attempt1-control]" not in one.stdout.str()


def test_bad_selection_and_options_are_usage_errors(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    _manifest(golden_project)
    usage_errors = [
        ("--golden-variants=candidat", "*no variant 'candidat'*did you mean 'candidate'*"),
        (
            "--golden-models=x,y",
            "*--golden-models cannot be combined with the manifest's variants*",
        ),
        ("--golden-model=m-good", "*--golden-model cannot be combined with variants that name*"),
        ("--golden-save-baseline=b.json", "*2 variants run, each with its own baseline*"),
    ]
    for option, message in usage_errors:
        result = pytester.runpytest(*_live(llm_server, option))
        assert result.ret == 4, option
        result.stderr.fnmatch_lines([message])
    # Fixture mode replays each variant's own answers: none recorded is a collection error
    # naming the variant's folder, not the dataset's fixtures replayed twice.
    fixture = pytester.runpytest("--golden=generation-v1", "--golden-variants=control")
    assert fixture.ret not in (0, 1), fixture.stdout.str()
    fixture.stdout.fnmatch_lines(
        [
            "*no recorded answer fixtures/control/*.out.md*--golden-mode=record "
            "--golden-variants=control*"
        ]
    )
    assert llm_server.requests == []


def test_no_variants_block_keeps_the_usual_run(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    result = pytester.runpytest(*_live(llm_server, "--golden-variants=a", "--golden-model=m"))
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*declares no variants*"])


def test_no_gate_writes_the_comparison_without_gating(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    _manifest(golden_project)
    _break(llm_server, lambda prompt: "пустой пароль" in prompt)
    result = pytester.runpytest(*_live(llm_server, "--golden-no-gate"))
    # The FAIL attempt is pytest's 1 (nothing weighs it), not the comparison's verdict.
    assert result.ret == 1, result.stdout.str()
    runs = _runs(golden_project)
    assert runs["candidate"]["variantComparison"]["decision"] == "INCONCLUSIVE"
    assert "no gate" in runs["candidate"]["exitDecision"]["reason"]


def test_one_variant_picked_is_an_ordinary_run_of_its_model(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    _manifest(golden_project)
    result = pytester.runpytest(
        *_live(llm_server, "--golden-variants=candidate", "--golden-no-gate")
    )
    assert result.ret == 0, result.stdout.str()
    assert {r.model for r in llm_server.requests} == {"m-bad"}
    run = _runs(golden_project)["candidate"]
    assert run["model"] == "m-bad" and "variantComparison" not in run


def test_variants_without_a_compare_gate_are_reported_not_gated(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    _manifest(golden_project, compare=False)
    result = pytester.runpytest(*_live(llm_server))
    assert result.ret == 0, result.stdout.str()
    runs = _runs(golden_project)
    assert set(runs) == {"control", "candidate"}
    assert all("variantComparison" not in run for run in runs.values())
    assert any("no gate.compare pair" in note for note in runs["control"]["notes"])


def test_a_lost_item_is_recorded_under_its_variant_s_model(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    """A worker that dies mid-item: the controller reads the variant's name from the item id
    and records the ERROR WORKER_CRASH under that variant's model, in that variant's run."""
    _manifest(golden_project)
    pytester.makeconftest(
        """
import os

def pytest_runtest_call(item):
    if item.nodeid.endswith("[e2e-login-empty-password-attempt1-candidate]"):
        os._exit(1)
"""
    )
    result = pytester.runpytest(*_live(llm_server), "-n", "2")
    assert result.ret == 75, result.stdout.str()
    runs = _runs(golden_project)
    assert set(runs) == {"control", "candidate"}  # no third run named after the label
    (case,) = [c for c in runs["candidate"]["cases"] if c["caseId"] == "e2e-login-empty-password"]
    (attempt,) = case["attempts"]
    assert (attempt["status"], attempt["errorKind"]) == ("ERROR", "WORKER_CRASH")
    assert attempt["model"] == "m-bad"
