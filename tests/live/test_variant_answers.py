"""Answers side by side (issue 35): the matrix's answer excerpts and the flipped cases' word
diff, against the real fake model server on 127.0.0.1, serially and under two xdist workers.

``control`` (m-good) answers with the recorded answers; ``candidate`` (m-bad) answers
"broken <script>~~x~~" to the rows about one product, so those cases flip to FAIL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from goldeval.core.limits import default
from goldeval.testing.llm_server import FakeLLMServer
from tests.live.test_variants import _break, _live, _manifest

BROKEN = "broken <script>~~x~~"


def _runs(project: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in (project / ".goldeval/runs").glob("*/run.json")]


def test_flipped_cases_show_both_answers_and_a_word_diff(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    golden_project: Path,
    plugin_args: list[str],
) -> None:
    _manifest(golden_project)
    replay = llm_server.responder

    def responder(req: Any) -> Any:
        if req.model == "m-bad":
            return BROKEN
        return replay(req)

    llm_server.responder = responder
    result = pytester.runpytest(
        *_live(llm_server, "--html=report.html", "--self-contained-html"), *plugin_args
    )
    assert result.ret == 1, result.stdout.str()
    (cmp,) = {json.dumps(r["variantComparison"], sort_keys=True) for r in _runs(golden_project)}
    comparison = json.loads(cmp)
    answers = comparison["answers"]
    assert [a["caseId"] for a in answers] == comparison["flippedWorse"]
    assert len(answers) == 10
    limit = int(default("answer_excerpt_chars"))
    for answer in answers:
        assert answer["direction"] == "worse"
        assert answer["candidate"] == BROKEN
        control = answer["control"]
        assert control and len(control) <= limit and control != BROKEN
        diff = answer["diff"]
        # the diff rebuilds both sides
        assert "".join(s["text"] for s in diff if s["op"] in "=-") == control
        assert "".join(s["text"] for s in diff if s["op"] in "=+") == BROKEN
        assert answer["truncated"] == (len(control) == limit)
    matrix = comparison["matrix"]
    first = matrix["rows"][0]
    assert first["cells"][1]["excerpt"] == BROKEN
    assert first["cells"][0]["excerpt"] == answers[0]["control"]
    report = next((golden_project / ".goldeval/runs").glob("*/report.md")).read_text("utf-8")
    assert "Answers side by side (flipped cases;" in report
    # the answer's markup is escaped: no raw tag, no strike-through of its own
    assert "**broken** " in report or "**broken &lt;script&gt;\\~\\~x\\~\\~**" in report
    assert "<script>" not in report and "~~x~~" not in report
    page = (golden_project / "report.html").read_text(encoding="utf-8")
    assert '<table class="goldeval-answers">' in page
    # words matched by the diff: the spaces the answers share stay unmarked
    assert "<ins>broken</ins>" in page and "<ins>&lt;script&gt;~~x~~</ins>" in page
    assert "<del>RAG:</del>" in page
    assert "<script>~~x~~" not in page
    assert f'<span class="goldeval-excerpt">{"broken &lt;script&gt;~~x~~"}</span>' in page


def test_the_lowest_attempt_s_answer_is_the_excerpt(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    _manifest(golden_project, compare=True)
    replay = llm_server.responder
    seen: dict[tuple[str, str], int] = {}

    def responder(req: Any) -> Any:
        key = (req.model, req.last_user_message or "")
        seen[key] = seen.get(key, 0) + 1
        if req.model == "m-bad":
            return f"call {seen[key]}"
        return replay(req)

    llm_server.responder = responder
    pytester.runpytest(*_live(llm_server, "--golden-attempts=3", "-p", "no:randomly"))
    (run_json,) = [
        p
        for p in (golden_project / ".goldeval/runs").glob("*/run.json")
        if json.loads(p.read_text())["variant"] == "candidate"
    ]
    rows = json.loads(run_json.read_text())["variantComparison"]["matrix"]["rows"]
    assert len(rows) == 10
    for row in rows:
        cell = row["cells"][1]
        assert cell["statuses"] == ["FAIL"] * 3
        # calls are concurrent: attempt 1 is not always the first call, but its answer is kept
        first = run_json.parent / "cases" / row["caseId"] / "attempts/1/output.md"
        assert cell["excerpt"] == first.read_text(encoding="utf-8").strip()


def test_break_helper_still_flips_only_the_picked_rows(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    """Cases that did not flip are not shown side by side; equal answers have no diff."""
    _manifest(golden_project)
    _break(llm_server, lambda prompt: "refund" in prompt.lower())
    pytester.runpytest(*_live(llm_server))
    cmp = _runs(golden_project)[0]["variantComparison"]
    assert [a["caseId"] for a in cmp["answers"]] == cmp["flippedWorse"]
    assert len(cmp["answers"]) < 10


def test_no_answer_text_with_artifacts_never(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    """``--golden-artifacts=never``: the matrix and the side-by-side answers keep no answer
    excerpts (the graders' own violation messages may still quote a few words of an answer,
    as before)."""
    _manifest(golden_project)
    replay = llm_server.responder
    llm_server.responder = lambda req: BROKEN if req.model == "m-bad" else replay(req)
    pytester.runpytest(*_live(llm_server, "--golden-artifacts=never"))
    for run in _runs(golden_project):
        cmp = run["variantComparison"]
        assert all(c["excerpt"] is None for row in cmp["matrix"]["rows"] for c in row["cells"])
        assert cmp["answers"] and all(
            a["control"] is None and a["candidate"] is None for a in cmp["answers"]
        )
