"""Request-header and request-body read timeouts for uvicorn, which has neither, and a bound
on the size of a request's headers, which its httptools parser lacks.

uvicorn bounds an idle keep-alive connection (``timeout_keep_alive``) and the size of an
incomplete h11 event, but not the time a client takes to send its request line and headers,
nor its body: once the first byte arrives the keep-alive timer is cancelled, and a client that
dribbles one header byte every few seconds, or announces a body it never sends (a
Content-Length larger than what follows, a chunked body with no last chunk), holds its
connection (and a file descriptor) for as long as it likes. Hundreds of them exhaust the server.

:func:`with_header_deadline` wraps uvicorn's HTTP protocol class (httptools or h11, whichever
uvicorn chose) with four rules:

* **headers**: every request's headers must be complete within ``seconds`` of the connection
  opening or of the previous response's end; otherwise the server answers ``408 Request
  Timeout`` and closes the connection;
* **header size**: a request's line and headers together may be ``service_header_bytes``
  long (64 KiB). They are counted as they arrive, per request (a keep-alive connection's next
  request counts afresh), and the parser is handed no byte past the limit: one more is
  answered ``431 Request Header Fields Too Large`` (problem+json), and the connection is
  half-closed, what the client still sends discarded unread, and closed at the header
  deadline at the latest. uvicorn's httptools parser keeps every header it is given, without
  a bound: 10 million small headers in one ``GET /healthz`` took the server from 75 MB to
  1.37 GB;
* **body**: once a request's headers are complete, its body must be complete within
  ``body_seconds``; otherwise the server answers ``408`` (problem+json) and closes the
  connection, or only closes it when an answer was already started. The application then
  reads a disconnect, so the request's task ends;
* **an answer before the body**: a response that completes before its request's body arrived
  (a 401 decided from the headers, a 413 from the announced length) ends the connection: the
  server half-closes it (the client reads the answer, then the end of the stream), discards
  whatever the client still sends and closes it at the body deadline at the latest.

Neither timer runs while a request is being answered with its body complete, so a slow or
streaming response is never cut, and an idle keep-alive connection stays uvicorn's business.
Both protocol classes expose the members used here (``connection_made``, ``connection_lost``,
``data_received``, ``on_response_complete``, ``transport``, ``loop``, ``cycle`` with
``more_body``, ``response_started`` and ``response_complete``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from goldeval.core import limits
from goldeval.server import logs

#: Set on a request's ASGI scope when its body timed out: the request log shows 408, not
#: the 400 the application gives the disconnect it then reads.
BODY_TIMED_OUT = "goldeval.body_timed_out"

_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\n"
    b"content-length: 31\r\n"
    b"\r\n"
    b"request headers took too long.\n"
)


def _problem_response(status: int, reason: str, kind: str, detail: str) -> bytes:
    """A raw problem+json answer that closes its connection."""
    body = json.dumps(
        {"type": f"/problems/{kind}", "title": reason, "status": status, "detail": detail}
    ).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "content-type: application/problem+json\r\n"
        "connection: close\r\n"
        f"content-length: {len(body)}\r\n"
        "\r\n"
    )
    return head.encode("ascii") + body


def headers_too_large_response(limit: int) -> bytes:
    """The raw ``431`` for a request whose line and headers are over ``limit`` bytes."""
    return _problem_response(
        431,
        "Request Header Fields Too Large",
        "headers-too-large",
        f"the request line and headers are over {limit} bytes (service_header_bytes)",
    )


def body_timeout_response(seconds: float) -> bytes:
    """The raw ``408`` (problem+json, as the API's other errors) for a body that took longer
    than ``seconds``."""
    return _problem_response(
        408,
        "Request Timeout",
        "request-timeout",
        f"the request body did not arrive within {seconds:g} seconds of its headers",
    )


class ReadDeadlines(asyncio.Protocol):
    """The rules above, mixed in before a uvicorn HTTP protocol class by
    :func:`with_header_deadline` (which sets the class attributes)."""

    header_seconds: float = 10.0
    body_seconds: float = 30.0
    body_timeout: bytes = b""
    """The raw 408 for a body past ``body_seconds``."""
    header_bytes: int = 64 * 1024
    headers_too_large: bytes = b""
    """The raw 431 for a request line and headers over ``header_bytes``."""

    # The uvicorn protocol's members used here (set by its ``__init__``/``connection_made``).
    transport: Any
    loop: asyncio.AbstractEventLoop
    cycle: Any

    _header_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _timed_cycle: Any = None
    """The request whose body ``_body_timer`` times."""
    _lingering = False
    """Answered before its body arrived, or refused (431): what the client still sends is
    discarded."""
    _header_count = 0
    """Bytes of the coming request's line and headers received so far."""
    _counted_cycle: Any = None
    """The request whose headers completed last (a new one starts the count again)."""
    _refused = False
    """Its headers were over ``header_bytes``: 431 once the answers before it are out."""
    _close_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        while data and not self._lingering and not self.transport.is_closing():
            data = self._feed(data)
        if not self._lingering:
            self._watch_body()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]  # the uvicorn protocol's
        if self._refused:
            if not self._answering():
                self._send_refusal()
            return
        cycle = self.cycle
        if cycle is not None and cycle.more_body and cycle.response_complete:
            self._linger()
        elif cycle is None or cycle.response_complete:
            # No pipelined request started: the next one's headers are due in time.
            self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_deadline()
        self._cancel_body_deadline()
        if self._close_timer is not None:
            self._close_timer.cancel()
            self._close_timer = None
        super().connection_lost(exc)

    # ---------------------------------------------------------------------- header size
    def _feed(self, data: bytes) -> bytes:
        """Hand ``data`` to the parser, a request's line and headers no further than
        ``header_bytes``; what is left for the next round (a body, a pipelined request)."""
        cycle = self.cycle
        if cycle is not self._counted_cycle:  # a request's headers completed: count afresh
            self._counted_cycle, self._header_count = cycle, 0
        if cycle is not None and cycle.more_body and not cycle.response_complete:
            super().data_received(data)  # a body: bounded by --max-body and the body deadline
            return b""
        room = self.header_bytes - self._header_count
        if room <= 0:
            self._refuse_headers()
            return b""
        piece, rest = data[:room], data[room:]
        self._header_count += len(piece)
        super().data_received(piece)
        if self.cycle is not cycle:  # the piece ended a request's headers: the rest is new
            self._counted_cycle, self._header_count = self.cycle, 0
            return rest
        if rest:
            self._refuse_headers()
        return b""

    def _refuse_headers(self) -> None:
        """A request line and headers over ``header_bytes``: what the client still sends is
        discarded unread from now on, and the connection closed at the header deadline at
        the latest. The 431 goes out once the answers of the requests before it are out."""
        logs.event("request headers too large", limit=self.header_bytes)
        self._lingering = self._refused = True
        self._cancel_header_deadline()
        self._cancel_body_deadline()
        self._close_timer = self.loop.call_later(self.header_seconds, self.transport.close)
        if not self._answering():
            self._send_refusal()

    def _answering(self) -> bool:
        """Whether a request before the refused one is still being answered (or waits)."""
        cycle = self.cycle
        busy = cycle is not None and not cycle.response_complete
        return busy or bool(getattr(self, "pipeline", None))  # httptools queues pipelined ones

    def _send_refusal(self) -> None:
        """The 431, then a half-close: the client reads the answer, then the end of the
        stream (a close with its data unread would reset the connection, and lose the
        answer)."""
        if self.transport.is_closing():
            return
        self.transport.write(self.headers_too_large)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        else:
            self.transport.close()

    # ---------------------------------------------------------------------- headers
    def _arm_header_deadline(self) -> None:
        self._cancel_header_deadline()
        if not self.transport.is_closing():
            self._header_timer = self.loop.call_later(
                self.header_seconds, self._header_deadline_passed
            )

    def _cancel_header_deadline(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_deadline_passed(self) -> None:
        self._header_timer = None
        in_progress = self.cycle is not None and not self.cycle.response_complete
        if in_progress or self._lingering or self.transport.is_closing():
            return  # its headers arrived: the body deadline takes over
        logs.event("request headers timed out", seconds=self.header_seconds)
        self.transport.write(_TIMEOUT_RESPONSE)
        self.transport.close()

    # ---------------------------------------------------------------------- body
    def _watch_body(self) -> None:
        """After each read: time the body of a request whose headers are complete, stop
        timing it once it is complete."""
        cycle = self.cycle
        if cycle is None or not cycle.more_body or self.transport.is_closing():
            self._cancel_body_deadline()
        elif cycle is not self._timed_cycle and not cycle.response_complete:
            self._cancel_body_deadline()
            self._arm_body_deadline(cycle)

    def _arm_body_deadline(self, cycle: Any) -> None:
        self._timed_cycle = cycle
        self._body_timer = self.loop.call_later(self.body_seconds, self._body_deadline_passed)

    def _cancel_body_deadline(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        self._timed_cycle = None

    def _body_deadline_passed(self) -> None:
        self._body_timer = None
        cycle, self._timed_cycle = self._timed_cycle, None
        if cycle is None or not cycle.more_body or self.transport.is_closing():
            return
        logs.event(
            "request body timed out",
            seconds=self.body_seconds,
            method=getattr(cycle, "scope", {}).get("method"),
            answered=cycle.response_started or None,
        )
        # A pipelined request waits behind this one (httptools): no answer fits in between.
        if not cycle.response_started and not getattr(self, "pipeline", None):
            cycle.scope[BODY_TIMED_OUT] = True
            self.transport.write(self.body_timeout)
        self.transport.close()

    def _linger(self) -> None:
        """The answer went out before the request's body arrived: the connection cannot
        carry another request. Half-close it (the client reads the answer, then the end of
        the stream), discard what still comes and close it at the body deadline."""
        self._lingering = True
        self._cancel_header_deadline()
        if self.transport.is_closing():
            return
        if self._body_timer is None:  # the answer came before the first read ended
            self._arm_body_deadline(self.cycle)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        else:
            self.transport.close()


def with_header_deadline(
    base: type[asyncio.Protocol],
    seconds: float,
    body_seconds: float | None = None,
    header_bytes: int | None = None,
) -> type[asyncio.Protocol]:
    """``base`` (a uvicorn HTTP protocol class, chosen at run time: httptools when installed,
    else h11) with a ``seconds`` header read timeout, a ``body_seconds`` body read timeout
    (default: the ``service_body_seconds`` limit) and ``header_bytes`` of request line and
    headers at most (default: the ``service_header_bytes`` limit)."""
    body_limit = float(body_seconds or limits.default("service_body_seconds"))
    size_limit = int(header_bytes or limits.default("service_header_bytes"))
    members = {
        "header_seconds": float(seconds),
        "body_seconds": body_limit,
        "body_timeout": body_timeout_response(body_limit),
        "header_bytes": size_limit,
        "headers_too_large": headers_too_large_response(size_limit),
        "__module__": __name__,
    }
    return type(f"HeaderDeadline{base.__name__}", (ReadDeadlines, base), members)
