"""Variants that differ by prompt, recorded per variant and replayed without a model (issue 35):
``--golden-mode=record`` against the fake model server on 127.0.0.1 writes
``fixtures/<variant>/``, then plain fixture mode compares the two prompts, serially and under
two xdist workers (``plugin_args``).

The server answers with the dataset's recorded answers, except that a request whose system
prompt is the candidate's gets "broken" for the empty-password row: the candidate's prompt is
what changed the answer, so only its own template can have reached the server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from goldeval.store import open_store
from goldeval.testing.llm_server import FakeLLMServer

CANDIDATE_SYSTEM = "CANDIDATE prompt: answer row {{ id }} with one Java test."
VARIANTS = f"""
variants:
  - {{name: control}}
  - {{name: candidate, prompt: {{system: "{CANDIDATE_SYSTEM}"}}}}
"""
COMPARE = """
  compare: {control: control, candidate: candidate, nonInferiority: 0.05}
"""
BROKEN_ROW = "e2e-login-empty-password"


def _manifest(project: Path) -> None:
    path = project / "golden/generation/dataset.yaml"
    text = path.read_text(encoding="utf-8").replace("\ngate:\n", "\ngate:" + COMPARE, 1)
    path.write_text(text + VARIANTS, encoding="utf-8")


def _system_of(request: Any) -> str:
    return next((m.get("content") or "" for m in request.messages if m["role"] == "system"), "")


def _runs(project: Path) -> dict[str, dict[str, Any]]:
    runs = [json.loads(p.read_text()) for p in (project / ".goldeval/runs").glob("*/run.json")]
    return {r["variant"]: r for r in runs}


@pytest.fixture
def recorded(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    golden_project: Path,
    plugin_args: list[str],
) -> pytest.RunResult:
    """Both variants recorded from the fake server (the candidate's prompt breaks one row)."""
    _manifest(golden_project)
    replay = llm_server.responder

    def responder(req: Any) -> Any:
        if _system_of(req).startswith("CANDIDATE") and "пустой пароль" in (
            req.last_user_message or ""
        ):
            return "broken"
        return replay(req)

    llm_server.responder = responder
    return pytester.runpytest(
        "--golden=generation-v1",
        "--golden-mode=record",
        f"--golden-base-url={llm_server.base_url}",
        "--golden-model=m-one",
        *plugin_args,
    )


def test_record_writes_each_variant_s_answers_from_its_own_prompt(
    recorded: pytest.RunResult, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    dataset = golden_project / "golden/generation"
    ids = sorted(p.name.removesuffix(".out.md") for p in (dataset / "fixtures").glob("*.out.md"))
    assert len(ids) == 10
    # Ten rows per variant, one model: the candidate's calls carry its own system template,
    # rendered per row; the control's carry the profile's system prompt.
    # (As sets: a call the client retried under load reaches the server twice.)
    calls = [r for r in llm_server.requests if r.messages]
    assert {r.model for r in calls} == {"m-one"}
    candidate = {_system_of(r) for r in calls if _system_of(r).startswith("CANDIDATE")}
    assert candidate == {f"CANDIDATE prompt: answer row {i} with one Java test." for i in ids}
    control = [r for r in calls if not _system_of(r).startswith("CANDIDATE")]
    assert {r.last_user_message for r in control} == {
        r.last_user_message for r in calls if _system_of(r).startswith("CANDIDATE")
    }
    assert all(_system_of(r).startswith("Ты QA-агент") for r in control)
    for case_id in ids:
        kept = (dataset / "fixtures" / f"{case_id}.out.md").read_text(encoding="utf-8")
        control = (dataset / "fixtures/control" / f"{case_id}.out.md").read_text(encoding="utf-8")
        assert control == kept
        answer = (dataset / "fixtures/candidate" / f"{case_id}.out.md").read_text(encoding="utf-8")
        assert answer == ("broken" if case_id == BROKEN_ROW else kept)
    recorded.stdout.fnmatch_lines([f"*fixtures new: *candidate/{BROKEN_ROW}*"])
    runs = _runs(golden_project)
    assert runs["candidate"]["protocol"]["variant"] == "candidate"
    assert runs["candidate"]["protocol"]["promptHash"]
    # The control sends no template of its own and the manifest has none: no prompt hash.
    assert runs["control"]["protocol"]["promptHash"] is None
    assert runs["control"]["model"] == runs["candidate"]["model"] == "m-one"


def test_fixture_mode_compares_the_recorded_prompts_without_a_model(
    recorded: pytest.RunResult,
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    golden_project: Path,
    plugin_args: list[str],
) -> None:
    # The record session's runs out of the way: what follows reads the replay's.
    (golden_project / ".goldeval/runs").rename(golden_project / "recorded-runs")
    calls = len(llm_server.requests)
    result = pytester.runpytest("--golden=generation-v1", *plugin_args)
    assert len(llm_server.requests) == calls  # replayed: no model was asked
    result.assert_outcomes(passed=19, failed=1)
    result.stdout.fnmatch_lines(
        ["FAILED *test_golden?e2e-login-empty-password-attempt1-candidate?*"]
    )
    result.stdout.fnmatch_lines(["*variant candidate (recorded answers):*"])
    runs = _runs(golden_project)
    assert set(runs) == {"control", "candidate"}
    assert {r["configuration"]["goldenMode"] for r in runs.values()} == {"fixture"}
    assert runs["control"]["metrics"]["overallPassRate"]["rate"] == 1.0
    assert runs["candidate"]["metrics"]["overallPassRate"]["rate"] == 0.9
    cmp = runs["candidate"]["variantComparison"]
    assert cmp == runs["control"]["variantComparison"]
    assert cmp["cases"] == 10 and cmp["flippedWorse"] == [BROKEN_ROW]
    assert cmp["flippedBetter"] == [] and cmp["difference"] == pytest.approx(-0.1)
    # One flipped case in ten cannot show non-inferiority within 5 points: never green.
    assert cmp["decision"] == "INCONCLUSIVE"
    assert result.ret == 1
    assert runs["candidate"]["protocol"]["promptHash"]
    assert runs["candidate"]["protocol"]["mode"] == runs["control"]["protocol"]["mode"]
    # The rows × variants matrix: the flipped row first, both variants' statuses side by side.
    matrix = cmp["matrix"]
    assert matrix["variants"] == ["control", "candidate"] and matrix["more"] == 0
    assert [c["statuses"] for c in matrix["rows"][0]["cells"]] == [["PASS"], ["FAIL"]]
    assert matrix["rows"][0]["caseId"] == BROKEN_ROW and len(matrix["rows"]) == 10
    report = next((golden_project / ".goldeval/runs").glob("*/report.md")).read_text("utf-8")
    assert f"| {BROKEN_ROW} | P · " in report
    # The session's store run keeps both variants' attempts (no model in fixture mode: they
    # are keyed by variant, not folded onto one another).
    with open_store(str(golden_project / ".goldeval/goldeval.sqlite3")) as store:
        (fixture_run,) = [r for r in store.runs(10) if r.mode == "DETERMINISTIC"]
        assert store.attempt_counts(fixture_run.run_id) == {"PASS": 19, "FAIL": 1}


def test_a_variant_template_the_rows_cannot_fill_is_refused_at_collection(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    path = golden_project / "golden/generation/dataset.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text
        + "variants:\n  - {name: control}\n  - {name: terse, prompt: {user: '{{ question }}'}}\n",
        encoding="utf-8",
    )
    result = pytester.runpytest("--golden=generation-v1")
    assert result.ret not in (0, 1)
    result.stdout.fnmatch_lines(
        ["*golden-generation.jsonl:2: prompt.user: variant 'terse'*{{ question }}*defines no*"]
    )
