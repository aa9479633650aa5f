"""Request-header and request-body read timeouts for uvicorn, which has neither.

uvicorn bounds an idle keep-alive connection (``timeout_keep_alive``) and the size of an
incomplete h11 event, but not the time a client takes to send its request line and headers,
nor its body: once the first byte arrives the keep-alive timer is cancelled, and a client that
dribbles one header byte every few seconds, or announces a body it never sends (a
Content-Length larger than what follows, a chunked body with no last chunk), holds its
connection (and a file descriptor) for as long as it likes. Hundreds of them exhaust the server.

:func:`with_header_deadline` wraps uvicorn's HTTP protocol class (httptools or h11, whichever
uvicorn chose) with three rules:

* **headers**: every request's headers must be complete within ``seconds`` of the connection
  opening or of the previous response's end; otherwise the server answers ``408 Request
  Timeout`` and closes the connection;
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


def body_timeout_response(seconds: float) -> bytes:
    """The raw ``408`` (problem+json, as the API's other errors) for a body that took longer
    than ``seconds``."""
    body = json.dumps(
        {
            "type": "/problems/request-timeout",
            "title": "Request Timeout",
            "status": 408,
            "detail": f"the request body did not arrive within {seconds:g} seconds of its headers",
        }
    ).encode()
    head = (
        "HTTP/1.1 408 Request Timeout\r\n"
        "content-type: application/problem+json\r\n"
        "connection: close\r\n"
        f"content-length: {len(body)}\r\n"
        "\r\n"
    )
    return head.encode("ascii") + body


class ReadDeadlines(asyncio.Protocol):
    """The rules above, mixed in before a uvicorn HTTP protocol class by
    :func:`with_header_deadline` (which sets the three class attributes)."""

    header_seconds: float = 10.0
    body_seconds: float = 30.0
    body_timeout: bytes = b""
    """The raw 408 for a body past ``body_seconds``."""

    # The uvicorn protocol's members used here (set by its ``__init__``/``connection_made``).
    transport: Any
    loop: asyncio.AbstractEventLoop
    cycle: Any

    _header_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _timed_cycle: Any = None
    """The request whose body ``_body_timer`` times."""
    _lingering = False
    """Answered before its body arrived: what the client still sends is discarded."""

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return
        super().data_received(data)
        self._watch_body()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]  # the uvicorn protocol's
        cycle = self.cycle
        if cycle is not None and cycle.more_body and cycle.response_complete:
            self._linger()
        elif cycle is None or cycle.response_complete:
            # No pipelined request started: the next one's headers are due in time.
            self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_deadline()
        self._cancel_body_deadline()
        super().connection_lost(exc)

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
) -> type[asyncio.Protocol]:
    """``base`` (a uvicorn HTTP protocol class, chosen at run time: httptools when installed,
    else h11) with a ``seconds`` header read timeout and a ``body_seconds`` body read timeout
    (default: the ``service_body_seconds`` limit)."""
    body_limit = float(body_seconds or limits.default("service_body_seconds"))
    members = {
        "header_seconds": float(seconds),
        "body_seconds": body_limit,
        "body_timeout": body_timeout_response(body_limit),
        "__module__": __name__,
    }
    return type(f"HeaderDeadline{base.__name__}", (ReadDeadlines, base), members)
