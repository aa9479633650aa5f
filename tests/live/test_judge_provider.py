"""The judge on its own provider, base URL and credentials; its tokens counted apart (issue 17).

Two real fake model servers on 127.0.0.1: the model under test speaks Ollama, the judge speaks
the OpenAI protocol with a bearer key of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from goldeval.testing.llm_server import FakeLLMServer, RecordedRequest, Reply
from tests.helpers import RunFiles, chat_calls

JUDGE_KEY = "sk-judge-0123456789abcdef"
CHAT_KEY = "sk-chat-fedcba9876543210"
VERDICT = '{"decision":"ACCEPT","score":0.9,"reasons":["ok"]}'
LIVE = (
    "--golden=generation-v1",
    "--golden-mode=live",
    "--golden-model=fake-llm:latest",
    "--golden-no-gate",
    "--golden-judge",
    "-p",
    "no:cacheprovider",
)


@pytest.fixture
def judge_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        srv.responder = lambda req: Reply(VERDICT, prompt_tokens=100, completion_tokens=7)
        yield srv


def _all_text(root: Path) -> str:
    parts = []
    for path in root.rglob("*"):
        if path.is_file() and ".goldeval" in path.parts:
            parts.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def test_judge_uses_its_own_provider_url_and_key_and_counts_its_tokens(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    judge_server: FakeLLMServer,
    run_files: RunFiles,
    monkeypatch: pytest.MonkeyPatch,
    golden_project: Path,
) -> None:
    monkeypatch.setenv("GOLDEVAL_JUDGE_API_KEY", JUDGE_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", CHAT_KEY)  # the chat provider's key: not the judge's
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-judge-provider=openai",
        f"--golden-judge-base-url={judge_server.openai_base_url}",
        "--golden-judge-model=judge-m",
    )
    assert result.ret == 0, result.stdout.str()
    run = run_files.latest()
    judged = [a for c in run["cases"] for a in c["attempts"] if a.get("judge")]
    assert judged and all(a["judge"]["decision"] == "ACCEPT" for a in judged)
    # every judge call went to the judge server, with the judge's key; none to the model's
    assert chat_calls(llm_server) == 10
    calls = [r for r in judge_server.requests if r.path == "/v1/chat/completions"]
    assert len(calls) == len(judged)
    assert {r.headers.get("authorization") for r in calls} == {f"Bearer {JUDGE_KEY}"}
    assert {r.json["model"] for r in calls} == {"judge-m"}
    assert all("CANDIDATE:" in (r.last_user_message or "") for r in calls)
    assert not any("CANDIDATE:" in (r.last_user_message or "") for r in llm_server.requests)
    # the judge's tokens are counted, labelled apart from the model's own totals
    tokens = run["metrics"]["tokens"]
    assert tokens["judge"] == {
        "inputTokens": 100 * len(judged),
        "outputTokens": 7 * len(judged),
        "totalTokens": 107 * len(judged),
    }
    model_total = sum(
        a["tokens"].get("totalTokens", 0) for c in run["cases"] for a in c["attempts"]
    )
    assert tokens["totalTokens"] == model_total
    assert all(a["judge"]["tokens"]["totalTokens"] == 107 for a in judged)
    text = _all_text(golden_project) + result.stdout.str() + result.stderr.str()
    assert JUDGE_KEY not in text and CHAT_KEY not in text


def test_judge_key_echoed_in_an_error_is_masked(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    judge_server: FakeLLMServer,
    run_files: RunFiles,
    monkeypatch: pytest.MonkeyPatch,
    golden_project: Path,
) -> None:
    monkeypatch.setenv("GOLDEVAL_JUDGE_API_KEY", JUDGE_KEY)

    def echo(req: RecordedRequest) -> Any:
        auth = req.headers.get("authorization")
        return Reply(status=500, error={"message": f"judge denied: {auth}"})

    judge_server.responder = echo
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-retries=0",
        "--golden-judge-provider=openai",
        f"--golden-judge-base-url={judge_server.openai_base_url}",
        "--golden-judge-model=judge-m",
        "--golden-artifacts=always",
    )
    run = run_files.latest()
    errors = [
        a["judge"]["error"]
        for c in run["cases"]
        for a in c["attempts"]
        if a.get("judge", {}).get("error")
    ]
    assert errors, result.stdout.str()
    assert all("judge denied" in e for e in errors)
    assert judge_server.requests  # the key really was sent and echoed back
    text = _all_text(golden_project) + result.stdout.str() + result.stderr.str()
    assert JUDGE_KEY not in text


def test_judge_on_the_same_provider_keeps_the_generation_url(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    run_files: RunFiles,
) -> None:
    replay = llm_server.responder

    def respond(req: RecordedRequest) -> Any:
        if "CANDIDATE:" in (req.last_user_message or ""):
            return Reply(VERDICT, prompt_tokens=50, completion_tokens=5)
        return replay(req)

    llm_server.responder = respond
    result = pytester.runpytest(*LIVE, f"--golden-base-url={llm_server.base_url}")
    assert result.ret == 0, result.stdout.str()
    run = run_files.latest()
    judged = [a for c in run["cases"] for a in c["attempts"] if a.get("judge")]
    assert judged
    assert run["metrics"]["tokens"]["judge"]["totalTokens"] == 55 * len(judged)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--golden-judge-provider=openai"],
            [
                "--golden-judge-provider=openai differs from the generation provider",
                "--golden-judge-model",
            ],
        ),
        (
            [
                "--golden-judge-provider=openai",
                "--golden-judge-model=j",
                "--golden-judge-base-url=ftp://user:hunter2pass@example.test",
            ],
            ["judge: --golden-judge-base-url: unsupported scheme 'ftp'"],
        ),
        (
            ["--golden-judge-provider=nosuch", "--golden-judge-model=j"],
            ["unknown judge provider 'nosuch'"],
        ),
    ],
    ids=["no-model", "bad-url", "unknown"],
)
def test_bad_judge_options_are_usage_errors(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    args: list[str],
    expected: list[str],
) -> None:
    result = pytester.runpytest(*LIVE, f"--golden-base-url={llm_server.base_url}", *args)
    assert result.ret == 4
    out = result.stdout.str() + result.stderr.str()
    assert all(e in out for e in expected), out
    assert "hunter2pass" not in out
    assert "Traceback" not in out
    assert chat_calls(llm_server) == 0  # refused before any model call


ASYNC_JUDGE = """
import asyncio, os
from pathlib import Path
from goldeval.providers.base import Answer

class AsyncJudge:  # no Provider subclass: duck-typed, async complete and aclose
    name = "asyncjudge"

    def __init__(self, settings):
        self.settings = settings

    async def complete(self, request):
        await asyncio.sleep(0)
        return Answer(text='{"decision":"REJECT","score":0.2,"reasons":["terse"]}',
                      input_tokens=11, output_tokens=2)

    async def aclose(self):
        Path("judge-closed.txt").write_text(
            f"{self.settings.model} key-from-env="
            f"{self.settings.api_key == os.environ['GOLDEVAL_JUDGE_API_KEY']}"
        )

def pytest_goldeval_make_provider(config, name, settings):
    if name == "asyncjudge":
        return AsyncJudge(settings)
"""


def test_judge_on_a_registered_async_provider(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    run_files: RunFiles,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOLDEVAL_JUDGE_API_KEY", JUDGE_KEY)
    pytester.makeconftest(ASYNC_JUDGE)
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-judge-provider=asyncjudge",
        "--golden-judge-model=j1",
    )
    assert result.ret == 0, result.stdout.str()
    run = run_files.latest()
    judged = [a for c in run["cases"] for a in c["attempts"] if a.get("judge")]
    assert judged and all(a["judge"]["decision"] == "REJECT" for a in judged)
    assert run["metrics"]["tokens"]["judge"]["totalTokens"] == 13 * len(judged)
    assert chat_calls(llm_server) == 10  # the judge never called the model's server
    assert (pytester.path / "judge-closed.txt").read_text() == "j1 key-from-env=True"
