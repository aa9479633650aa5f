"""The OpenAI side of the fake server: ``/v1/chat/completions`` (JSON or SSE stream),
``/v1/embeddings`` and ``/v1/models``."""

from __future__ import annotations

import json
import time
from typing import Any, cast

from goldeval.testing.llm_server.faults import RecordedRequest, Reply
from goldeval.testing.llm_server.handler import Handler
from goldeval.testing.llm_server.wire import (
    count_tokens,
    embed_text,
    group,
    normalise_tool_call,
    split_for_stream,
)


def openai_chat(h: Handler, record: RecordedRequest, override: Reply | None, empty: bool) -> None:
    reply = h.chat_reply(record, override, empty)
    if reply is None:
        return
    fake = h.fake
    body = cast(dict[str, Any], record.json)
    prompt_tokens, completion_tokens = h.usage(record, reply)
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    finish_reason = "stop"
    if reply.tool_calls:
        calls = []
        for call in reply.tool_calls:
            name, args, call_id = normalise_tool_call(call)
            calls.append(
                {
                    "id": call_id or f"call_{fake._next_id()}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
            )
        message["tool_calls"] = calls
        finish_reason = "tool_calls"
    elif message["content"] is None:
        message["content"] = ""
    completion_id = f"chatcmpl-{fake._next_id()}"
    created = int(time.time())
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    pieces = split_for_stream(message["content"] or "")
    if body.get("stream") is not True:
        h.generate(len(pieces))
        payload = {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": h.fake.answered_model(body["model"]),
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": usage,
        }
        h.send_json(reply.status, payload, reply.headers)
        return
    # Server-sent events, as the OpenAI API does for "stream": true.
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    deltas += [{"content": piece} for piece in pieces]
    if "tool_calls" in message:
        deltas.append(
            {"tool_calls": [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]}
        )
    base = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": h.fake.answered_model(body["model"]),
    }
    events = [
        {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason}]})
    opts = body.get("stream_options")
    if isinstance(opts, dict) and opts.get("include_usage") and fake.usage_in_streams:
        events.append({**base, "choices": [], "usage": usage})
    data = [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]
    # The role event goes with the first content piece, the closing events with the last.
    h.send_stream(reply.status, group(data, 1, len(pieces)), "text/event-stream", reply.headers)


def openai_embeddings(
    h: Handler, record: RecordedRequest, override: Reply | None, empty: bool
) -> None:
    inputs = h.embed_override(record, override, "input")
    if inputs is None:
        return
    dim = h.fake.embedding_dim
    data = (
        []
        if empty
        else [
            {"object": "embedding", "embedding": embed_text(t, dim), "index": i}
            for i, t in enumerate(inputs)
        ]
    )
    tokens = sum(count_tokens(t) for t in inputs)
    payload = {
        "object": "list",
        "data": data,
        "model": cast(dict[str, Any], record.json).get("model"),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    h.send_json(200, payload)


def openai_models(h: Handler, record: RecordedRequest, override: Reply | None, empty: bool) -> None:
    if override is not None and h.send_override(override, record):
        return
    models = [] if empty else h.fake.models
    data = [{"id": m, "object": "model", "created": 0, "owned_by": "goldeval"} for m in models]
    h.send_json(200, {"object": "list", "data": data})
