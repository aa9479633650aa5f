"""The OpenAI-compatible wire protocol: ``POST {base}/v1/chat/completions`` (reference 7)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from goldeval.core.limits import loads_json
from goldeval.providers.base import Answer, ProviderRequest
from goldeval.providers.http.client import (
    Failure,
    HTTPProvider,
    finish_reason_of,
    text_content,
    token_count,
)
from goldeval.providers.http.failures import cut_finish, failed_finish, unfinished
from goldeval.providers.http.models_list import refusal, served_model_of
from goldeval.providers.http.wire import chat_messages, check_tool_call_count


class OpenAIProvider(HTTPProvider):
    """``POST {base}/v1/chat/completions``; ``Authorization: Bearer`` from the API key."""

    name = "openai"
    base_url_env = "OPENAI_BASE_URL"
    default_base_url = "https://api.openai.com"

    @property
    def endpoint(self) -> str:
        if self._root.endswith("/v1"):
            return self._url("/chat/completions")
        return self._url("/v1/chat/completions")

    @property
    def models_endpoint(self) -> str:
        """``GET`` lists the models the server serves (``{"data": [{"id"}]}``)."""
        if self._root.endswith("/v1"):
            return self._url("/models")
        return self._url("/v1/models")

    def model_refusal(self, model: str) -> str | None:
        return refusal(self, self.models_endpoint, model)

    def _extra_headers(self) -> dict[str, str]:
        key = (self.settings.api_key or "").strip()
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _status_hint(self, status: int) -> str:
        if status in (401, 403):
            return "check OPENAI_API_KEY"
        return super()._status_hint(status)

    def _body(self, request: ProviderRequest, model: str) -> dict[str, Any]:
        opts = request.options
        body: dict[str, Any] = {
            "model": model,
            "temperature": opts.get("temperature", self.settings.temperature),
            "messages": (
                [_openai_turn(t) for t in request.messages]
                if request.messages is not None
                else chat_messages(request)
            ),
        }
        for key in ("top_p", "max_tokens", "seed", "stop", "tool_choice", "response_format"):
            if opts.get(key) is not None:
                body[key] = opts[key]
        tools = opts.get("tools")
        if self.settings.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = tools
        return body

    def _parse(self, data: dict[str, Any]) -> Answer | Failure:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            return Failure("EMPTY_RESPONSE", f"{self.name} returned no choices", retryable=False)
        # choice 0 by its index, as a stream is read (a server may list choice 1 first)
        first = _first_choice(choices) or choices[0]
        if isinstance(first, dict) and "finish_reason" in first and first["finish_reason"] is None:
            # null, not absent: some compatible servers leave the key out of whole answers
            return unfinished(self.name, "finish_reason: null")
        reason = finish_reason_of(first.get("finish_reason")) if isinstance(first, dict) else None
        failed = failed_finish(self.name, reason)
        if failed is not None:
            return failed
        message = first.get("message") if isinstance(first, dict) else None
        if not isinstance(message, dict):
            message = {}
        calls = self._tool_calls(message.get("tool_calls"))
        if isinstance(calls, Failure):
            return calls
        text = text_content(message.get("content"))
        if not calls and (text is None or not text.strip()):
            refused = text_content(message.get("refusal"))
            if refused and refused.strip():
                text = refused  # the structured refusal is the model's answer, graded
            elif not cut_finish(reason):
                return Failure(
                    "EMPTY_RESPONSE",
                    f"{self.name} returned blank choices[0].message.content",
                    retryable=False,
                )
        usage = data.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        return Answer(
            text=text if text is not None else "",
            tool_calls=calls,
            input_tokens=token_count(usage.get("prompt_tokens")),
            output_tokens=token_count(usage.get("completion_tokens")),
            finish_reason=reason,
            served_model=served_model_of(data.get("model")),
        )

    def _read_stream(self, lines: Iterable[str]) -> tuple[dict[str, Any] | Failure, float | None]:
        """Server-sent events: ``data: {chunk}`` lines with ``choices[0].delta`` pieces, tool
        calls in pieces by ``index``, usage in the last chunk, then ``data: [DONE]``. A stream
        with no ``finish_reason`` (``[DONE]`` or its end without one) was cut short."""
        first: float | None = None
        pieces: list[str] = []
        refused_pieces: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage: Any = None
        reason: Any = None
        events = 0
        served: Any = None
        for line in lines:
            if not line.startswith("data:"):
                continue  # blank separators, comments (": keep-alive"), event names
            data = line[5:].strip()
            if data == "[DONE]":
                break
            try:
                chunk = loads_json(data, what="a streamed event")
            except ValueError:
                return self._bad_stream(line), first
            if not isinstance(chunk, dict):
                return self._bad_stream(line), first
            if chunk.get("error") is not None:
                return {"error": chunk["error"]}, first
            events += 1
            if isinstance(chunk.get("usage"), dict):
                usage = chunk["usage"]
            served = chunk.get("model", served)
            choice = _first_choice(chunk.get("choices"))
            if choice is None:
                continue
            if choice.get("finish_reason"):
                reason = choice["finish_reason"]
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                continue
            refused = text_content(delta.get("refusal"))
            if refused:
                refused_pieces.append(refused)
            content = text_content(delta.get("content"))
            more = delta.get("tool_calls")
            if first is None and (content or more):
                first = time.perf_counter()
            if content:
                pieces.append(content)
            if isinstance(more, list):
                _add_call_pieces(calls, more)
        if not finish_reason_of(reason):
            return self._truncated(events), first
        message: dict[str, Any] = {"role": "assistant", "content": "".join(pieces)}
        if refused_pieces:
            message["refusal"] = "".join(refused_pieces)
        if calls:
            message["tool_calls"] = [_joined_call(calls[i]) for i in sorted(calls)]
        assembled: dict[str, Any] = {
            "choices": [{"index": 0, "message": message, "finish_reason": reason}]
        }
        if usage is not None:
            assembled["usage"] = usage
        if served is not None:
            assembled["model"] = served
        return assembled, first


def _first_choice(choices: Any) -> dict[str, Any] | None:
    """Choice 0 by its index, of a whole answer or a streamed chunk: a server may list several
    choices, or interleave them in one stream (their pieces were glued into one answer)."""
    if not isinstance(choices, list):
        return None
    for choice in choices:
        if isinstance(choice, dict) and choice.get("index", 0) == 0:
            return choice
    return None


def _openai_turn(turn: dict[str, Any]) -> dict[str, Any]:
    """A conversation turn in the chat completions shape (image parts as image_url)."""
    out: dict[str, Any] = {"role": turn["role"]}
    content = turn.get("content")
    if isinstance(content, list):
        out["content"] = [
            {"type": "image_url", "image_url": {"url": p["url"]}}
            if p.get("type") == "image"
            else {"type": "text", "text": p["text"]}
            for p in content
        ]
    else:
        out["content"] = content
    if turn.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": c.get("id") or f"call_{i}",
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": c["arguments"]
                    if isinstance(c["arguments"], str)
                    else json.dumps(c["arguments"], ensure_ascii=False),
                },
            }
            for i, c in enumerate(turn["tool_calls"])
        ]
    if turn["role"] == "tool":
        out["tool_call_id"] = turn.get("tool_call_id") or "call_0"
    if turn.get("name"):
        out["name"] = turn["name"]
    return out


def _add_call_pieces(calls: dict[int, dict[str, Any]], more: list[Any]) -> None:
    """Streamed tool-call pieces, kept as lists joined once at the end (:func:`_joined_call`):
    ``+=`` on the growing arguments string copied it at every piece, quadratic in its size
    (a 30 MiB stream of 100-character pieces ran for minutes)."""
    for n, part in enumerate(more):
        if not isinstance(part, dict):
            continue
        index = part.get("index", n)
        key = index if isinstance(index, int) else n
        call = calls.get(key)
        if call is None:
            check_tool_call_count(len(calls) + 1)
            call = calls[key] = {"name": [], "arguments": [], "object": None}
        fn = part.get("function")
        if isinstance(fn, dict):
            if isinstance(fn.get("name"), str):
                call["name"].append(fn["name"])
            args = fn.get("arguments")
            if isinstance(args, str):
                call["arguments"].append(args)
            elif isinstance(args, dict):
                call["object"], call["arguments"] = args, []


def _joined_call(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call["object"] if call["object"] is not None else "".join(call["arguments"])
    return {"function": {"name": "".join(call["name"]), "arguments": arguments}}
