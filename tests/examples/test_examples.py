"""Each example project runs as documented: copied into a pytester folder and run there."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from goldeval.testing.llm_server import FakeLLMServer, RecordedRequest, Reply
from tests.helpers import ROOT, RunFiles

EXAMPLES = ROOT / "examples"
IGNORED = shutil.ignore_patterns(".goldeval", "__pycache__", ".pytest_cache", "*.pyc")
QUICKSTART_GRADERS = {
    "cites": (5, 5),
    "contains_any": (3, 3),
    "exact": (1, 1),
    "json_schema": (1, 1),
    "must_not": (2, 2),
    "number": (2, 2),
    "regex": (2, 2),
}


def copy_example(name: str, pytester: pytest.Pytester) -> Path:
    shutil.copytree(EXAMPLES / name, pytester.path, ignore=IGNORED, dirs_exist_ok=True)
    return pytester.path


def rates(run: dict[str, Any], key: str) -> dict[str, tuple[int, int]]:
    return {k: (v["hits"], v["total"]) for k, v in run["metrics"][key].items()}


@pytest.fixture
def quickstart(pytester: pytest.Pytester) -> RunFiles:
    return RunFiles(copy_example("quickstart", pytester))


@pytest.mark.parametrize("args", [[], ["-n", "2"]], ids=["serial", "xdist2"])
def test_quickstart_fixture_mode(
    pytester: pytest.Pytester, quickstart: RunFiles, args: list[str]
) -> None:
    result = pytester.runpytest("--golden=faq-v1", *args)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=9)
    result.stdout.fnmatch_lines(
        [
            "*goldeval: faq-v1 (fixture)*",
            "*Overall*100.0% (9 / 9)*",
            "*goldeval decision: exit 0 — GATE PASS: 4 rules passed*",
        ]
    )
    run = quickstart.latest()
    assert run["protocol"]["datasetId"] == "faq-v1"
    assert run["protocol"]["packId"] is None and run["protocol"]["mode"] == "DETERMINISTIC"
    assert (
        run["metrics"]["overallPassRate"]["hits"],
        run["metrics"]["overallPassRate"]["total"],
    ) == (9, 9)
    assert run["metrics"]["contractPassRate"]["rate"] is None  # no contract rows: n/a, not 100%
    assert run["metrics"]["retrievalPassRate"]["total"] == 0
    assert rates(run, "graders") == QUICKSTART_GRADERS
    assert run["comparison"]["decision"] == "NO_REGRESSION"
    assert run["baselinePath"].endswith("baselines/faq-v1.json")
    assert [r["name"] for r in run["qualityGate"]["rules"]] == [
        "overallPassRate",
        "grader.cites",
        "grader.contains_any",
        "grader.json_schema",
    ]


def test_quickstart_live_mode_calls_the_app(
    pytester: pytest.Pytester, quickstart: RunFiles
) -> None:
    result = pytester.runpytest("--golden=faq-v1", "--golden-mode=live", "--golden-model=faqbot")
    assert result.ret == 0, result.stdout.str()
    run = quickstart.latest()
    assert run["protocol"]["mode"] == "LIVE" and run["protocol"]["model"] == "faqbot"
    assert run["baselinePath"].endswith("baselines/live-faq-v1.json")
    assert run["comparison"]["decision"] == "NO_REGRESSION"
    assert run["qualityGate"]["verdict"] == "PASS"
    assert rates(run, "graders") == QUICKSTART_GRADERS


def test_quickstart_a_broken_answer_fails_the_gate(
    pytester: pytest.Pytester, quickstart: RunFiles
) -> None:
    fixture = quickstart.root / "golden" / "faq" / "fixtures" / "shipping-cost.out.md"
    fixture.write_text("Standard shipping costs 4.95 EUR.", encoding="utf-8")  # citation lost
    result = pytester.runpytest("--golden=faq-v1")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*cites: missing citation 'shipping'*",
            "*GATE FAIL: overallPassRate (0.889 < 1.000), grader.cites*",
        ]
    )
    run = quickstart.latest()
    assert run["comparison"]["counts"]["NEW_FAILURE"] == 1


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("quickstart_faqbot", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quickstart_fixtures_are_the_apps_current_answers() -> None:
    """The recorded fixtures are what faqbot answers today (re-record when the bot changes)."""
    bot = _load(EXAMPLES / "quickstart" / "faqbot.py")
    dataset = EXAMPLES / "quickstart" / "golden" / "faq"
    rows = [
        json.loads(line)
        for line in (dataset / "faq.jsonl").read_text("utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert len(rows) >= 8
    for row in rows:
        recorded = (dataset / "fixtures" / f"{row['id']}.out.md").read_text("utf-8")
        assert bot.answer(row["prompt"]) == recorded, row["id"]


def test_quickstart_uses_several_general_graders() -> None:
    rows = (EXAMPLES / "quickstart" / "golden" / "faq" / "faq.jsonl").read_text("utf-8")
    for key in (
        "contains_any",
        "regex",
        "not_regex",
        "equals",
        "normalize",
        "json_schema",
        "cites",
        "number",
        "must_not",
    ):
        assert f'"{key}"' in rows, key


@pytest.fixture
def custom_grader(pytester: pytest.Pytester) -> RunFiles:
    return RunFiles(copy_example("custom-grader", pytester))


@pytest.mark.parametrize("args", [[], ["-n", "2"]], ids=["serial", "xdist2"])
def test_custom_grader_dataset(
    pytester: pytest.Pytester, custom_grader: RunFiles, args: list[str]
) -> None:
    result = pytester.runpytest("--golden=api-payloads-v1", *args)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=4)
    run = custom_grader.latest()
    assert rates(run, "graders") == {
        "contains_any": (1, 1),
        "json_keys_snake_case": (4, 4),
        "json_schema": (1, 1),
    }
    assert [r["name"] for r in run["qualityGate"]["rules"]] == [
        "overallPassRate",
        "grader.json_keys_snake_case",
    ]


def test_custom_grader_own_tests(pytester: pytest.Pytester, custom_grader: RunFiles) -> None:
    result = pytester.runpytest_subprocess("tests", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=11)


# -- support-bot and sql: templates, conversations, tools, JSON schema (fixture and live) ------


def _replaying_server(dataset: Path) -> FakeLLMServer:
    """A real server on 127.0.0.1 answering each row's recorded answer, found by the row's
    question (``vars.question``) or a conversation's last user text inside the last user
    message sent (the templates wrap the question)."""
    answers: dict[str, str] = {}
    for line in next(dataset.glob("*.jsonl")).read_text("utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        row = json.loads(line)
        if "messages" in row:
            content = row["messages"][-1]["content"]
            key = content if isinstance(content, str) else content[0]["text"]
        else:
            key = row["vars"]["question"]
        answers[key] = (dataset / "fixtures" / f"{row['id']}.out.md").read_text("utf-8")

    def respond(request: RecordedRequest) -> Reply | str:
        sent = request.last_user_message or ""
        for key, text in answers.items():
            if key in sent:
                return text
        return Reply(status=404, error=f"no recorded answer for {sent!r}")

    srv = FakeLLMServer()
    srv.responder = respond
    return srv


@pytest.mark.parametrize("mode", ["fixture", "ollama", "openai"])
def test_support_bot_example(pytester: pytest.Pytester, mode: str) -> None:
    files = RunFiles(copy_example("support-bot", pytester))
    if mode == "fixture":
        result = pytester.runpytest("--golden=support-v1")
    else:
        with _replaying_server(pytester.path / "golden" / "support") as srv:
            result = pytester.runpytest(
                "--golden=support-v1",
                "--golden-mode=live",
                "--golden-model=fake-llm:latest",
                f"--golden-provider={mode}",
                f"--golden-base-url={srv.base_url}",
                # baselines/live-support-v1.json was captured over Ollama: the OpenAI run is
                # another protocol, reported without the gate
                *(["--golden-no-gate"] if mode == "openai" else []),
            )
            bodies = [r.json for r in srv.requests if r.json and "messages" in r.json]
        assert len(bodies) == 5
        assert all(b["tools"][0]["function"]["name"] == "order_status" for b in bodies)
        intro = "You are the support assistant of Pageturner Books."
        assert all(b["messages"][0]["content"].startswith(intro) for b in bodies)
        roles = sorted(len(b["messages"]) for b in bodies)
        assert roles == [2, 2, 2, 2, 5]  # the conversation: system + its four turns
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=5)
    run = files.latest()
    assert run["protocol"]["profile"] == "generic" and run["protocol"]["packId"] is None
    assert set(run["metrics"]["slices"]) == {
        "tag:delivery",
        "tag:returns",
        "tag:conversation",
        "tag:scope",
    }
    if mode != "openai":
        assert run["qualityGate"]["verdict"] == "PASS"
    assert "Negative" not in result.stdout.str() and "Contract" not in result.stdout.str()


@pytest.mark.parametrize("mode", ["fixture", "ollama", "openai"])
def test_sql_example(pytester: pytest.Pytester, mode: str) -> None:
    files = RunFiles(copy_example("sql", pytester))
    if mode == "fixture":
        result = pytester.runpytest("--golden=sql-v1")
    else:
        with _replaying_server(pytester.path / "golden" / "orders") as srv:
            result = pytester.runpytest(
                "--golden=sql-v1",
                "--golden-mode=live",
                "--golden-model=fake-llm:latest",
                f"--golden-provider={mode}",
                f"--golden-base-url={srv.base_url}",
                "--golden-no-gate",
            )
            bodies = [r.json for r in srv.requests if r.json and "messages" in r.json]
        assert len(bodies) == 4
        for body in bodies:
            if mode == "openai":
                assert body["response_format"]["type"] == "json_schema"
                assert body["response_format"]["json_schema"]["schema"]["required"] == [
                    "sql",
                    "tables",
                ]
                assert body["max_tokens"] == 200 and body["seed"] == 1
            else:
                assert body["format"]["required"] == ["sql", "tables"]
                assert body["options"]["num_predict"] == 200 and body["options"]["seed"] == 1
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=4)
    run = files.latest()
    assert rates(run, "graders") == {"json_schema": (4, 4), "regex": (4, 4)}
