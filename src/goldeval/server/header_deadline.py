"""A request-header read timeout for uvicorn, which has none.

uvicorn bounds an idle keep-alive connection (``timeout_keep_alive``) and the size of an
incomplete h11 event, but not the time a client takes to send its request line and headers:
once the first byte arrives the keep-alive timer is cancelled, and a client that dribbles one
header byte every few seconds holds its connection (and a file descriptor) for as long as it
likes. Hundreds of them exhaust the server.

:func:`with_header_deadline` wraps uvicorn's HTTP protocol class (httptools or h11, whichever
uvicorn chose) so that every request's headers must be complete within ``seconds`` of the
connection opening or of the previous response's end; otherwise the server answers ``408
Request Timeout`` and closes the connection. A request whose headers arrived is never cut: the
timer only closes a connection with no request in progress. Both protocol classes expose the
same members used here (``connection_made``, ``connection_lost``, ``on_response_complete``,
``transport``, ``loop``, ``cycle``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from goldeval.server import logs

_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\n"
    b"content-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\n"
    b"content-length: 31\r\n"
    b"\r\n"
    b"request headers took too long.\n"
)


def with_header_deadline(base: type[asyncio.Protocol], seconds: float) -> type[asyncio.Protocol]:
    """``base`` (a uvicorn HTTP protocol class) with a ``seconds`` header read timeout."""

    # The base class is chosen at run time (httptools when installed, else h11).
    class HeaderDeadline(base):  # type: ignore[valid-type, misc]
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm_header_deadline()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.cycle is None or self.cycle.response_complete:
                # No pipelined request started: the next one's headers are due in time.
                self._arm_header_deadline()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_header_deadline()
            super().connection_lost(exc)

        def _arm_header_deadline(self) -> None:
            self._cancel_header_deadline()
            if not self.transport.is_closing():
                self._header_timer = self.loop.call_later(seconds, self._header_deadline_passed)

        def _cancel_header_deadline(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _header_deadline_passed(self) -> None:
            self._header_timer = None
            in_progress = self.cycle is not None and not self.cycle.response_complete
            if in_progress or self.transport.is_closing():
                return  # its headers arrived: the request runs to its end
            logs.event("request headers timed out", seconds=seconds)
            self.transport.write(_TIMEOUT_RESPONSE)
            self.transport.close()

    HeaderDeadline.__name__ = HeaderDeadline.__qualname__ = f"HeaderDeadline{base.__name__}"
    return HeaderDeadline
