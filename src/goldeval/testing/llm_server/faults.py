"""What a test programs: recorded requests, canned replies and faults (one per request or
for every request), and the server-wide load modes :class:`Capacity` and :class:`RateLimit`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from goldeval.testing.llm_server.wire import SECRET_HEADERS, text_of

# --------------------------------------------------------------------------- data types


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it.

    ``headers`` has lower-case keys and keeps secrets such as ``authorization`` verbatim so
    tests can check auth was sent; ``repr`` redacts them so assertion output stays clean.
    ``json`` is the parsed body, or ``None`` when the body was empty or not valid JSON.
    """

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    received_at: float
    body: bytes = b""
    query: str = ""

    def __repr__(self) -> str:
        shown = {k: ("<redacted>" if k in SECRET_HEADERS else v) for k, v in self.headers.items()}
        return (
            f"RecordedRequest(method={self.method!r}, path={self.path!r}, headers={shown!r}, "
            f"json={self.json!r}, received_at={self.received_at!r})"
        )

    @property
    def protocol(self) -> Literal["ollama", "openai"]:
        return "openai" if self.path.startswith("/v1/") else "ollama"

    @property
    def model(self) -> str | None:
        model = self.json.get("model") if isinstance(self.json, dict) else None
        return model if isinstance(model, str) else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        msgs = self.json.get("messages") if isinstance(self.json, dict) else None
        if not isinstance(msgs, list):
            return []
        return [m for m in msgs if isinstance(m, dict)]

    @property
    def tools(self) -> list[Any]:
        tools = self.json.get("tools") if isinstance(self.json, dict) else None
        return tools if isinstance(tools, list) else []

    @property
    def last_user_message(self) -> str | None:
        """Text of the last ``role == "user"`` message (OpenAI content parts are joined)."""
        for msg in reversed(self.messages):
            if msg.get("role") == "user":
                return text_of(msg.get("content"))
        return None


@dataclass
class Reply:
    """What the server answers to one request.

    ``content=None`` is sent as ``""`` to Ollama clients and as ``null`` to OpenAI clients
    (what real servers do for tool-call-only answers). ``tool_calls`` items may be
    ``{"name", "arguments"}`` or the OpenAI-style ``{"function": {"name", "arguments"}}``;
    ``arguments`` may be a dict or a JSON string (sent verbatim to OpenAI clients, so an
    invalid string tests argument parsing). ``raw_body`` is sent verbatim (e.g. invalid JSON).
    ``error`` replaces the body with ``{"error": error}``. Token counts default to a word count.
    """

    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    raw_body: bytes | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    error: str | dict[str, Any] | None = None
    delay: float = 0.0


FaultKind: TypeAlias = Literal[
    "status",
    "hang",
    "drop",
    "invalid_json",
    "empty_content",
    "error_field",
    "latency",
    "slow_drip",
    "endless_stream",
    "truncated_stream",
    "deep_json",
]


@dataclass(frozen=True)
class Fault:
    """A misbehaviour for one request (in a script) or for all requests (``set_fault``).

    Build with the class methods rather than the constructor.
    """

    kind: FaultKind
    status_code: int = 200
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()
    seconds: float = 0.0
    message: str | dict[str, Any] | None = None

    @classmethod
    def status(
        cls,
        code: int,
        *,
        body: Any = None,
        retry_after: float | str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Fault:
        """Answer with HTTP ``code``.

        ``body`` is JSON-encoded (``bytes`` are sent verbatim); by default it is the
        protocol's usual error object. ``retry_after`` sets the ``Retry-After`` header.
        """
        if not 200 <= code <= 599:
            raise ValueError(f"status code must be 200..599, got {code}")
        hdrs = dict(headers or {})
        if retry_after is not None:
            if isinstance(retry_after, float) and retry_after.is_integer():
                retry_after = int(retry_after)
            hdrs["Retry-After"] = str(retry_after)
        return cls("status", status_code=code, body=body, headers=tuple(hdrs.items()))

    @classmethod
    def context_length(cls) -> Fault:
        """HTTP 400 "context length exceeded", worded as each protocol's server words it.

        OpenAI: ``code: context_length_exceeded`` with "This model's maximum context
        length is ..."; Ollama: ``{"error": "the input length exceeds the context length"}``.
        """
        return cls("status", status_code=400, message="context_length")

    @classmethod
    def model_not_found(cls) -> Fault:
        """HTTP 404 for the requested model, as Ollama ("model "x" not found, try pulling it
        first") and OpenAI (``code: model_not_found``) answer an unknown model."""
        return cls("status", status_code=404, message="model_not_found")

    @classmethod
    def hang(cls, seconds: float) -> Fault:
        """Sleep ``seconds`` before answering normally, so a shorter client timeout fires."""
        return cls("hang", seconds=seconds)

    @classmethod
    def drop(cls) -> Fault:
        """Close the connection without sending any response bytes."""
        return cls("drop")

    @classmethod
    def invalid_json(cls) -> Fault:
        """Answer 200 with a truncated JSON body."""
        return cls("invalid_json")

    @classmethod
    def empty_content(cls) -> Fault:
        """Answer normally but with ``content == ""`` and no tool calls (empty embeddings)."""
        return cls("empty_content")

    @classmethod
    def error_field(cls, message: str | dict[str, Any]) -> Fault:
        """Answer 200 with ``{"error": message}`` (Ollama reports some failures this way)."""
        return cls("error_field", message=message)

    @classmethod
    def slow_drip(cls, declared: int = 100 * 1024 * 1024, every: float = 2.0) -> Fault:
        """Answer 200 declaring a ``declared``-byte body (Content-Length), then send one byte
        every ``every`` seconds: never a read timeout, and never done."""
        return cls("slow_drip", seconds=every, body=declared)

    @classmethod
    def endless_stream(cls, every: float = 0.2) -> Fault:
        """A 200 stream (OpenAI SSE / Ollama NDJSON, chunked) sending a content piece every
        ``every`` seconds and never its end."""
        return cls("endless_stream", seconds=every)

    @classmethod
    def truncated_stream(cls) -> Fault:
        """A stream cut after its first piece: OpenAI ``data: [DONE]`` with no finish reason,
        Ollama NDJSON with no ``done: true`` line (llama.cpp's server ends an older stream so
        when a new request takes its slot)."""
        return cls("truncated_stream")

    @classmethod
    def deep_json(cls, depth: int = 100_000, status: int = 200) -> Fault:
        """Answer ``status`` with a JSON object nested ``depth`` levels deep; a streamed 200
        sends it as the stream's first event (SSE ``data:`` / an NDJSON line)."""
        return cls("deep_json", status_code=status, body=depth)

    @classmethod
    def latency(cls, seconds: float) -> Fault:
        """Add ``seconds`` of delay, then answer normally (a slow but healthy request)."""
        return cls("latency", seconds=seconds)


#: Decides the answer of a chat request. A ``str`` is shorthand for ``Reply(content=str)``.
Responder: TypeAlias = Callable[[RecordedRequest], Reply | str]
#: One step of a fault script: a fault, a canned reply, or ``None`` for "answer normally".
ScriptItem: TypeAlias = Fault | Reply | str | None


def default_responder(_request: RecordedRequest) -> Reply | str:
    return "ok"
