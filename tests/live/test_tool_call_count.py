"""An answer's tool calls are counted (the ``answer_tool_calls`` limit): a stream whose pieces
named 20,000 calls an event took 1.5 GB a call, and four calls in flight ended in MemoryError
(PROVIDER_ERROR: retry the run). Past the limit, whole or streamed, OpenAI or Ollama, the
attempt is a PARSER_ERROR naming the limit, never retried; at the limit it is graded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from goldeval.core.errors import DatasetError
from goldeval.core.limits import default
from goldeval.providers.fixture import parse_sidecar
from goldeval.testing.llm_server import Reply
from tests.helpers import RunFiles
from tests.live.test_unfinished_answers import _live_run

LIMIT = int(default("answer_tool_calls"))


def _calls(count: int) -> list[dict[str, Any]]:
    return [
        {
            "index": i,
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "f", "arguments": "{}"},
        }
        for i in range(count)
    ]


def _openai_stream(count: int) -> Any:
    def reply(request: Any) -> Reply:
        events = [
            {
                "choices": [
                    {"index": 0, "delta": {"role": "assistant", "tool_calls": _calls(count)}}
                ]
            },
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ]
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return Reply(raw_body=body.encode(), headers={"Content-Type": "text/event-stream"})

    return reply


def _openai_whole(count: int) -> Any:
    def reply(request: Any) -> Reply:
        message = {"role": "assistant", "content": None, "tool_calls": _calls(count)}
        choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
        return Reply(raw_body=json.dumps({"model": "m", "choices": [choice]}).encode())

    return reply


def _ollama_stream(count: int) -> Any:
    def reply(request: Any) -> Reply:
        calls = [{"function": {"name": "f", "arguments": {}}} for _ in range(count)]
        lines = [
            {"model": "m", "message": {"role": "assistant", "content": "", "tool_calls": calls}},
            {"model": "m", "message": {"role": "assistant", "content": ""}, "done": True},
        ]
        body = "".join(json.dumps(line) + "\n" for line in lines)
        return Reply(raw_body=body.encode(), headers={"Content-Type": "application/x-ndjson"})

    return reply


WAYS = {
    "openai-stream": ("openai", _openai_stream, ["--golden-stream"]),
    "openai-whole": ("openai", _openai_whole, []),
    "ollama-stream": ("ollama", _ollama_stream, ["--golden-stream"]),
}


@pytest.mark.parametrize("way", list(WAYS))
def test_an_answer_with_more_tool_calls_than_the_limit_is_a_parser_error(
    pytester: pytest.Pytester, way: str
) -> None:
    provider, responder, extra = WAYS[way]
    result, requests = _live_run(pytester, responder(LIMIT + 1), provider, *extra, retries=2)
    assert result.ret == 4, result.stdout.str()[-3000:]
    run = RunFiles(pytester.path).latest()
    attempts = [a for c in run["cases"] for a in c["attempts"]]
    assert {a["errorKind"] for a in attempts} == {"PARSER_ERROR"}
    assert all("answer_tool_calls" in a["errorMessage"] for a in attempts)
    assert len(requests) == len(attempts)  # not retried: the same answer again is no better


@pytest.mark.parametrize("way", list(WAYS))
def test_an_answer_at_the_limit_is_graded(pytester: pytest.Pytester, way: str) -> None:
    provider, responder, extra = WAYS[way]
    result, _ = _live_run(pytester, responder(LIMIT), provider, *extra)
    run = RunFiles(pytester.path).latest()
    assert {a.get("errorKind") for c in run["cases"] for a in c["attempts"]} == {None}
    assert result.ret == 1  # graded: the bot's rows expect text, not tool calls


def test_a_recorded_sidecar_with_more_tool_calls_than_the_limit_names_its_file() -> None:
    calls = [{"name": "f", "arguments": {}}] * (LIMIT + 1)
    with pytest.raises(DatasetError, match=r"fixtures/a\.out\.json: field toolCalls holds 257"):
        parse_sidecar(json.dumps({"toolCalls": calls}), "fixtures/a.out.json")
    assert len(parse_sidecar(json.dumps({"toolCalls": calls[:LIMIT]}), "x")["toolCalls"]) == LIMIT
