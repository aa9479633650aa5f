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


def _ollama(done: bool, done_reason: str | None = None, content: str | None = None) -> Any:
    def respond(request: Any) -> Reply:
        text = _answer(request) if content is None else content
        body: dict[str, Any] = {"model": "m", "message": {"role": "assistant", "content": text}}
        if done_reason is not None:
            body["done_reason"] = done_reason
        return Reply(raw_body=json.dumps({**body, "done": done}).encode())

    return respond


def _openai(finish_reason: str | None, **message: Any) -> Any:
    def respond(request: Any) -> Reply:
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": _answer(request), **message},
            "finish_reason": finish_reason,
        }
        return Reply(raw_body=json.dumps({"model": "m", "choices": [choice]}).encode())

    return respond


def _live_run(
    pytester: pytest.Pytester,
    responder: Any,
    provider: str = "ollama",
    *extra: str,
    retries: int = 0,
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
            *extra,
        )
        return result, srv.requests


CASES = {
    "ollama done false": ("ollama", _ollama(False), 75, "done: false"),
    "ollama done true": ("ollama", _ollama(True), 0, None),
    "openai finish null": ("openai", _openai(None), 75, "finish_reason: null"),
    "openai stop": ("openai", _openai("stop"), 0, None),
    "openai content filter": ("openai", _openai("content_filter"), 1, "content filter"),
    # a probe: the server says the generation failed or was aborted; graded, it passed
    "openai finish error": ("openai", _openai("error"), 75, "finish reason 'error'"),
    "openai finish abort": ("openai", _openai("abort"), 75, "finish reason 'abort'"),
    "ollama done_reason error": ("ollama", _ollama(True, "error"), 75, "finish reason 'error'"),
    # nothing written before the cut (a reasoning model spent max_tokens): the model's answer,
    # FAIL by the truncated policy, not EMPTY_RESPONSE "retry the run"
    "openai empty at length": ("openai", _openai("length", content=None), 1, "token limit"),
    "openai empty filtered": ("openai", _openai("content_filter", content=""), 1, "filter"),
    "ollama empty at length": ("ollama", _ollama(True, "length", ""), 1, "token limit"),
    # re-probe: any case, and Mistral's cut at the model's context length
    "openai finish ERROR": ("openai", _openai("ERROR"), 75, "finish reason 'ERROR'"),
    "ollama done_reason Abort": ("ollama", _ollama(True, "Abort"), 75, "finish reason 'Abort'"),
    "openai LENGTH": ("openai", _openai("LENGTH"), 1, "token limit"),
    "openai model_length": ("openai", _openai("model_length"), 1, "context length"),
    # OpenAI's structured refusal is the model's answer: graded (the rows expect more)
    "openai refusal": (
        "openai",
        _openai("stop", content=None, refusal="I can't help with that."),
        1,
        "I can't help with that.",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_unfinished_whole_answer_is_not_a_pass(pytester: pytest.Pytester, case: str) -> None:
    provider, responder, code, said = CASES[case]
    result, _ = _live_run(pytester, responder, provider, "--golden-artifacts=always")
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


def _interleaved_choices(request: Any) -> Reply:
    """Two choices streamed piece by piece in turn: choice 0 says a wrong answer."""
    right = _answer(request)
    pieces = [(0, "Good"), (1, right[:3]), (0, "bye."), (1, right[3:])]
    events = [
        {"model": "m", "choices": [{"index": i, "delta": {"content": text}}]} for i, text in pieces
    ]
    events += [
        {"model": "m", "choices": [{"index": i, "delta": {}, "finish_reason": "stop"}]}
        for i in (0, 1)
    ]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return Reply(raw_body=body.encode(), headers={"Content-Type": "text/event-stream"})


def test_a_stream_of_several_choices_is_read_for_choice_0_only(
    pytester: pytest.Pytester,
) -> None:
    """A probe: the pieces of every choice were glued ("GoodHellobye. there."), a wrong
    answer passed; the same two choices sent whole were read for choices[0] (FAIL)."""
    result, _ = _live_run(
        pytester, _interleaved_choices, "openai", "--golden-stream", "--golden-artifacts=always"
    )
    assert result.ret == 1, result.stdout.str()[-3000:]
    outputs = sorted(pytester.path.glob(".goldeval/runs/*/cases/*/output.md"))
    assert outputs and {p.read_text(encoding="utf-8") for p in outputs} == {"Goodbye."}


def _choice_1_listed_first(request: Any) -> Reply:
    choices = [
        {"index": 1, "message": {"role": "assistant", "content": _answer(request)}},
        {"index": 0, "message": {"role": "assistant", "content": "Goodbye."}},
    ]
    for choice in choices:
        choice["finish_reason"] = "stop"
    return Reply(raw_body=json.dumps({"model": "m", "choices": choices}).encode())


def test_a_whole_answer_is_read_for_choice_0_by_its_index(pytester: pytest.Pytester) -> None:
    """A re-probe: choice 1 listed first passed on its (right) answer; a stream read choice 0."""
    result, _ = _live_run(pytester, _choice_1_listed_first, "openai")
    assert result.ret == 1, result.stdout.str()[-3000:]
