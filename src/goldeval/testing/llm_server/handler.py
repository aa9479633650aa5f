"""The HTTP plumbing: a threading server and one request handler that reads a request, records
it, applies the server's load modes and the fault script, then hands it to a protocol module
(:mod:`.ollama`, :mod:`.openai`) through the route table the server was started with."""

from __future__ import annotations

import http.server
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from goldeval.testing.llm_server.fault_bodies import BODY_FAULTS, CANNED_BODIES
from goldeval.testing.llm_server.faults import Fault, RecordedRequest, Reply
from goldeval.testing.llm_server.wire import (
    INVALID_JSON,
    MAX_BODY,
    chat_validation_error,
    count_tokens,
    embed_inputs,
    error_body,
    phrase,
    text_of,
)

if TYPE_CHECKING:  # the server imports this module; the handler only needs its type
    from goldeval.testing.llm_server.server import FakeLLMServer

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- HTTP plumbing


#: Answers one routed request: ``(handler, record, override reply, empty-content fault)``.
Route: TypeAlias = Callable[["Handler", RecordedRequest, Reply | None, bool], None]


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog: bursts of hundreds of simultaneous connects must not be refused.
    request_queue_size = 1024
    allow_reuse_address = True
    fake: FakeLLMServer
    routes: Mapping[tuple[str, str], Route]
    #: Routes served apart from the model's calls (FakeLLMServer.listings).
    listing_routes: frozenset[tuple[str, str]] = frozenset()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The default prints a traceback to stderr; peers vanishing is routine here.
        log.debug("error while handling a request from %s", client_address, exc_info=True)


class Drop(Exception):
    """Raised inside a handler to close the connection without responding."""


class Handler(http.server.BaseHTTPRequestHandler):
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
        return cast(Server, self.server).fake

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
                if total > MAX_BODY:
                    raise ValueError("body too large")
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0 or length > MAX_BODY:
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
            self.send_json(400, error_body(protocol, 400, str(exc)))
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
        route_key = (self.command, path.rstrip("/") or "/")
        if route_key in cast(Server, self.server).listing_routes:
            self._serve_listing(route_key, record)
            return
        fake._begin(record)
        try:
            route = cast(Server, self.server).routes.get(route_key)
            if route is None:
                self.send_json(404, error_body(protocol, 404, f"404 page not found: {path}"))
                return
            self._serve(route, record)
        except Drop:
            self.close_connection = True
        finally:
            fake._end()

    def _serve_listing(self, key: tuple[str, str], record: RecordedRequest) -> None:
        """A model list: recorded apart, answered at once (404 when lists are off)."""
        fake = self.fake
        fake._listed(record)
        route = cast(Server, self.server).routes.get(key)
        if route is None or not fake.offers_model_list:
            path = record.path
            self.send_json(404, error_body(record.protocol, 404, f"404 page not found: {path}"))
            return
        route(self, record, None, False)

    def _serve(self, route: Route, record: RecordedRequest) -> None:
        fake = self.fake
        wait = fake._admit()
        if wait is not None:
            # Rate-limit mode: over the allowed requests per second, answered at once.
            shown = f"{wait:.3f}"
            headers = {"Retry-After": shown, "retry-after-ms": str(max(1, round(wait * 1000)))}
            msg = f"rate limit of {fake.rate_limit:g} requests per second exceeded"
            self.send_json(429, error_body(record.protocol, 429, msg), headers)
            return
        with fake._slot():
            self._serve_admitted(route, record)

    def _serve_admitted(self, route: Route, record: RecordedRequest) -> None:
        fake = self.fake
        item = fake._next_script_item()
        if fake.latency > 0:
            self.sleep(fake.latency)
        override: Reply | None = None
        empty = False
        if isinstance(item, Fault):
            if item.kind == "drop":
                raise Drop
            if item.kind in ("hang", "latency"):
                self.sleep(item.seconds)
            elif item.kind == "status":
                self._send_status_fault(item, record)
                return
            elif item.kind == "invalid_json":
                self.send(200, INVALID_JSON, "application/json")
                return
            elif item.kind == "error_field":
                self.send_json(200, {"error": item.message})
                return
            elif item.kind == "empty_content":
                empty = True
            elif item.kind in BODY_FAULTS:
                BODY_FAULTS[item.kind](self, item, record)
                return
        elif isinstance(item, Reply):
            override = item
        elif isinstance(item, str):
            override = Reply(content=item)
        route(self, record, override, empty)

    def sleep(self, seconds: float) -> None:
        """Interruptible sleep: ``stop()`` must not wait for a long hang to finish."""
        if seconds > 0 and self.fake._stopping.wait(seconds):
            raise Drop

    # -- writing -----------------------------------------------------------------------------

    def send(
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

    def generate(self, pieces: int) -> None:
        """A non-streamed answer of ``pieces`` pieces takes as long as its paced stream."""
        if pieces > 1 and self.fake.stream_interval > 0:
            self.sleep(self.fake.stream_interval * (pieces - 1))

    def send_stream(
        self,
        status: int,
        pieces: list[bytes],
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """A streamed body. With ``fake.stream_interval == 0`` it is sent at once with a
        ``Content-Length``; otherwise piece by piece (chunked), ``stream_interval`` apart,
        the way a model emits tokens."""
        interval = self.fake.stream_interval
        if interval <= 0 or self.command == "HEAD":
            self.send(status, b"".join(pieces), content_type, headers)
            return
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        for n, piece in enumerate(pieces):
            if n:
                self.sleep(interval)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def send_json(
        self, status: int, payload: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        self.send(status, json.dumps(payload).encode("utf-8"), "application/json", headers)

    def _send_status_fault(self, fault: Fault, record: RecordedRequest) -> None:
        if fault.body is None and isinstance(fault.message, str) and fault.message in CANNED_BODIES:
            canned = CANNED_BODIES[fault.message](record)
            self.send_json(fault.status_code, canned, dict(fault.headers))
            return
        if isinstance(fault.body, bytes):
            body = fault.body
        elif fault.body is not None:
            body = json.dumps(fault.body).encode("utf-8")
        elif fault.status_code >= 400:
            msg = phrase(fault.status_code).lower()
            body = json.dumps(error_body(record.protocol, fault.status_code, msg)).encode()
        else:
            body = b"{}"
        self.send(fault.status_code, body, "application/json", dict(fault.headers))

    def send_override(self, reply: Reply, record: RecordedRequest) -> bool:
        """Send raw/error/error-status replies; ``False`` means "render a normal body"."""
        if reply.delay > 0:
            self.sleep(reply.delay)
        if reply.raw_body is not None:
            self.send(reply.status, reply.raw_body, "application/json", reply.headers)
            return True
        if reply.error is not None:
            self.send_json(reply.status, {"error": reply.error}, reply.headers)
            return True
        if reply.status >= 400:
            msg = phrase(reply.status).lower()
            self.send_json(
                reply.status, error_body(record.protocol, reply.status, msg), reply.headers
            )
            return True
        return False

    # -- endpoints ---------------------------------------------------------------------------

    def chat_reply(
        self, record: RecordedRequest, override: Reply | None, empty: bool
    ) -> Reply | None:
        """Validate, ask the responder, apply overrides; ``None`` if already answered."""
        problem = chat_validation_error(record.json)
        if problem is not None:
            self.send_json(400, error_body(record.protocol, 400, problem))
            return None
        reply = override
        if reply is None:
            try:
                result = self.fake.responder(record)
            except Exception as exc:
                self.fake._record_error(exc)
                log.warning("responder raised %s: %s", type(exc).__name__, exc)
                msg = f"responder raised {type(exc).__name__}: {exc}"
                self.send_json(500, error_body(record.protocol, 500, msg))
                return None
            reply = Reply(content=result) if isinstance(result, str) else result
        if empty:
            reply = replace(reply, content="", tool_calls=None, completion_tokens=0)
        if self.send_override(reply, record):
            return None
        return reply

    @staticmethod
    def usage(record: RecordedRequest, reply: Reply) -> tuple[int, int]:
        prompt = reply.prompt_tokens
        if prompt is None:
            prompt = sum(count_tokens(text_of(m.get("content"))) for m in record.messages)
        completion = reply.completion_tokens
        if completion is None:
            completion = count_tokens(reply.content or "")
        return prompt, completion

    def embed_override(
        self, record: RecordedRequest, override: Reply | None, key: str
    ) -> list[str] | None:
        if override is not None and self.send_override(override, record):
            return None
        inputs = embed_inputs(record.json, key)
        if inputs is None or not isinstance(record.json, dict):
            msg = f"{key} must be a string or a list of strings"
            self.send_json(400, error_body(record.protocol, 400, msg))
            return None
        return inputs
