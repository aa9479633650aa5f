"""A whole answer whose envelope says it is not finished is never a PASS (found by a probe).

Streamed, an answer with no ``done``/finish reason was already ERROR TRUNCATED_STREAM; the
same answer sent whole (Ollama ``done: false``, OpenAI ``finish_reason: null``) was graded and
passed. A ``content_filter`` finish passed as a whole answer too: it is cut like
``length`` now (the manifest's ``truncated`` policy: a hard FAIL by default).
"""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from goldeval.testing.llm_server import FakeLLMServer, Reply
from tests.helpers import BOT_ANSWERS, make_bot_dataset

GATE = "    thresholds:\n      overallPassRate: 0.5\n"


def _answer(request: Any) -> str:
    text = request.last_user_message or ""
    return next((a for cid, a in BOT_ANSWERS.items() if cid in text), "?")


def _ollama(done: bool) -> Any:
    def respond(request: Any) -> Reply:
        body = {"model": "m", "message": {"role": "assistant", "content": _answer(request)}}
        return Reply(raw_body=json.dumps({**body, "done": done}).encode())

    return respond


def _openai(finish_reason: str | None) -> Any:
    def respond(request: Any) -> Reply:
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": _answer(request)},
            "finish_reason": finish_reason,
        }
        return Reply(raw_body=json.dumps({"model": "m", "choices": [choice]}).encode())

    return respond


def _live_run(
    pytester: pytest.Pytester, responder: Any, provider: str = "ollama", retries: int = 0
) -> tuple[Any, list[Any]]:
    """The bot dataset run live against a local server answering with ``responder``, ungated
    (the verdict weighs the attempts only): pytest's result and the requests it sent."""
    make_bot_dataset(pytester.path, GATE)
    with FakeLLMServer() as srv:
        srv.responder = responder
        url = srv.openai_base_url if provider == "openai" else srv.base_url
        result = pytester.runpytest(
            "-p",
            "no:cacheprovider",
            "--golden=bot-v1",
            "--golden-mode=live",
            f"--golden-provider={provider}",
            "--golden-model=m",
            f"--golden-base-url={url}",
            f"--golden-retries={retries}",
            "--golden-no-gate",
        )
        return result, srv.requests


CASES = {
    "ollama done false": ("ollama", _ollama(False), 75, "done: false"),
    "ollama done true": ("ollama", _ollama(True), 0, None),
    "openai finish null": ("openai", _openai(None), 75, "finish_reason: null"),
    "openai stop": ("openai", _openai("stop"), 0, None),
    "openai content filter": ("openai", _openai("content_filter"), 1, "content filter"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_unfinished_whole_answer_is_not_a_pass(pytester: pytest.Pytester, case: str) -> None:
    provider, responder, code, said = CASES[case]
    result, _ = _live_run(pytester, responder, provider)
    out = result.stdout.str()
    assert result.ret == code, out[-3000:]
    if said is not None:
        assert said in out, out[-3000:]


def _compressed(layers: int) -> Any:
    def respond(request: Any) -> Reply:
        body = json.dumps(
            {
                "model": "m",
                "message": {"role": "assistant", "content": _answer(request)},
                "done": True,
            }
        ).encode()
        for _ in range(layers):
            body = gzip.compress(body)
        return Reply(raw_body=body, headers={"Content-Encoding": ", ".join(["gzip"] * layers)})

    return respond


@pytest.mark.parametrize(("layers", "code"), [(1, 0), (2, 4)])
def test_a_body_compressed_more_than_once_is_refused_unread(
    pytester: pytest.Pytester, layers: int, code: int
) -> None:
    """A probe: 3.5 KB of "Content-Encoding: gzip, gzip" inflated to 2 GiB in memory before
    the response_bytes bound saw it (httpx inflates every layer of a piece first)."""
    result, _ = _live_run(pytester, _compressed(layers))
    out = result.stdout.str()
    assert result.ret == code, out[-3000:]
    if layers > 1:
        assert "RESPONSE_TOO_LARGE" in out and "compressed 2 times over (gzip, gzip)" in out


def test_a_redirect_is_a_base_url_mistake_not_retried(pytester: pytest.Pytester) -> None:
    """A probe: a 307 was HTTP_ERROR, retried and 75 ("retry the run"); a redirect is a base
    URL to fix (exit 4), not followed, and its Location is shown without credentials."""
    moved = Reply(
        status=307,
        raw_body=b"moved",
        headers={"Location": "https://127.0.0.1:1/api/chat?api_key=planted-KEY-123456"},
    )
    result, requests = _live_run(pytester, lambda request: moved, retries=2)
    chats = [r for r in requests if r.path.endswith("/api/chat")]
    out = result.stdout.str()
    assert result.ret == 4, out[-3000:]
    assert "CONFIG_ERROR" in out and "redirects to https://127.0.0.1:1/api/chat?api_key=***" in out
    assert "planted-KEY" not in out
    assert len(chats) == 2  # one per row: not retried
