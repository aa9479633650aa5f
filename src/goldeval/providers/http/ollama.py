"""The Ollama wire protocol: ``POST {base}/api/chat`` (reference section 7)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from goldeval.providers.base import Answer, ProviderRequest
from goldeval.providers.http.client import Failure, HTTPProvider, text_content, token_count


class OllamaProvider(HTTPProvider):
    """``POST {base}/api/chat`` (``stream: false``, or NDJSON with ``--golden-stream``); Basic
    auth from user/password."""

    name = "ollama"
    base_url_env = "OLLAMA_HOST"
    default_base_url = "http://127.0.0.1:11434"

    @property
    def endpoint(self) -> str:
        return self._url("/api/chat")

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
        body: dict[str, Any] = {
            "model": model,
            "stream": self.settings.stream,
            "options": {"temperature": self.settings.temperature},
            "messages": self._messages(request),
        }
        tools = request.options.get("tools")
        if tools:
            body["tools"] = tools
        return body

    def _parse(self, data: dict[str, Any]) -> Answer | Failure:
        message = data.get("message")
        if not isinstance(message, dict):
            message = {}
        calls = self._tool_calls(message.get("tool_calls"))
        if isinstance(calls, Failure):
            return calls
        text = text_content(message.get("content"))
        if not calls and (text is None or not text.strip()):
            return Failure(
                "EMPTY_RESPONSE", f"{self.name} returned blank message.content", retryable=False
            )
        return Answer(
            text=text if text is not None else "",
            tool_calls=calls,
            input_tokens=token_count(data.get("prompt_eval_count")),
            output_tokens=token_count(data.get("eval_count")),
            finish_reason=_reason(data.get("done_reason")),
        )

    def _read_stream(
        self, response: httpx.Response
    ) -> tuple[dict[str, Any] | Failure, float | None]:
        """NDJSON: one object per line, ``message.content`` pieces, counts on the ``done`` one."""
        first: float | None = None
        pieces: list[str] = []
        calls: list[Any] = []
        final: dict[str, Any] = {}
        for line in response.iter_lines():
            if not line.strip():
                continue
            try:
                chunk = json.loads(line)
            except ValueError:
                return self._bad_stream(line), first
            if not isinstance(chunk, dict):
                return self._bad_stream(line), first
            if chunk.get("error") is not None:
                return {"error": chunk["error"]}, first
            message = chunk.get("message")
            if isinstance(message, dict):
                content = text_content(message.get("content"))
                more = message.get("tool_calls")
                if first is None and (content or more):
                    first = time.perf_counter()
                if content:
                    pieces.append(content)
                if isinstance(more, list):
                    calls.extend(more)
            if chunk.get("done"):
                final = chunk
        assembled: dict[str, Any] = {
            **final,
            "message": {"role": "assistant", "content": "".join(pieces)},
        }
        if calls:
            assembled["message"]["tool_calls"] = calls
        return assembled, first


def _reason(value: Any) -> str | None:
    """The protocol's finish reason (``done_reason``), if it is a plain string."""
    return value if isinstance(value, str) and value else None
