"""The Ollama side of the fake server: ``/api/chat`` (JSON or NDJSON stream), ``/api/embed``,
``/api/embeddings`` (legacy), ``/api/tags`` and ``GET /``."""

from __future__ import annotations

import hashlib
import json
from typing import Any, cast

from goldeval.testing.llm_server.faults import RecordedRequest, Reply
from goldeval.testing.llm_server.handler import Handler
from goldeval.testing.llm_server.wire import (
    count_tokens,
    embed_text,
    group,
    normalise_tool_call,
    now_iso,
    split_for_stream,
)


def ollama_chat(h: Handler, record: RecordedRequest, override: Reply | None, empty: bool) -> None:
    reply = h.chat_reply(record, override, empty)
    if reply is None:
        return
    body = cast(dict[str, Any], record.json)
    prompt_tokens, completion_tokens = h.usage(record, reply)
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or ""}
    if reply.tool_calls:
        calls = []
        for call in reply.tool_calls:
            name, args, _ = normalise_tool_call(call)
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    pass  # deliberately malformed arguments are passed through
            calls.append({"function": {"name": name, "arguments": args}})
        message["tool_calls"] = calls
    final: dict[str, Any] = {
        "model": h.fake.answered_model(body["model"]),
        "created_at": now_iso(),
        "message": message,
        "done": True,
        "done_reason": "stop",
        "total_duration": 1_000_000,
        "load_duration": 0,
        "prompt_eval_count": prompt_tokens,
        "prompt_eval_duration": 500_000,
        "eval_count": completion_tokens,
        "eval_duration": 500_000,
    }
    pieces = split_for_stream(reply.content or "")
    if body.get("stream", True) is False:
        h.generate(len(pieces))
        h.send_json(reply.status, final, reply.headers)
        return
    # NDJSON streaming, as real Ollama does when "stream" is true or omitted.
    lines = []
    for piece in pieces:
        chunk = {
            "model": h.fake.answered_model(body["model"]),
            "created_at": final["created_at"],
            "message": {"role": "assistant", "content": piece},
            "done": False,
        }
        lines.append(json.dumps(chunk))
    if "tool_calls" in message:
        chunk = {
            "model": h.fake.answered_model(body["model"]),
            "created_at": final["created_at"],
            "message": {
                "role": "assistant",
                "content": "",
                "tool_calls": message["tool_calls"],
            },
            "done": False,
        }
        lines.append(json.dumps(chunk))
    last = {**final, "message": {"role": "assistant", "content": ""}}
    if not h.fake.usage_in_streams:
        for key in ("prompt_eval_count", "eval_count"):
            last.pop(key)
    lines.append(json.dumps(last))
    data = [(line + "\n").encode("utf-8") for line in lines]
    # One piece per content chunk; the tool-call and final lines go with the last one.
    h.send_stream(reply.status, group(data, 0, len(pieces)), "application/x-ndjson", reply.headers)


def ollama_embed(h: Handler, record: RecordedRequest, override: Reply | None, empty: bool) -> None:
    inputs = h.embed_override(record, override, "input")
    if inputs is None:
        return
    dim = h.fake.embedding_dim
    vectors = [] if empty else [embed_text(t, dim) for t in inputs]
    payload = {
        "model": cast(dict[str, Any], record.json).get("model"),
        "embeddings": vectors,
        "total_duration": 1_000_000,
        "load_duration": 0,
        "prompt_eval_count": sum(count_tokens(t) for t in inputs),
    }
    h.send_json(200, payload)


def ollama_embeddings_legacy(
    h: Handler, record: RecordedRequest, override: Reply | None, empty: bool
) -> None:
    inputs = h.embed_override(record, override, "prompt")
    if inputs is None:
        return
    vector = [] if empty else embed_text(inputs[0], h.fake.embedding_dim)
    h.send_json(200, {"embedding": vector})


def ollama_tags(h: Handler, record: RecordedRequest, override: Reply | None, empty: bool) -> None:
    if override is not None and h.send_override(override, record):
        return
    models = [] if empty else h.fake.models
    payload = {
        "models": [
            {
                "name": name,
                "model": name,
                "modified_at": "2024-01-01T00:00:00Z",
                "size": 1_000_000,
                "digest": hashlib.sha256(name.encode()).hexdigest(),
                "details": {"format": "gguf", "family": "fake"},
            }
            for name in models
        ]
    }
    h.send_json(200, payload)


def ollama_root(h: Handler, record: RecordedRequest, override: Reply | None, empty: bool) -> None:
    if override is not None and h.send_override(override, record):
        return
    h.send(200, b"Ollama is running", "text/plain; charset=utf-8")
