"""A request's body must arrive in time, and a key is checked before the body (issue 33).

A client that announces a body it never sends (a Content-Length larger than what follows, a
chunked body with no last chunk) is answered 408 at ``--body-timeout`` and its connection is
closed; a request without a valid key, to a route that needs one, is answered 401/403 from its
headers without waiting for its body; a slow but steady upload within the deadline, a
streaming answer and an idle keep-alive connection are not affected. Raw sockets against a real
``goldeval serve`` on 127.0.0.1 (and uvicorn with each of its HTTP protocols). Bounds are the
deadline plus a few seconds: a loaded machine is slow, never early.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.server.conftest import KEYS, Proc, Service
from tests.server.guarded_uvicorn import guarded_uvicorn

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
BODY_TIMEOUT = 4.0
SLACK = 5.0  # scheduling on a loaded machine; far below "never"

#: The two ways of announcing a body, each followed by a part of it that never ends.
FRAMINGS = {
    "content-length": (b"Content-Length: 1000\r\n", b'{"dataset": "demo'),
    "chunked": (b"Transfer-Encoding: chunked\r\n", b'a\r\n{"dataset"\r\n'),
}


def _head(path: str, framing: bytes, key: str | None) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: x", "Content-Type: application/json"]
    if key is not None:
        lines.append(f"X-API-Key: {key}")
    return ("\r\n".join(lines) + "\r\n").encode() + framing + b"\r\n"


def _read_until_closed(sock: socket.socket, limit: float) -> tuple[float, bytes]:
    """(seconds until the server ended the stream, everything it sent)."""
    started = time.monotonic()
    answer = b""
    sock.settimeout(0.2)
    while time.monotonic() - started < limit:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            break
        if not chunk:
            break
        answer += chunk
    return time.monotonic() - started, answer


def _never_ending_body(port: int, path: str, framing: str, key: str | None) -> tuple[float, bytes]:
    header, part = FRAMINGS[framing]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(_head(path, header, key) + part)
        return _read_until_closed(sock, BODY_TIMEOUT + 20)


def _steady_upload(sock: socket.socket, body: bytes, seconds: float, chunked: bool) -> None:
    """``body`` in ~20 pieces, evenly over ``seconds``."""
    step = max(1, len(body) // 20)
    for start in range(0, len(body), step):
        piece = body[start : start + step]
        sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
        time.sleep(seconds / 20)
    if chunked:
        sock.sendall(b"0\r\n\r\n")


def _read_response(sock: socket.socket) -> bytes:
    """One whole response with a Content-Length (head and body may come in several reads)."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(65536)
        assert chunk, answer
        answer += chunk
    head, body = answer.split(b"\r\n\r\n", 1)
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, answer
        body += chunk
    return head + b"\r\n\r\n" + body


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


@pytest.fixture
def server(service_factory: Any) -> Iterator[tuple[Service, Proc]]:
    svc: Service = service_factory()
    proc = svc.serve("--header-timeout", "2", "--body-timeout", f"{BODY_TIMEOUT:g}", workers=0)
    assert proc.port is not None
    yield svc, proc


# --------------------------------------------------------------------------- goldeval serve


@SQLITE_ONLY
@pytest.mark.parametrize("framing", sorted(FRAMINGS))
def test_a_body_that_never_arrives_is_cut_at_the_body_timeout(server: Any, framing: str) -> None:
    svc, proc = server
    with ThreadPoolExecutor(20) as pool:
        results = list(
            pool.map(
                lambda _: _never_ending_body(proc.port, "/api/eval/runs", framing, KEYS["EVAL"]),
                range(20),
            )
        )
    held = [seconds for seconds, _ in results]
    assert max(held) < BODY_TIMEOUT + SLACK, held  # not the 24 s the clients would wait
    assert min(held) > BODY_TIMEOUT / 2, held  # the deadline, not an immediate refusal
    for _, answer in results:
        assert _status(answer) == 408, answer[:300]
        problem = json.loads(answer.split(b"\r\n\r\n", 1)[1])
        assert problem["status"] == 408 and problem["type"] == "/problems/request-timeout"
        assert f"within {BODY_TIMEOUT:g} seconds" in problem["detail"]
    # The server's tasks ended with the connections: it answers at once, and logged each one.
    with svc.client("EVAL") as client:
        assert client.get("/api/eval/runs").status_code == 200
    events = proc.events()
    assert sum(e["event"] == "request body timed out" for e in events) == 20
    logged = [e for e in events if e["event"] == "request" and e.get("path") == "/api/eval/runs"]
    assert sum(e["status"] == 408 for e in logged) == 20, logged[:3]
    assert "Exception in ASGI application" not in proc.output()


@SQLITE_ONLY
@pytest.mark.parametrize(
    ("key", "status", "framing"),
    [
        (None, 401, "content-length"),
        (None, 401, "chunked"),
        ("not-a-key-0123456789abcdef", 401, "chunked"),
        (KEYS["MONITOR"], 403, "content-length"),
    ],
    ids=["no-key", "no-key-chunked", "wrong-key", "monitor-role"],
)
def test_a_post_without_a_valid_key_is_refused_before_its_body(
    server: Any, key: str | None, status: int, framing: str
) -> None:
    _, proc = server
    header, part = FRAMINGS[framing]
    with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as sock:
        sock.sendall(_head("/api/eval/runs", header, key) + part)
        seconds, answer = _read_until_closed(sock, BODY_TIMEOUT + 20)
        # Answered from the headers: well before the body deadline, and the stream ends.
        assert seconds < BODY_TIMEOUT / 2, (seconds, answer[:300])
        assert _status(answer) == status, answer[:300]
        assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["status"] == status
        # The server discards what the client still sends and closes within the deadline.
        started, closed = time.monotonic(), False
        while time.monotonic() - started < BODY_TIMEOUT + SLACK + 5:
            try:
                sock.sendall(b"more body " * 100)
            except OSError:
                closed = True
                break
            time.sleep(0.2)
        assert closed and time.monotonic() - started < BODY_TIMEOUT + SLACK
    refused = [e for e in proc.events() if e["event"] == "request" and e["status"] == status]
    assert refused and refused[-1]["path"] == "/api/eval/runs" and refused[-1]["ms"] < 1000


@SQLITE_ONLY
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_slow_but_steady_upload_within_the_body_timeout_works(server: Any, chunked: bool) -> None:
    _, proc = server
    body = json.dumps({"dataset": "demo-v1", "mode": "fixture"}, indent=8).encode()
    framing = (
        b"Transfer-Encoding: chunked\r\n" if chunked else b"Content-Length: %d\r\n" % len(body)
    )
    with socket.create_connection(("127.0.0.1", proc.port), timeout=30) as sock:
        started = time.monotonic()
        sock.sendall(_head("/api/eval/runs", framing, KEYS["EVAL"]))
        # Longer than --header-timeout (2 s), shorter than --body-timeout (4 s).
        _steady_upload(sock, body, 2.5, chunked)
        answer = _read_response(sock)
        assert _status(answer) in (200, 202), answer[:500]
        assert time.monotonic() - started > 2.0
        # The connection stays usable for the next request (keep-alive).
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _status(_read_response(sock)) == 200


# --------------------------------------------------------------------------- uvicorn protocols


async def _app(scope: Any, receive: Any, send: Any) -> None:
    """/early answers 401 without reading the body; /stream reads it, then answers in five
    pieces 0.5 s apart (longer than the body deadline); anything else echoes the body length."""
    if scope["type"] != "http":
        return
    if scope["path"] != "/early":
        more = True
        size = 0
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            size += len(message.get("body", b""))
            more = message.get("more_body", False)
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for n in range(5):
            await asyncio.sleep(0.5)
            await send({"type": "http.response.body", "body": b"%d" % n, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    status, text = (401, b"no key") if scope["path"] == "/early" else (200, b"%d" % size)
    headers = [(b"content-length", b"%d" % len(text))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": text})


@pytest.fixture(params=["h11", "httptools"])
def protocol_port(request: pytest.FixtureRequest) -> Iterator[int]:
    """uvicorn with ``_app``, 2 s header and 1 s body deadlines, on the given protocol."""
    with guarded_uvicorn(request.param, 2.0, 1.0, app=_app) as port:
        yield port


@pytest.mark.parametrize("framing", sorted(FRAMINGS))
def test_the_body_deadline_works_on_both_uvicorn_protocols(
    protocol_port: int, framing: str
) -> None:
    seconds, answer = _never_ending_body(protocol_port, "/echo", framing, None)
    assert _status(answer) == 408 and seconds < 1.0 + SLACK, (seconds, answer[:300])
    # Answered before the body: the answer, then the end of the stream.
    seconds, answer = _never_ending_body(protocol_port, "/early", framing, None)
    assert _status(answer) == 401 and answer.endswith(b"no key"), answer
    assert seconds < 1.0 + SLACK


def test_streaming_answers_and_idle_keep_alive_are_not_cut(protocol_port: int) -> None:
    with socket.create_connection(("127.0.0.1", protocol_port), timeout=10) as sock:
        # A body in time, then an answer streamed for 2.5 s: past the 1 s body deadline.
        sock.sendall(b"POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
        answer = b""
        while not answer.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(65536)
            assert chunk, answer
            answer += chunk
        assert _status(answer) == 200 and b"\r\n4\r\n" in answer, answer
        for _ in range(2):  # idle between requests for longer than the body deadline
            time.sleep(1.3)
            sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
            answer = _read_response(sock)
            assert _status(answer) == 200 and answer.endswith(b"2"), answer
