"""examples/prompt-ab runs as its README says: both prompt variants replayed from their own
recorded answers (serially and under xdist, the same figures), and one variant re-recorded
from the fake model server on 127.0.0.1 with its own prompt, the other's answers untouched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from goldeval.testing.llm_server import FakeLLMServer, RecordedRequest
from tests.examples.test_examples import copy_example
from tests.helpers import run_cli

DATASET = "golden/faq-ab"
CONCISE_SYSTEM = (
    "You are the bookshop's assistant. Answer in one sentence from the catalogue and cite\n"
    "the document as [doc-id]."
)


def _runs(project: Path) -> dict[str, dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in (project / ".goldeval/runs").glob("*/run.json")]
    return {run["variant"]: run for run in found}


@pytest.mark.parametrize("args", [[], ["-n", "2"]], ids=["serial", "xdist2"])
def test_fixture_mode_gates_on_the_two_prompts(pytester: pytest.Pytester, args: list[str]) -> None:
    project = copy_example("prompt-ab", pytester)
    result = pytester.runpytest("--golden=faq-ab-v1", *args)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=80)
    # The README quotes this line.
    assert (
        "variants: concise vs control: NON_INFERIOR (difference +0.0 pts, 95% CI "
        "[-8.8 pts, +8.8 pts], margin 10.0 pts, 40 paired cases)"
    ) in result.stdout.str()
    result.stdout.fnmatch_lines(["*goldeval decision: exit 0*"])
    runs = _runs(project)
    assert set(runs) == {"control", "concise"}
    cmp = runs["concise"]["variantComparison"]
    assert cmp == runs["control"]["variantComparison"]
    assert cmp["decision"] == "NON_INFERIOR" and cmp["cases"] == 40
    # Forty identical outcomes: the score interval, not a bootstrap collapsed to [0, 0].
    assert cmp["ci95"]["method"] == "bootstrap-percentile+newcombe-score"
    assert cmp["ci95"]["lower"] == pytest.approx(-3.8415 / 43.8415, abs=1e-4)
    assert runs["concise"]["protocol"]["promptHash"] != runs["control"]["protocol"]["promptHash"]
    report = next((project / ".goldeval/runs").glob("*/report.md")).read_text(encoding="utf-8")
    assert "## Variants: concise vs control" in report
    assert "| control (control) | recorded answers | 100.0% |" in report


def test_record_one_variant_with_its_own_prompt(pytester: pytest.Pytester) -> None:
    project = copy_example("prompt-ab", pytester)
    fixtures = project / DATASET / "fixtures"
    control_before = {p.name: p.read_text() for p in (fixtures / "control").iterdir()}
    concise_before = {p.name: p.read_text() for p in (fixtures / "concise").iterdir()}
    rows = [
        json.loads(line)
        for line in (project / DATASET / "faq-ab.jsonl").read_text("utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    by_prompt = {row["prompt"]: row["id"] for row in rows}
    systems: list[str] = []

    def respond(request: RecordedRequest) -> str:
        systems.append(next(m["content"] for m in request.messages if m["role"] == "system"))
        case_id = by_prompt[request.last_user_message or ""]
        answer = concise_before[f"{case_id}.out.md"]
        # The new prompt forgets one citation: the replay must name that row.
        return answer.replace(" [stock]", "") if case_id == "stock-blue-hour" else answer

    with FakeLLMServer() as server:
        server.responder = respond
        recorded = pytester.runpytest(
            "--golden=faq-ab-v1",
            "--golden-mode=record",
            "--golden-variants=concise",
            "--golden-overwrite-fixtures",
            "--golden-provider=openai",
            "--golden-model=fake-llm",
            f"--golden-base-url={server.base_url}",
        )
    assert systems and set(systems) == {CONCISE_SYSTEM}, systems[:1]
    assert len(systems) == 40
    recorded.stdout.fnmatch_lines(["*fixtures changed: *concise/stock-blue-hour*"])
    assert {p.name: p.read_text() for p in (fixtures / "control").iterdir()} == control_before
    after = {p.name: p.read_text() for p in (fixtures / "concise").glob("*.out.md")}
    # The server reported usage: record mode keeps it next to each answer (a sidecar).
    assert len(list((fixtures / "concise").glob("*.out.json"))) == 40
    # (Compared without the trailing newline the committed files have.)
    assert {name for name in after if after[name].strip() != concise_before[name].strip()} == {
        "stock-blue-hour.out.md"
    }

    (project / ".goldeval/runs").rename(project / "recorded-runs")
    replay = pytester.runpytest("--golden=faq-ab-v1")
    assert replay.ret == 1, replay.stdout.str()
    replay.assert_outcomes(passed=79, failed=1)
    cmp = _runs(project)["concise"]["variantComparison"]
    assert cmp["flippedWorse"] == ["stock-blue-hour"] and cmp["decision"] == "INCONCLUSIVE"
    assert cmp["moreCases"] > 0
    # Recorded usage on the concise side only: a paired token figure needs both sides.
    assert cmp["costs"]["candidate"]["totalTokens"] > 0
    assert cmp["costs"]["control"]["totalTokens"] is None
    assert cmp["pairedCosts"]["totalTokens"] is None


def test_deselecting_one_side_of_the_compared_pair_is_not_a_pass(pytester: pytest.Pytester) -> None:
    """``-k concise`` leaves the control's items out: the pair the manifest gates on was not
    weighed, so the session is INCONCLUSIVE (exit 1), not an ordinary green run of one
    variant; ``goldeval gate`` on the run folder says the same."""
    project = copy_example("prompt-ab", pytester)
    result = pytester.runpytest("--golden=faq-ab-v1", "-k", "concise")
    assert result.ret == 1, result.stdout.str()
    result.assert_outcomes(passed=40, deselected=40)
    result.stdout.fnmatch_lines(["*INCONCLUSIVE*no case was graded by both variants*"])
    run = _runs(project)["concise"]
    assert run["variantComparison"]["decision"] == "INCONCLUSIVE"
    assert run["variantComparison"]["cases"] == 0
    run_dir = next((project / ".goldeval/runs").glob("*/run.json")).parent
    gate = run_cli("gate", str(run_dir), cwd=project)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "INCONCLUSIVE" in gate.stdout + gate.stderr
