"""What an HTTP model response carries, read defensively: token counts, message text, finish
reasons, ``Retry-After``, tool calls, the lines of a streamed body, and the excerpt of an error
body quoted in a message."""

from __future__ import annotations

import codecs
import email.utils
import json
import math
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timezone
from typing import Any

from goldeval.core.limits import LimitExceeded, default, loads_json
from goldeval.core.models import token_count_problem
from goldeval.providers.base import ProviderRequest, ToolCall

#: Longest excerpt of an error body quoted in a message.
EXCERPT = 200


@dataclass
class Failure:
    """One failed try: what to report and whether another try may help."""

    kind: str
    message: str
    retryable: bool
    retry_after: float | None = None


@dataclass
class CallStats:
    """One call over all its tries: what the attempt reports as its latency and tokens.

    ``busy_s`` runs from each try's send to its end, plus the backoff between tries; the wait
    for a permit (:mod:`.limiter`) before each try is ``queue_s``, kept apart.
    """

    tries: int = 0
    queue_s: float = 0.0
    busy_s: float = 0.0
    ttft_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    def add_tokens(self, tokens_in: int | None, tokens_out: int | None) -> None:
        if tokens_in is not None:
            self.input_tokens = (self.input_tokens or 0) + tokens_in
        if tokens_out is not None:
            self.output_tokens = (self.output_tokens or 0) + tokens_out


def excerpt(text: str, limit: int = EXCERPT) -> str:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1] + "…"


def error_text(error: Any) -> str:
    """The human text of an ``error`` field: a string, ``{message}``, or its JSON."""
    if isinstance(error, str):
        return error
    if isinstance(error, dict):
        msg = error.get("message")
        if isinstance(msg, str) and msg.strip():
            return msg
    try:
        return json.dumps(error, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(error)


def token_count(value: Any) -> int | None:
    """A token count only when it is a (non-negative, integral) number up to
    :data:`~goldeval.core.limits.MAX_TOKEN_COUNT` (``1e300`` is no count: as if none was
    reported, so the usage is estimated)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    return value if token_count_problem(value) is None else None


def text_content(content: Any) -> str | None:
    """Message content as text; OpenAI-style lists of parts are joined; other shapes: None."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return None


def finish_reason_of(value: Any) -> str | None:
    """Why the model stopped, as the protocol says it (OpenAI ``finish_reason``, Ollama
    ``done_reason``), when it is a plain string."""
    return value if isinstance(value, str) and value else None


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds from now (delta-seconds or an HTTP date); None if invalid."""
    if value is None:
        return None
    raw = value.strip()
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


#: Tool calls one answer may make (the ``answer_tool_calls`` limit).
MAX_TOOL_CALLS = int(default("answer_tool_calls"))


def check_tool_call_count(count: int) -> None:
    """LimitExceeded (a PARSER_ERROR, not retried: the same answer again is no better) when
    an answer makes more tool calls than :data:`MAX_TOOL_CALLS`. Checked as a stream names
    each new call: a stream whose pieces named 20,000 calls an event took 1.5 GB."""
    if count > MAX_TOOL_CALLS:
        raise LimitExceeded(
            "answer_tool_calls",
            f"the answer makes more than {MAX_TOOL_CALLS} tool calls (answer_tool_calls)",
        )


def tool_calls(raw: Any) -> list[ToolCall] | Failure:
    """A message's ``tool_calls`` (OpenAI's ``{function: {...}}`` items or bare ones), each
    with a name and JSON-object arguments; a malformed one is a PARSER_ERROR."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        return Failure("PARSER_ERROR", "tool_calls is not a list", retryable=False)
    try:
        check_tool_call_count(len(raw))
    except LimitExceeded as exc:
        return Failure("PARSER_ERROR", str(exc), retryable=False)
    calls: list[ToolCall] = []
    for index, item in enumerate(raw):
        fn = item.get("function") if isinstance(item, dict) else None
        if not isinstance(fn, dict):
            fn = item if isinstance(item, dict) else None
        name = fn.get("name") if fn is not None else None
        if not isinstance(name, str) or not name:
            return Failure(
                "PARSER_ERROR", f"tool call #{index + 1} has no function name", retryable=False
            )
        assert fn is not None
        args = fn.get("arguments")
        if args is None or (isinstance(args, str) and not args.strip()):
            parsed: Any = {}
        elif isinstance(args, str):
            try:
                parsed = loads_json(args, what=f"tool call {name!r} arguments")
            except LimitExceeded as exc:
                return Failure("PARSER_ERROR", str(exc), retryable=False)
            except ValueError:
                return Failure(
                    "PARSER_ERROR",
                    f"tool call {name!r} has arguments that are not JSON: {excerpt(args, 80)!r}",
                    retryable=False,
                )
        else:
            parsed = args
        if not isinstance(parsed, dict):
            return Failure(
                "PARSER_ERROR",
                f"tool call {name!r} arguments are not a JSON object",
                retryable=False,
            )
        calls.append(ToolCall(name=name, arguments=parsed))
    return calls


def iter_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines of a streamed body (UTF-8, ``\n`` or ``\r\n`` ends), piece by piece.

    A line is held only until its end arrives; ``chunks`` is already size-bounded, so a line
    that never ends cannot grow past the response limit.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending: list[str] = []
    for chunk in chunks:
        text = decoder.decode(chunk)
        if "\n" not in text:
            pending.append(text)
            continue
        parts = text.split("\n")
        parts[0] = "".join(pending) + parts[0]
        pending = [parts.pop()]
        for line in parts:
            yield line.removesuffix("\r")
    tail = "".join(pending) + decoder.decode(b"", final=True)
    if tail:
        yield tail.removesuffix("\r")


def chat_messages(request: ProviderRequest) -> list[dict[str, str]]:
    """The system and user messages of a plain (not pre-built) chat request."""
    messages: list[dict[str, str]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.append({"role": "user", "content": request.user or ""})
    return messages
