"""A variant's own judge (issue 35): ``variants[i].judge.model`` scores that variant's
answers on the session's judge provider, and ``judge.provider`` / ``judge.baseUrl`` send them
to a judge server of its own; the other variants keep the session's judge.

Two real fake model servers on 127.0.0.1: the models under test speak Ollama, the judge
speaks the OpenAI protocol; each judge call is told apart by the model it names.
"""

from __future__ import annotations

import base64
import fnmatch
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from goldeval.testing.llm_server import FakeLLMServer, Reply

VERDICT = '{"decision":"ACCEPT","score":0.9,"reasons":["ok"]}'
VARIANTS = """
variants:
  - {name: control, model: m-good}
  - {name: candidate, model: m-same, judge: {model: judge-alt}}
"""


@pytest.fixture
def judge_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        srv.responder = lambda req: Reply(VERDICT, prompt_tokens=10, completion_tokens=3)
        yield srv


def _manifest(project: Path, variants: str = VARIANTS) -> None:
    path = project / "golden/generation/dataset.yaml"
    path.write_text(path.read_text(encoding="utf-8") + variants, encoding="utf-8")


def _runs(project: Path) -> dict[str, dict[str, Any]]:
    runs = [json.loads(p.read_text()) for p in (project / ".goldeval/runs").glob("*/run.json")]
    return {r["variant"]: r for r in runs}


def _live(llm_server: FakeLLMServer, judge_server: FakeLLMServer, *extra: str) -> list[str]:
    return [
        "--golden=generation-v1",
        "--golden-mode=live",
        f"--golden-base-url={llm_server.base_url}",
        "--golden-no-gate",
        "--golden-judge",
        "--golden-judge-provider=openai",
        f"--golden-judge-base-url={judge_server.openai_base_url}",
        "--golden-judge-model=judge-main",
        *extra,
    ]


def test_a_variant_s_judge_model_scores_its_answers(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    judge_server: FakeLLMServer,
    golden_project: Path,
    plugin_args: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOLDEVAL_JUDGE_API_KEY", "sk-judge-0123456789")
    _manifest(golden_project)
    result = pytester.runpytest(*_live(llm_server, judge_server), *plugin_args)
    assert result.ret == 0, result.stdout.str()
    runs = _runs(golden_project)
    assert runs["control"]["judgeModel"] == "judge-main"
    assert runs["candidate"]["judgeModel"] == "judge-alt"
    assert runs["candidate"]["protocol"]["judgeModel"] == "judge-alt"
    assert runs["control"]["protocol"]["judgeModel"] == "judge-main"
    calls = [r for r in judge_server.requests if r.path == "/v1/chat/completions"]
    by_model: dict[str, list[str]] = {}
    for call in calls:
        by_model.setdefault(call.json["model"], []).append(call.last_user_message or "")
    assert set(by_model) == {"judge-main", "judge-alt"}
    judged = {
        name: sum(1 for c in run["cases"] for a in c["attempts"] if a.get("judge"))
        for name, run in runs.items()
    }
    assert len(by_model["judge-main"]) == judged["control"] > 0
    assert len(by_model["judge-alt"]) == judged["candidate"] > 0


def test_a_variant_judge_is_unused_without_the_session_judge(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    """The judge is the session's choice (--golden-judge): a variant naming a judge model
    in a run without one is run unjudged, like every other variant."""
    _manifest(golden_project)
    result = pytester.runpytest(
        "--golden=generation-v1",
        "--golden-mode=live",
        f"--golden-base-url={llm_server.base_url}",
        "--golden-no-gate",
    )
    assert result.ret == 0, result.stdout.str()
    runs = _runs(golden_project)
    assert runs["candidate"]["protocol"]["judgeModel"] is None
    assert runs["candidate"]["protocol"]["judgeEnabled"] is False


@pytest.mark.parametrize(
    ("judge", "message"),
    [
        ("{model: '  '}", "*variants[[]1[]].judge.model*blank*"),
        ("{model: j, temperature: 0}", "*variants.1.judge.temperature: Extra inputs*"),
        ("judge-alt", "*variants.1.judge: Input should be a valid dictionary*"),
        ("{model: j, baseUrl: ' '}", "*variants[[]1[]].judge.baseUrl*blank*"),
        ("{}", "*variants[[]1[]].judge*names no judge model, provider or baseUrl*"),
    ],
)
def test_bad_variant_judges_name_the_field(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    golden_project: Path,
    judge: str,
    message: str,
) -> None:
    _manifest(golden_project, VARIANTS.replace("{model: judge-alt}", judge))
    result = pytester.runpytest(
        "--golden=generation-v1", "--golden-mode=live", f"--golden-base-url={llm_server.base_url}"
    )
    assert result.ret != 0
    text = result.stdout.str() + result.stderr.str()
    assert fnmatch.fnmatch(text.replace("\n", " "), message), text[-2000:]
    assert not llm_server.requests


def _echoing_verdict(request: Any) -> Reply:
    """A judge that echoes the credentials it was sent in its reasons (a leaky proxy)."""
    sent = request.headers.get("authorization", "")
    verdict = {"decision": "ACCEPT", "score": 0.9, "reasons": [f"called with {sent}"]}
    return Reply(json.dumps(verdict), prompt_tokens=10, completion_tokens=3)


@pytest.fixture
def own_judge_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        srv.responder = _echoing_verdict
        yield srv


def _judge_calls(server: FakeLLMServer) -> list[Any]:
    return [r for r in server.requests if r.path in ("/v1/chat/completions", "/api/chat")]


def test_a_variant_s_judge_on_its_own_server_gets_its_own_credentials(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    judge_server: FakeLLMServer,
    own_judge_server: FakeLLMServer,
    golden_project: Path,
    plugin_args: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``judge: {provider, baseUrl, model}``: that variant's answers are judged on its server,
    with that provider's key (OPENAI_API_KEY), never the session judge's
    (GOLDEVAL_JUDGE_API_KEY); the control's stay on the session's judge server."""
    monkeypatch.setenv("GOLDEVAL_JUDGE_API_KEY", "sk-judge-session-0123456789")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-own-judge-9876543210")
    own = own_judge_server.openai_base_url
    _manifest(
        golden_project,
        VARIANTS.replace(
            "{model: judge-alt}", f"{{provider: openai, baseUrl: '{own}', model: judge-own}}"
        ),
    )
    result = pytester.runpytest(*_live(llm_server, judge_server), *plugin_args)
    assert result.ret == 0, result.stdout.str()
    runs = _runs(golden_project)
    assert runs["candidate"]["judgeModel"] == "judge-own"
    assert runs["control"]["judgeModel"] == "judge-main"
    judged = {
        name: sum(1 for c in run["cases"] for a in c["attempts"] if a.get("judge"))
        for name, run in runs.items()
    }
    session_calls, own_calls = _judge_calls(judge_server), _judge_calls(own_judge_server)
    assert {c.json["model"] for c in session_calls} == {"judge-main"}
    assert {c.json["model"] for c in own_calls} == {"judge-own"}
    assert len(session_calls) == judged["control"] > 0
    assert len(own_calls) == judged["candidate"] > 0
    assert {c.headers.get("authorization") for c in session_calls} == {
        "Bearer sk-judge-session-0123456789"
    }
    assert {c.headers.get("authorization") for c in own_calls} == {"Bearer sk-own-judge-9876543210"}
    # no key in what the run wrote, although the variant's judge echoed its own
    assert any(
        "called with" in str(a.get("judge"))
        for c in runs["candidate"]["cases"]
        for a in c["attempts"]
    )
    for path in (golden_project / ".goldeval").rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            assert "sk-own-judge" not in text and "sk-judge-session" not in text, path


@pytest.mark.parametrize(
    ("judge", "message"),
    [
        (
            "{provider: ollama}",
            "*variants: candidate: judge.provider 'ollama' is not the session judge's*"
            "name judge.model*",
        ),
        ("{provider: nope, model: j}", "*nope*"),
        # a plugin provider too: the run must say which model scored the variant
        (
            "{provider: myplug}",
            "*variants: candidate: judge.provider 'myplug' is not the session judge's*",
        ),
        ("{baseUrl: 'ftp://127.0.0.1:1', model: j}", "*variants: candidate: judge.baseUrl*"),
    ],
)
def test_a_variant_judge_that_cannot_be_made_is_a_usage_error_before_any_call(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    judge_server: FakeLLMServer,
    golden_project: Path,
    judge: str,
    message: str,
) -> None:
    _manifest(golden_project, VARIANTS.replace("{model: judge-alt}", judge))
    result = pytester.runpytest(*_live(llm_server, judge_server))
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    text = (result.stdout.str() + result.stderr.str()).replace("\n", " ")
    assert fnmatch.fnmatch(text, message), text[-2000:]
    assert "Traceback" not in text
    assert not llm_server.requests and not judge_server.requests


def test_credentials_in_a_variant_judge_s_url_are_masked_when_echoed(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    judge_server: FakeLLMServer,
    own_judge_server: FakeLLMServer,
    golden_project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``baseUrl: http://user:password@host``: the password and its ``Basic`` token are the
    run's secrets too, masked where the echoing judge put them (its reasons)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    password = "pw-variant-judge-4321"
    # Ollama's protocol: user and password go as Basic auth (OpenAI's sends only a key).
    own = own_judge_server.base_url.replace("http://", f"http://judge-user:{password}@")
    _manifest(
        golden_project,
        VARIANTS.replace(
            "{model: judge-alt}", f"{{provider: ollama, baseUrl: '{own}', model: judge-own}}"
        ),
    )
    result = pytester.runpytest(*_live(llm_server, judge_server))
    assert result.ret == 0, result.stdout.str()
    token = base64.b64encode(f"judge-user:{password}".encode()).decode()
    sent = {c.headers.get("authorization") for c in _judge_calls(own_judge_server)}
    assert sent == {f"Basic {token}"}  # the judge got its credentials, and echoed them
    runs = _runs(golden_project)
    attempts = [a for c in runs["candidate"]["cases"] for a in c["attempts"]]
    judged = [a["judge"] for a in attempts if a.get("judge")]
    assert judged and all("called with Basic ***" in str(j["reasons"]) for j in judged)
    for path in (golden_project / ".goldeval").rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            assert password not in text and token not in text, path
    assert password not in result.stdout.str() and token not in result.stdout.str()
