"""The Ollama wire protocol: ``POST {base}/api/chat`` (reference section 7)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import httpx

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


class OllamaProvider(HTTPProvider):
    """``POST {base}/api/chat`` (``stream: false``, or NDJSON with ``--golden-stream``); Basic
    auth from user/password."""

    name = "ollama"
    base_url_env = "OLLAMA_HOST"
    default_base_url = "http://127.0.0.1:11434"

    @property
    def endpoint(self) -> str:
        return self._url("/api/chat")

    @property
    def models_endpoint(self) -> str:
        """``GET`` lists the models pulled on the server (``{"models": [{"name"}]}``)."""
        return self._url("/api/tags")

    def model_refusal(self, model: str) -> str | None:
        return refusal(self, self.models_endpoint, model)

    def _auth(self, user: str | None, password: str | None) -> httpx.Auth | None:
        if user is not None and user.strip() and password is not None:
            return httpx.BasicAuth(user, password)
        return None

    def _status_hint(self, status: int) -> str:
        if status in (401, 403):
            return "check OLLAMA_USER / OLLAMA_PASSWORD (or user:pass@ in the base URL)"
        if status == 404:
            return "is the model pulled (ollama pull) and --golden-base-url right?"
        return super()._status_hint(status)

    def _body(self, request: ProviderRequest, model: str) -> dict[str, Any]:
        opts = request.options
        options: dict[str, Any] = {
            "temperature": opts.get("temperature", self.settings.temperature)
        }
        for ours, theirs in (("top_p", "top_p"), ("max_tokens", "num_predict"), ("seed", "seed")):
            if opts.get(ours) is not None:
                options[theirs] = opts[ours]
        stop = opts.get("stop")
        if stop is not None:
            options["stop"] = [stop] if isinstance(stop, str) else list(stop)
        body: dict[str, Any] = {
            "model": model,
            "stream": self.settings.stream,
            "options": options,
            "messages": (
                [_ollama_turn(t) for t in request.messages]
                if request.messages is not None
                else chat_messages(request)
            ),
        }
        tools = opts.get("tools")
        if tools and opts.get("tool_choice") != "none":
            # Ollama has no tool_choice: "none" sends no tools, "auto"/"required"/a named
            # function send them (docs/profiles.md says so).
            body["tools"] = tools
        fmt = opts.get("response_format")
        if isinstance(fmt, dict):
            if fmt.get("type") == "json_object":
                body["format"] = "json"
            elif fmt.get("type") == "json_schema":
                body["format"] = (fmt.get("json_schema") or {}).get("schema")
        return body

    def _parse(self, data: dict[str, Any]) -> Answer | Failure:
        if data.get("done") is False:
            return unfinished(self.name, "done: false")
        message = data.get("message")
        if not isinstance(message, dict):
            message = {}
        calls = self._tool_calls(message.get("tool_calls"))
        if isinstance(calls, Failure):
            return calls
        reason = finish_reason_of(data.get("done_reason"))
        failed = failed_finish(self.name, reason)
        if failed is not None:
            return failed
        text = text_content(message.get("content"))
        if not calls and (text is None or not text.strip()) and not cut_finish(reason):
            return Failure(
                "EMPTY_RESPONSE", f"{self.name} returned blank message.content", retryable=False
            )
        return Answer(
            text=text if text is not None else "",
            tool_calls=calls,
            input_tokens=token_count(data.get("prompt_eval_count")),
            output_tokens=token_count(data.get("eval_count")),
            finish_reason=reason,
            served_model=served_model_of(data.get("model")),
        )

    def _read_stream(self, lines: Iterable[str]) -> tuple[dict[str, Any] | Failure, float | None]:
        """NDJSON: one object per line, ``message.content`` pieces, counts on the ``done`` one.
        A stream that ends with no ``done: true`` line was cut short."""
        first: float | None = None
        pieces: list[str] = []
        calls: list[Any] = []
        final: dict[str, Any] | None = None
        events = 0
        for line in lines:
            if not line.strip():
                continue
            try:
                chunk = loads_json(line, what="a streamed line")
            except ValueError:
                return self._bad_stream(line), first
            if not isinstance(chunk, dict):
                return self._bad_stream(line), first
            if chunk.get("error") is not None:
                return {"error": chunk["error"]}, first
            events += 1
            message = chunk.get("message")
            if isinstance(message, dict):
                content = text_content(message.get("content"))
                more = message.get("tool_calls")
                if first is None and (content or more):
                    first = time.perf_counter()
                if content:
                    pieces.append(content)
                if isinstance(more, list):
                    check_tool_call_count(len(calls) + len(more))
                    calls.extend(more)
            if chunk.get("done"):
                final = chunk
        if final is None:
            return self._truncated(events), first
        assembled: dict[str, Any] = {
            **final,
            "message": {"role": "assistant", "content": "".join(pieces)},
        }
        if calls:
            assembled["message"]["tool_calls"] = calls
        return assembled, first


def _ollama_turn(turn: dict[str, Any]) -> dict[str, Any]:
    """A conversation turn in Ollama's /api/chat shape (images as base64 beside the text)."""
    out: dict[str, Any] = {"role": turn["role"]}
    content = turn.get("content")
    if isinstance(content, list):
        out["content"] = "\n".join(p["text"] for p in content if p.get("type") == "text")
        images = [p["url"].split(",", 1)[1] for p in content if p.get("type") == "image"]
        if images:
            out["images"] = images
    else:
        out["content"] = content or ""
    if turn.get("tool_calls"):
        out["tool_calls"] = [
            {"function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in turn["tool_calls"]
        ]
    if turn["role"] == "tool" and turn.get("name"):
        out["tool_name"] = turn["name"]
    return out
