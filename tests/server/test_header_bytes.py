"""A request's line and headers are bounded in bytes (``service_header_bytes``, 64 KiB), not
only in time: 10 million small headers in one ``GET /healthz`` (no key needed) took the
server from 75 MB to 1.37 GB (uvicorn's httptools parser keeps every header). Past the limit
the answer is 431 and the connection is closed, without the server buffering what follows.
Raw sockets against a real ``goldeval serve`` process."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import pytest

from goldeval.core import limits
from tests.server.conftest import KEYS, Service
from tests.server.guarded_uvicorn import guarded_uvicorn

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
LIMIT = int(limits.default("service_header_bytes"))


def _exchange(port: int, head: bytes, chunks: Any = (), timeout: float = 60.0) -> bytes:
    """Send ``head`` then every chunk of ``chunks`` (stopping if the server closes), and
    read the answer until the server ends the stream (a half-close of ours would end the
    connection: uvicorn closes on end of stream)."""
    answer = bytearray()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:

        def read() -> None:
            while True:
                try:
                    data = sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                answer.extend(data)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            sock.sendall(head)
            for chunk in chunks:
                sock.sendall(chunk)
        except OSError:  # the server closed while we were still sending: fine
            pass
        reader.join(timeout)
    return bytes(answer)


def _rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _many_headers(count: int, per_chunk: int = 20_000) -> Any:
    line = b"X-A: 1\r\n"
    sent = 0
    while sent < count:
        n = min(per_chunk, count - sent)
        yield line * n
        sent += n
    yield b"\r\n"


def _refused(answer: bytes) -> dict[str, Any]:
    assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), answer[:300]
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"content-type: application/problem+json" in head
    assert b"connection: close" in head
    problem = json.loads(body)
    assert problem["status"] == 431 and problem["type"] == "/problems/headers-too-large"
    return dict(problem)


@SQLITE_ONLY
def test_too_many_headers_are_refused_431_without_buffering_them(service_factory: Any) -> None:
    svc: Service = service_factory()
    server = svc.serve(workers=0)
    assert server.port is not None and server.proc is not None
    before = _rss_kb(server.proc.pid)
    started = time.monotonic()
    # Two million small headers (16 MB): the parser kept all of them (about 270 MB).
    answer = _exchange(
        server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n", _many_headers(2_000_000)
    )
    assert str(LIMIT) in _refused(answer)["detail"]
    assert time.monotonic() - started < 30
    grown = _rss_kb(server.proc.pid) - before
    assert grown < 40_000, f"the server grew {grown} kB"
    # One huge header, on a new connection.
    huge = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "
    _refused(_exchange(server.port, huge, [b"a" * 1_000_000, b"\r\n\r\n"]))
    # A request line alone past the limit.
    _refused(_exchange(server.port, b"GET /healthz?" + b"q" * (LIMIT + 10) + b" HTTP/1.1\r\n"))
    events = [e.get("event") for e in server.events()]
    assert events.count("request headers too large") == 3
    # The server is fine: a normal request on a new connection.
    with svc.client(None) as client:
        assert client.get("/healthz").status_code == 200


@SQLITE_ONLY
def test_headers_within_the_limit_and_bodies_are_not_counted(service_factory: Any) -> None:
    svc: Service = service_factory()
    server = svc.serve(workers=0)
    assert server.port is not None
    # Headers just under the limit, three requests on one keep-alive connection (counted per
    # request, not per connection), each request in one write.
    padding = b"X-Pad: " + b"p" * (LIMIT - 200) + b"\r\n"
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + padding + b"\r\n"
    assert len(request) < LIMIT
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        for _ in range(3):
            sock.sendall(request)
            answer = b""
            while not answer.endswith(b'{"status":"ok"}'):
                chunk = sock.recv(65536)
                assert chunk, answer
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    # A body sent together with its headers is not header bytes (60 KB + headers > 64 KiB).
    body = json.dumps({"dataset": "nope-v1", "pad": "x" * 60_000}).encode()
    head = (
        "POST /api/eval/runs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
        "Content-Type: application/json\r\n"
        f"X-API-Key: {KEYS['EVAL']}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    answer = _exchange(server.port, head + body)
    assert answer.startswith(b"HTTP/1.1 422"), answer[:300]
    # Pipelined: two whole small requests, then one whose headers run past the limit. The
    # two are answered, then the third is refused.
    small = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    answer = _exchange(server.port, small * 2 + small[:-2], _many_headers(200_000))
    assert answer.count(b"HTTP/1.1 200 OK\r\n") == 2, answer[:300]
    _refused(answer[answer.index(b"HTTP/1.1 431") :])
    assert [e.get("event") for e in server.events()].count("request headers too large") == 1
    with svc.client(None) as client:
        assert client.get("/healthz").status_code == 200


@pytest.mark.parametrize("protocol", ["h11", "httptools"])
def test_the_header_size_limit_works_on_both_uvicorn_protocols(protocol: str) -> None:
    """uvicorn picks httptools when installed, else h11: the guard wraps either."""
    with guarded_uvicorn(protocol, 5.0, header_bytes=4096) as port:
        head = b"GET / HTTP/1.1\r\nHost: x\r\n"
        answer = _exchange(port, head, _many_headers(10_000))
        assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
        assert b"over 4096 bytes" in answer
        fits = head + b"X-Pad: " + b"p" * 3000 + b"\r\n\r\n"
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            for _ in range(3):  # keep-alive: each request's headers are counted afresh
                sock.sendall(fits)
                assert sock.recv(1000).startswith(b"HTTP/1.1 200")
