"""A bare uvicorn server whose HTTP protocol (h11 or httptools) is wrapped by the service's
request guard (goldeval.server.header_deadline), for the guard's tests on both protocols."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from goldeval.server.header_deadline import with_header_deadline
from tests.server.conftest import free_port


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


@contextmanager
def guarded_uvicorn(
    protocol: str, *deadlines: float, app: Any = _ok, **guard: Any
) -> Iterator[int]:
    """The port of a server running ``app`` (default: every request 200 ``ok``) through
    ``protocol`` wrapped with ``with_header_deadline(protocol, *deadlines, **guard)``;
    stopped on leaving."""
    import uvicorn

    if protocol == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol as base
    else:
        pytest.importorskip("httptools")
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base

    port = free_port()
    http = with_header_deadline(base, *deadlines, **guard)
    server = uvicorn.Server(uvicorn.Config(app, port=port, http=http, log_config=None))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        yield port
    finally:
        server.should_exit = True
        thread.join(10)
