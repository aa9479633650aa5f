"""A real local HTTP server speaking the Ollama and OpenAI chat/embedding protocols.

Why a real server rather than patching httpx: the HTTP providers are exercised end to end
(connection pooling, timeouts, retries, ``Retry-After`` handling, concurrency limits, auth
headers) exactly as against a live model, and the same server doubles as a deterministic,
zero-cost backend for benchmarks and for "live" runs in CI.

Quick use::

    with FakeLLMServer() as srv:
        srv.reply_map({"What is 2+2?": "4"})
        srv.script([Fault.status(429, retry_after=1), Fault.status(503), "ok"])
        ...  # point a provider at srv.base_url (Ollama) or srv.openai_base_url (OpenAI)
        assert srv.requests[0].headers["authorization"] == "Bearer sk-test"

Endpoints: Ollama ``POST /api/chat``, ``POST /api/embed``, ``POST /api/embeddings`` (legacy),
``GET /api/tags``, ``GET /``; OpenAI ``POST /v1/chat/completions``, ``POST /v1/embeddings``,
``GET /v1/models``.

Protocol details worth knowing:

* Like real Ollama, ``/api/chat`` streams NDJSON unless the body says ``"stream": false``
  (omitting it means streaming). ``/v1/chat/completions`` streams SSE only when
  ``"stream": true``. Streamed bodies are still sent with a ``Content-Length``.
* Every request to a known endpoint consumes one item of the fault script (see
  :meth:`FakeLLMServer.script`); unknown paths get a 404 and consume nothing.
* Authorization headers are recorded verbatim in :attr:`FakeLLMServer.requests` (tests
  assert on them) but are redacted from ``repr`` and never logged.

Command line (prints the base URL as the first stdout line, serves until killed)::

    python -m goldeval.testing.llm_server --port 0 --latency 0.2 --fixtures golden/mydataset
    python -m goldeval.testing.llm_server --fail-all 503
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import itertools
import json
import logging
import math
import os
import re
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from http import HTTPStatus
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Literal, TypeAlias, cast

__all__ = [
    "DEFAULT_MODELS",
    "EMBEDDING_DIM",
    "FakeLLMServer",
    "Fault",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptItem",
    "embed_text",
    "fixture_responder",
    "main",
]

log = logging.getLogger(__name__)

#: Dimension of the deterministic bag-of-words embeddings.
EMBEDDING_DIM = 64
#: Models listed by ``GET /api/tags`` and ``GET /v1/models`` unless overridden.
DEFAULT_MODELS: tuple[str, ...] = ("fake-llm:latest", "fake-embed:latest")
#: Header names whose values must never reach logs or reprs.
_SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie"}
)
#: Upper bound on a request body; this is a test server, anything bigger is a client bug.
_MAX_BODY = 32 * 1024 * 1024
#: A deliberately truncated JSON document for :meth:`Fault.invalid_json`.
_INVALID_JSON = b'{"model": "fake", "message": {"role": "assistant", "content": "trunc'
_WORD_RE = re.compile(r"\w+")


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
        shown = {k: ("<redacted>" if k in _SECRET_HEADERS else v) for k, v in self.headers.items()}
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
                return _text_of(msg.get("content"))
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
    "status", "hang", "drop", "invalid_json", "empty_content", "error_field", "latency"
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
    def latency(cls, seconds: float) -> Fault:
        """Add ``seconds`` of delay, then answer normally (a slow but healthy request)."""
        return cls("latency", seconds=seconds)


#: Decides the answer of a chat request. A ``str`` is shorthand for ``Reply(content=str)``.
Responder: TypeAlias = Callable[[RecordedRequest], Reply | str]
#: One step of a fault script: a fault, a canned reply, or ``None`` for "answer normally".
ScriptItem: TypeAlias = Fault | Reply | str | None


def _default_responder(_request: RecordedRequest) -> Reply | str:
    return "ok"


# --------------------------------------------------------------------------- helpers


def _text_of(content: Any) -> str:
    """Message content as text: OpenAI list-of-parts content is joined, ``None`` is ``""``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return str(content)


def _count_tokens(text: str) -> int:
    return len(text.split())


def embed_text(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """Deterministic embedding: lower-cased words hashed into ``dim`` buckets, L2-normalised.

    Identical texts have cosine 1.0; texts sharing no words are near 0. All components are
    non-negative, so cosine similarity stays in [0, 1]. Empty text maps to a fixed unit
    vector rather than zeros so callers never divide by zero.
    """
    vec = [0.0] * dim
    for word in _WORD_RE.findall(text.lower()):
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        vec[int.from_bytes(digest, "big") % dim] += 1.0
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]


def _embed_inputs(body: Any, key: str) -> list[str] | None:
    """``input`` as a list of strings (``str`` or ``[str]``); ``None`` when malformed."""
    value = body.get(key) if isinstance(body, dict) else None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _normalise_tool_call(call: Mapping[str, Any]) -> tuple[str, Any, str | None]:
    """(name, arguments, id) from either the flat or the OpenAI-style tool-call shape."""
    fn = call.get("function")
    src: Mapping[str, Any] = fn if isinstance(fn, Mapping) else call
    name = str(src.get("name", ""))
    args = src.get("arguments", {})
    call_id = call.get("id")
    return name, args, call_id if isinstance(call_id, str) else None


def _chat_validation_error(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model is required"
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) for m in msgs
    ):
        return "messages must be a list of {role, content} objects"
    return None


def _error_body(protocol: str, status: int, message: str) -> dict[str, Any]:
    """The error object each protocol normally sends."""
    if protocol == "ollama":
        return {"error": message}
    if status == 429:
        kind = "rate_limit_error"
    elif status >= 500:
        kind = "server_error"
    else:
        kind = "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _context_length_body(record: RecordedRequest) -> dict[str, Any]:
    if record.protocol == "ollama":
        return {"error": "the input length exceeds the context length"}
    return {
        "error": {
            "message": "This model's maximum context length is 8192 tokens. However, your "
            "messages resulted in 9001 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def _model_not_found_body(record: RecordedRequest) -> dict[str, Any]:
    model = record.model or ""
    if record.protocol == "ollama":
        return {"error": f'model "{model}" not found, try pulling it first'}
    return {
        "error": {
            "message": f"The model `{model}` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }


#: Error bodies of :meth:`Fault.context_length` and :meth:`Fault.model_not_found`.
_CANNED: dict[str, Callable[[RecordedRequest], dict[str, Any]]] = {
    "context_length": _context_length_body,
    "model_not_found": _model_not_found_body,
}


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


# --------------------------------------------------------------------------- fixtures


def _load_fixture_index(dataset_dir: Path) -> dict[str, str]:
    """prompt -> fixture text, from every ``*.jsonl`` except ``calibration.jsonl``."""
    index: dict[str, str] = {}
    for jsonl in sorted(dataset_dir.glob("*.jsonl")):
        if jsonl.name == "calibration.jsonl":
            continue
        with jsonl.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip() or line.startswith("#"):
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{jsonl}:{lineno}: invalid JSON: {exc.msg}") from None
                if not isinstance(row, dict):
                    continue
                case_id, prompt = row.get("id"), row.get("prompt")
                if case_id is None or not isinstance(prompt, str):
                    continue
                key = prompt.strip()
                if key in index:  # first row wins, as in a dataset with duplicate prompts
                    continue
                path = dataset_dir / "fixtures" / f"{case_id}.out.md"
                try:
                    # Same decoding as the fixture provider, so scores match fixture mode.
                    index[key] = path.read_bytes().decode("utf-8", errors="replace")
                except OSError:
                    log.warning("no fixture %s for case %s", path, case_id)
    return index


def _prompt_lookup(
    index: Mapping[str, str], default: str | Reply | None
) -> Callable[[RecordedRequest], Reply | str]:
    """Exact match of the last user message, else the longest prompt it contains.

    The containment fallback matters because providers may wrap the prompt in a template
    (retrieved context, instructions) before sending it.
    """
    by_length = sorted(index, key=len, reverse=True)

    def respond(request: RecordedRequest) -> Reply | str:
        text = (request.last_user_message or "").strip()
        hit = index.get(text)
        if hit is None and text:
            for prompt in by_length:
                if prompt and prompt in text:
                    hit = index[prompt]
                    break
        if hit is not None:
            return hit
        if default is not None:
            return default
        return Reply(status=404, error=f"goldeval fake server: no fixture for prompt {text!r}")

    return respond


def fixture_responder(
    dataset_dir: str | os.PathLike[str], *, default: str | Reply | None = None
) -> Responder:
    """A responder replaying ``DIR/fixtures/<id>.out.md`` for the row whose prompt was sent.

    Rows come from every ``DIR/*.jsonl`` except ``calibration.jsonl`` (fields ``id`` and
    ``prompt``); fixture files are read once, now. An unknown prompt gets ``default``, or a
    404 with an explanatory ``error`` when ``default`` is ``None`` (a live run against the
    wrong dataset should fail loudly, not score "ok" answers).
    """
    path = Path(dataset_dir)
    if path.is_file():
        path = path.parent
    if not path.is_dir():
        raise FileNotFoundError(f"dataset directory not found: {path}")
    return _prompt_lookup(_load_fixture_index(path), default)


# --------------------------------------------------------------------------- HTTP plumbing


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog: bursts of hundreds of simultaneous connects must not be refused.
    request_queue_size = 1024
    allow_reuse_address = True
    fake: FakeLLMServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The default prints a traceback to stderr; peers vanishing is routine here.
        log.debug("error while handling a request from %s", client_address, exc_info=True)


class _Drop(Exception):
    """Raised inside a handler to close the connection without responding."""


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every response carries Content-Length
    server_version = "goldeval-fake-llm/1.0"
    sys_version = ""
    # Idle keep-alive connections are closed after this many seconds.
    timeout = 60
    # Headers and body are written separately: without NODELAY, Nagle + delayed ACK can add
    # ~40 ms to every keep-alive request, which would distort benchmarks.
    disable_nagle_algorithm = True

    @property
    def fake(self) -> FakeLLMServer:
        return cast(_HTTPServer, self.server).fake

    # -- connection lifecycle ------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        self.fake._connection_opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.fake._connection_closed(self.connection)

    def handle(self) -> None:
        if self.fake._stopping.is_set():
            return
        try:
            super().handle()
        except OSError:
            # Client went away (e.g. after its read timeout during a hang): nothing to do.
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        # Only the request line / status ever gets here, never headers.
        log.debug("%s " + format, self.address_string(), *args)

    # -- dispatch --------------------------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            total = 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                total += size
                if total > _MAX_BODY:
                    raise ValueError("body too large")
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0 or length > _MAX_BODY:
            raise ValueError("bad Content-Length")
        return self.rfile.read(length) if length else b""

    def _dispatch(self) -> None:
        fake = self.fake
        path, _, query = self.path.partition("?")
        protocol = "openai" if path.startswith("/v1/") else "ollama"
        try:
            body = self._read_body()
        except ValueError as exc:
            self.close_connection = True
            self._send_json(400, _error_body(protocol, 400, str(exc)))
            return
        parsed: Any = None
        if body:
            try:
                parsed = json.loads(body)
            except (ValueError, UnicodeDecodeError):
                parsed = None
        headers: dict[str, str] = {}
        for key, value in self.headers.items():
            k = key.lower()
            headers[k] = f"{headers[k]}, {value}" if k in headers else value
        record = RecordedRequest(
            method=self.command,
            path=path,
            headers=headers,
            json=parsed,
            received_at=time.time(),
            body=body,
            query=query,
        )
        fake._begin(record)
        try:
            route = _ROUTES.get((self.command, path.rstrip("/") or "/"))
            if route is None:
                self._send_json(404, _error_body(protocol, 404, f"404 page not found: {path}"))
                return
            self._serve(route, record)
        except _Drop:
            self.close_connection = True
        finally:
            fake._end()

    def _serve(self, route: _Route, record: RecordedRequest) -> None:
        fake = self.fake
        item = fake._next_script_item()
        if fake.latency > 0:
            self._sleep(fake.latency)
        override: Reply | None = None
        empty = False
        if isinstance(item, Fault):
            if item.kind == "drop":
                raise _Drop
            if item.kind in ("hang", "latency"):
                self._sleep(item.seconds)
            elif item.kind == "status":
                self._send_status_fault(item, record)
                return
            elif item.kind == "invalid_json":
                self._send(200, _INVALID_JSON, "application/json")
                return
            elif item.kind == "error_field":
                self._send_json(200, {"error": item.message})
                return
            elif item.kind == "empty_content":
                empty = True
        elif isinstance(item, Reply):
            override = item
        elif isinstance(item, str):
            override = Reply(content=item)
        route(self, record, override, empty)

    def _sleep(self, seconds: float) -> None:
        """Interruptible sleep: ``stop()`` must not wait for a long hang to finish."""
        if seconds > 0 and self.fake._stopping.wait(seconds):
            raise _Drop

    # -- writing -----------------------------------------------------------------------------

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if status in (204, 304):
            body = b""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _send_json(
        self, status: int, payload: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        self._send(status, json.dumps(payload).encode("utf-8"), "application/json", headers)

    def _send_status_fault(self, fault: Fault, record: RecordedRequest) -> None:
        if fault.body is None and isinstance(fault.message, str) and fault.message in _CANNED:
            canned = _CANNED[fault.message](record)
            self._send_json(fault.status_code, canned, dict(fault.headers))
            return
        if isinstance(fault.body, bytes):
            body = fault.body
        elif fault.body is not None:
            body = json.dumps(fault.body).encode("utf-8")
        elif fault.status_code >= 400:
            msg = _phrase(fault.status_code).lower()
            body = json.dumps(_error_body(record.protocol, fault.status_code, msg)).encode()
        else:
            body = b"{}"
        self._send(fault.status_code, body, "application/json", dict(fault.headers))

    def _send_override(self, reply: Reply, record: RecordedRequest) -> bool:
        """Send raw/error/error-status replies; ``False`` means "render a normal body"."""
        if reply.delay > 0:
            self._sleep(reply.delay)
        if reply.raw_body is not None:
            self._send(reply.status, reply.raw_body, "application/json", reply.headers)
            return True
        if reply.error is not None:
            self._send_json(reply.status, {"error": reply.error}, reply.headers)
            return True
        if reply.status >= 400:
            msg = _phrase(reply.status).lower()
            self._send_json(
                reply.status, _error_body(record.protocol, reply.status, msg), reply.headers
            )
            return True
        return False

    # -- endpoints ---------------------------------------------------------------------------

    def _chat_reply(
        self, record: RecordedRequest, override: Reply | None, empty: bool
    ) -> Reply | None:
        """Validate, ask the responder, apply overrides; ``None`` if already answered."""
        problem = _chat_validation_error(record.json)
        if problem is not None:
            self._send_json(400, _error_body(record.protocol, 400, problem))
            return None
        reply = override
        if reply is None:
            try:
                result = self.fake.responder(record)
            except Exception as exc:
                self.fake._record_error(exc)
                log.warning("responder raised %s: %s", type(exc).__name__, exc)
                msg = f"responder raised {type(exc).__name__}: {exc}"
                self._send_json(500, _error_body(record.protocol, 500, msg))
                return None
            reply = Reply(content=result) if isinstance(result, str) else result
        if empty:
            reply = replace(reply, content="", tool_calls=None, completion_tokens=0)
        if self._send_override(reply, record):
            return None
        return reply

    @staticmethod
    def _usage(record: RecordedRequest, reply: Reply) -> tuple[int, int]:
        prompt = reply.prompt_tokens
        if prompt is None:
            prompt = sum(_count_tokens(_text_of(m.get("content"))) for m in record.messages)
        completion = reply.completion_tokens
        if completion is None:
            completion = _count_tokens(reply.content or "")
        return prompt, completion

    def ollama_chat(self, record: RecordedRequest, override: Reply | None, empty: bool) -> None:
        reply = self._chat_reply(record, override, empty)
        if reply is None:
            return
        body = cast(dict[str, Any], record.json)
        prompt_tokens, completion_tokens = self._usage(record, reply)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content or ""}
        if reply.tool_calls:
            calls = []
            for call in reply.tool_calls:
                name, args, _ = _normalise_tool_call(call)
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except ValueError:
                        pass  # deliberately malformed arguments are passed through
                calls.append({"function": {"name": name, "arguments": args}})
            message["tool_calls"] = calls
        final: dict[str, Any] = {
            "model": body["model"],
            "created_at": _now_iso(),
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
        if body.get("stream", True) is False:
            self._send_json(reply.status, final, reply.headers)
            return
        # NDJSON streaming, as real Ollama does when "stream" is true or omitted.
        lines = []
        for piece in _split_for_stream(reply.content or ""):
            chunk = {
                "model": body["model"],
                "created_at": final["created_at"],
                "message": {"role": "assistant", "content": piece},
                "done": False,
            }
            lines.append(json.dumps(chunk))
        if "tool_calls" in message:
            chunk = {
                "model": body["model"],
                "created_at": final["created_at"],
                "message": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": message["tool_calls"],
                },
                "done": False,
            }
            lines.append(json.dumps(chunk))
        lines.append(json.dumps({**final, "message": {"role": "assistant", "content": ""}}))
        data = ("\n".join(lines) + "\n").encode("utf-8")
        self._send(reply.status, data, "application/x-ndjson", reply.headers)

    def openai_chat(self, record: RecordedRequest, override: Reply | None, empty: bool) -> None:
        reply = self._chat_reply(record, override, empty)
        if reply is None:
            return
        fake = self.fake
        body = cast(dict[str, Any], record.json)
        prompt_tokens, completion_tokens = self._usage(record, reply)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        finish_reason = "stop"
        if reply.tool_calls:
            calls = []
            for call in reply.tool_calls:
                name, args, call_id = _normalise_tool_call(call)
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
        if body.get("stream") is not True:
            payload = {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
                "usage": usage,
            }
            self._send_json(reply.status, payload, reply.headers)
            return
        # Server-sent events, as the OpenAI API does for "stream": true.
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        deltas += [{"content": piece} for piece in _split_for_stream(message["content"] or "")]
        if "tool_calls" in message:
            deltas.append(
                {"tool_calls": [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]}
            )
        base = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": body["model"],
        }
        events = [
            {**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
        ]
        events.append(
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason}]}
        )
        opts = body.get("stream_options")
        if isinstance(opts, dict) and opts.get("include_usage"):
            events.append({**base, "choices": [], "usage": usage})
        data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self._send(reply.status, data.encode("utf-8"), "text/event-stream", reply.headers)

    def _embed_override(
        self, record: RecordedRequest, override: Reply | None, key: str
    ) -> list[str] | None:
        if override is not None and self._send_override(override, record):
            return None
        inputs = _embed_inputs(record.json, key)
        if inputs is None or not isinstance(record.json, dict):
            msg = f"{key} must be a string or a list of strings"
            self._send_json(400, _error_body(record.protocol, 400, msg))
            return None
        return inputs

    def ollama_embed(self, record: RecordedRequest, override: Reply | None, empty: bool) -> None:
        inputs = self._embed_override(record, override, "input")
        if inputs is None:
            return
        dim = self.fake.embedding_dim
        vectors = [] if empty else [embed_text(t, dim) for t in inputs]
        payload = {
            "model": cast(dict[str, Any], record.json).get("model"),
            "embeddings": vectors,
            "total_duration": 1_000_000,
            "load_duration": 0,
            "prompt_eval_count": sum(_count_tokens(t) for t in inputs),
        }
        self._send_json(200, payload)

    def ollama_embeddings_legacy(
        self, record: RecordedRequest, override: Reply | None, empty: bool
    ) -> None:
        inputs = self._embed_override(record, override, "prompt")
        if inputs is None:
            return
        vector = [] if empty else embed_text(inputs[0], self.fake.embedding_dim)
        self._send_json(200, {"embedding": vector})

    def openai_embeddings(
        self, record: RecordedRequest, override: Reply | None, empty: bool
    ) -> None:
        inputs = self._embed_override(record, override, "input")
        if inputs is None:
            return
        dim = self.fake.embedding_dim
        data = (
            []
            if empty
            else [
                {"object": "embedding", "embedding": embed_text(t, dim), "index": i}
                for i, t in enumerate(inputs)
            ]
        )
        tokens = sum(_count_tokens(t) for t in inputs)
        payload = {
            "object": "list",
            "data": data,
            "model": cast(dict[str, Any], record.json).get("model"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        self._send_json(200, payload)

    def ollama_tags(self, record: RecordedRequest, override: Reply | None, empty: bool) -> None:
        if override is not None and self._send_override(override, record):
            return
        models = [] if empty else self.fake.models
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
        self._send_json(200, payload)

    def openai_models(self, record: RecordedRequest, override: Reply | None, empty: bool) -> None:
        if override is not None and self._send_override(override, record):
            return
        models = [] if empty else self.fake.models
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "goldeval"} for m in models]
        self._send_json(200, {"object": "list", "data": data})

    def ollama_root(self, record: RecordedRequest, override: Reply | None, empty: bool) -> None:
        if override is not None and self._send_override(override, record):
            return
        self._send(200, b"Ollama is running", "text/plain; charset=utf-8")


def _split_for_stream(text: str) -> list[str]:
    """Split into a few word-boundary chunks so clients must really concatenate deltas."""
    if not text:
        return []
    pieces = re.findall(r"\S+\s*|\s+", text)
    size = max(1, math.ceil(len(pieces) / 3))
    return ["".join(pieces[i : i + size]) for i in range(0, len(pieces), size)]


_Route: TypeAlias = Callable[[_Handler, RecordedRequest, Reply | None, bool], None]

_ROUTES: dict[tuple[str, str], _Route] = {
    ("POST", "/api/chat"): _Handler.ollama_chat,
    ("POST", "/api/embed"): _Handler.ollama_embed,
    ("POST", "/api/embeddings"): _Handler.ollama_embeddings_legacy,
    ("GET", "/api/tags"): _Handler.ollama_tags,
    ("GET", "/"): _Handler.ollama_root,
    ("POST", "/v1/chat/completions"): _Handler.openai_chat,
    ("POST", "/v1/embeddings"): _Handler.openai_embeddings,
    ("GET", "/v1/models"): _Handler.openai_models,
}


# --------------------------------------------------------------------------- the server


class FakeLLMServer:
    """A programmable Ollama + OpenAI compatible server on a free local port.

    Use as a context manager or call :meth:`start` / :meth:`stop`. All programming
    methods are thread-safe and may be called while requests are being served.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        responder: Responder | None = None,
        latency: float = 0.0,
        models: Sequence[str] = DEFAULT_MODELS,
        embedding_dim: int = EMBEDDING_DIM,
    ) -> None:
        self.host = host
        self._requested_port = port
        #: Decides chat answers; replace it at any time (attribute assignment is atomic).
        self.responder: Responder = responder or _default_responder
        #: Extra seconds added to every request (a slow model).
        self.latency = float(latency)
        self.models: list[str] = list(models)
        self.embedding_dim = embedding_dim
        #: Pending script items, consumed one per request before the persistent fault.
        self.faults: deque[ScriptItem] = deque()
        self._fault: Fault | None = None
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._errors: list[BaseException] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._ids = itertools.count(1)
        self._connections: set[socket.socket] = set()
        self._connections_changed = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._base_url: str | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeLLMServer:
        if self._httpd is not None:
            raise RuntimeError("FakeLLMServer is already running")
        self._stopping.clear()
        httpd = _HTTPServer((self.host, self._requested_port), _Handler)
        httpd.fake = self
        host, port = httpd.server_address[:2]
        host_str = host.decode() if isinstance(host, bytes) else str(host)
        if ":" in host_str:
            host_str = f"[{host_str}]"
        self._base_url = f"http://{host_str}:{port}"
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"FakeLLMServer:{port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, cut open connections and interrupt hangs; idempotent."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout)
        deadline = time.monotonic() + timeout
        with self._connections_changed:
            for conn in list(self._connections):
                try:
                    # Wakes handler threads blocked reading the next keep-alive request.
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            while self._connections:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._connections_changed.wait(remaining)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (the Ollama base URL)."""
        if self._base_url is None:
            raise RuntimeError("FakeLLMServer has not been started")
        return self._base_url

    @property
    def openai_base_url(self) -> str:
        """``base_url + "/v1"``, what OpenAI-compatible clients expect as their base URL."""
        return self.base_url + "/v1"

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])

    def url(self, path: str) -> str:
        return self.base_url + (path if path.startswith("/") else "/" + path)

    # -- programming answers -------------------------------------------------------------

    def reply_with(self, text: str | Reply) -> None:
        """Answer every chat request with ``text``."""
        self.responder = lambda _request: text

    def reply_map(self, mapping: Mapping[str, str | Reply], default: str | Reply = "ok") -> None:
        """Answer by exact lookup of the last user message; unknown messages get ``default``."""
        table = dict(mapping)
        self.responder = lambda request: table.get(request.last_user_message or "", default)

    def replay_fixtures(
        self,
        fixtures: Mapping[str, str] | str | os.PathLike[str],
        default: str | Reply | None = "ok",
    ) -> None:
        """Replay recorded answers keyed by prompt.

        ``fixtures`` is a ``{prompt: answer}`` mapping or a dataset directory (see
        :func:`fixture_responder`). Unlike :meth:`reply_map`, a user message that merely
        *contains* a known prompt (a templated prompt) also matches.
        """
        if isinstance(fixtures, Mapping):
            index = {k.strip(): v for k, v in fixtures.items()}
            self.responder = _prompt_lookup(index, default)
        else:
            self.responder = fixture_responder(fixtures, default=default)

    # -- programming faults --------------------------------------------------------------

    def script(self, items: Iterable[ScriptItem]) -> None:
        """Replace the pending script: item *n* decides request *n*, then normal service.

        Items are :class:`Fault`, :class:`Reply`, ``str`` (a reply text) or ``None`` (answer
        normally via the responder). Append to :attr:`faults` to extend a running script.
        """
        new = list(items)
        with self._lock:
            self.faults.clear()
            self.faults.extend(new)

    def set_fault(self, fault: Fault | None) -> None:
        """Apply ``fault`` to every request once the script is exhausted; ``None`` clears."""
        with self._lock:
            self._fault = fault

    @property
    def fault(self) -> Fault | None:
        return self._fault

    def _next_script_item(self) -> ScriptItem:
        with self._lock:
            if self.faults:
                return self.faults.popleft()
            return self._fault

    # -- recording -----------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def last_request(self) -> RecordedRequest | None:
        with self._lock:
            return self._requests[-1] if self._requests else None

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    @property
    def max_in_flight(self) -> int:
        """Peak number of requests being handled at the same time."""
        with self._lock:
            return self._max_in_flight

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised by the responder (each was answered with a 500)."""
        with self._lock:
            return list(self._errors)

    def reset(self) -> None:
        """Back to a fresh state: records, counters, script, faults, latency and responder."""
        with self._lock:
            self._requests.clear()
            self._errors.clear()
            self._max_in_flight = self._in_flight
            self.faults.clear()
            self._fault = None
        self.latency = 0.0
        self.responder = _default_responder

    # -- handler callbacks ---------------------------------------------------------------

    def _begin(self, record: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(record)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def _end(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _record_error(self, exc: BaseException) -> None:
        with self._lock:
            self._errors.append(exc)

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def _connection_opened(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.add(conn)

    def _connection_closed(self, conn: socket.socket) -> None:
        with self._connections_changed:
            self._connections.discard(conn)
            self._connections_changed.notify_all()


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m goldeval.testing.llm_server",
        description="Serve a fake Ollama + OpenAI compatible LLM API until killed.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added per request")
    parser.add_argument(
        "--fixtures",
        metavar="DIR",
        help="answer with DIR/fixtures/<id>.out.md for the row whose prompt was sent",
    )
    parser.add_argument(
        "--fail-all", type=int, metavar="STATUS", help="answer every request with this status"
    )
    parser.add_argument("--retry-after", help="Retry-After header value used with --fail-all")
    parser.add_argument(
        "--model", action="append", help="model name listed by /api/tags (repeatable)"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log requests to stderr")
    args = parser.parse_args(argv)

    if args.verbose:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    srv = FakeLLMServer(
        args.host, args.port, latency=args.latency, models=args.model or DEFAULT_MODELS
    )
    if args.fixtures:
        try:
            srv.responder = fixture_responder(args.fixtures)
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.fail_all is not None:
        try:
            srv.set_fault(Fault.status(args.fail_all, retry_after=args.retry_after))
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    stop = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    srv.start()
    try:
        print(srv.base_url, flush=True)
        # Polling keeps the main thread responsive to signals on every platform.
        while not stop.wait(0.5):
            pass
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
