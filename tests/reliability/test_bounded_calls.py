"""Provider calls bounded by construction (issue 32): time, size, depth, truncated streams.

Each hang case runs the plugin in a separate process under a timeout (``runpytest_subprocess``)
against the real fake server on 127.0.0.1, and asserts the exit code AND the time taken: the
whole-call bound (``--golden-call-timeout``, default connect + read timeout) and the run
deadline (``--golden-deadline``) end a call that never finishes, however slowly its bytes
arrive. The bounded reader, the line splitter and the watchdog have unit tests at the end.
"""

from __future__ import annotations

import gc
import socket
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goldeval.core.errors import ProviderError
from goldeval.core.limits import Deadline, LimitExceeded, read_bounded
from goldeval.core.settings import ProviderSettings
from goldeval.core.watchdog import Watchdog
from goldeval.dataset.case import GoldenCase
from goldeval.providers.base import ProviderRequest
from goldeval.providers.http import HTTPProvider, make_http_provider
from goldeval.providers.http.client import iter_lines
from goldeval.testing.llm_server import FakeLLMServer, Fault, Reply
from tests.helpers import LIVE_NO_GATE, RunFiles, chat_calls

LIVE = [*LIVE_NO_GATE]
ONE = ["-k", "api-login-wrong-password-401"]
#: Start-up of a pytest subprocess with the plugin, on a loaded 2-core machine.
STARTUP = 25.0
#: The longest any case here may run before the subprocess is killed (a hang fails the test).
KILL_AFTER = 90.0


def _protocol_args(llm: FakeLLMServer, protocol: str) -> list[str]:
    if protocol == "openai":
        return ["--golden-provider=openai", f"--golden-base-url={llm.openai_base_url}"]
    return [f"--golden-base-url={llm.base_url}"]


def _run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, float]:
    start = time.monotonic()
    result = pytester.runpytest_subprocess(*LIVE, *args, timeout=KILL_AFTER)
    return result, time.monotonic() - start


def _attempts(run_files: RunFiles) -> list[dict[str, Any]]:
    return [a for c in run_files.latest()["cases"] for a in c["attempts"]]


# --------------------------------------------------------------------------- time bounds


def test_slow_drip_body_ends_at_the_whole_call_bound(
    pytester: pytest.Pytester, llm: FakeLLMServer, run_files: RunFiles
) -> None:
    """A 200 that declares 1 MiB and sends a byte every 0.3 s is never a read timeout (1 s);
    the whole-call bound (2 s) ends it: ERROR TIMEOUT, retryable, exit 75."""
    llm.set_fault(Fault.slow_drip(declared=1 << 20, every=0.3))
    result, elapsed = _run(
        pytester,
        f"--golden-base-url={llm.base_url}",
        *ONE,
        "--golden-timeout=1",
        "--golden-call-timeout=2",
        "--golden-retries=0",
    )
    assert result.ret == 75, result.stdout.str()
    assert elapsed < 2 + STARTUP, elapsed
    (attempt,) = _attempts(run_files)
    assert (attempt["status"], attempt["errorKind"], attempt["tries"]) == ("ERROR", "TIMEOUT", 1)
    assert 1900 <= attempt["durationMs"] < 3500, attempt["durationMs"]
    assert "within 2s" in attempt["errorMessage"]
    assert "--golden-call-timeout" in attempt["errorMessage"]
    result.stdout.fnmatch_lines(["*ERROR TIMEOUT after 1 try*", "*retry the run*"])


def test_the_default_whole_call_bound_is_connect_plus_read_timeout(
    pytester: pytest.Pytester, llm: FakeLLMServer, run_files: RunFiles
) -> None:
    """Without --golden-call-timeout a try ends after the connect timeout (5 s) plus
    --golden-timeout (1 s): 6 s, although bytes keep arriving faster than the read timeout."""
    llm.set_fault(Fault.slow_drip(declared=1 << 20, every=0.3))
    result, elapsed = _run(
        pytester,
        f"--golden-base-url={llm.base_url}",
        *ONE,
        "--golden-timeout=1",
        "--golden-retries=0",
    )
    assert result.ret == 75, result.stdout.str()
    assert elapsed < 6 + STARTUP, elapsed
    (attempt,) = _attempts(run_files)
    assert attempt["errorKind"] == "TIMEOUT"
    assert 5900 <= attempt["durationMs"] < 7500, attempt["durationMs"]


def test_the_issue_drip_is_refused_at_once_by_its_declared_size(
    pytester: pytest.Pytester, llm: FakeLLMServer, run_files: RunFiles
) -> None:
    """The issue's case: a 200 declaring 100 MB sent a byte every 2 s, with --golden-timeout=10
    --golden-deadline=20 --golden-retries=0. Over the 32 MiB cap: refused before reading,
    RESPONSE_TOO_LARGE, exit 4 (the same server sends the same body again)."""
    llm.set_fault(Fault.slow_drip(declared=100_000_000, every=2.0))
    result, elapsed = _run(
        pytester,
        f"--golden-base-url={llm.base_url}",
        *ONE,
        "--golden-timeout=10",
        "--golden-deadline=20",
        "--golden-retries=0",
    )
    assert result.ret == 4, result.stdout.str()
    assert elapsed < 1 + STARTUP, elapsed
    (attempt,) = _attempts(run_files)
    assert (attempt["errorKind"], attempt["tries"]) == ("RESPONSE_TOO_LARGE", 1)
    assert attempt["durationMs"] < 1500
    assert "declares 100000000 bytes" in attempt["errorMessage"]
    assert "--golden-max-response-bytes" in attempt["errorMessage"]
    result.stdout.fnmatch_lines(
        ["*ERROR RESPONSE_TOO_LARGE after 1 try*", "*retrying will not help*"]
    )


def test_the_run_deadline_cuts_a_call_in_flight(
    pytester: pytest.Pytester, llm: FakeLLMServer, run_files: RunFiles
) -> None:
    """With the cap raised (ini key) the 100 MB drip is read, slowly; --golden-deadline=3 cuts
    it at 3 s, not at the whole-call bound (15 s)."""
    pytester.makeini("[pytest]\ngolden_max_response_bytes = 200000000\n")
    llm.set_fault(Fault.slow_drip(declared=100_000_000, every=0.5))
    result, elapsed = _run(
        pytester,
        f"--golden-base-url={llm.base_url}",
        *ONE,
        "--golden-timeout=10",
        "--golden-deadline=3",
        "--golden-retries=3",
    )
    assert result.ret == 75, result.stdout.str()
    assert elapsed < 3 + STARTUP, elapsed
    (attempt,) = _attempts(run_files)
    # Retries were allowed, but none starts after the deadline.
    assert (attempt["errorKind"], attempt["tries"]) == ("TIMEOUT", 1)
    assert attempt["durationMs"] < 4000, attempt["durationMs"]
    assert "cut at the run deadline (--golden-deadline=3s)" in attempt["errorMessage"]
    assert chat_calls(llm) == 1


@pytest.mark.parametrize("protocol", ["ollama", "openai"])
def test_an_endless_stream_ends_at_the_run_deadline(
    pytester: pytest.Pytester, llm: FakeLLMServer, run_files: RunFiles, protocol: str
) -> None:
    """NDJSON / SSE pieces every 0.2 s and never the end: --golden-stream with
    --golden-timeout=10 --golden-deadline=3. Every call in flight ends at the deadline
    (TIMEOUT), the attempts not started are SKIPPED, exit 75."""
    llm.set_fault(Fault.endless_stream(every=0.2))
    result, elapsed = _run(
        pytester,
        *_protocol_args(llm, protocol),
        "--golden-stream",
        "--golden-timeout=10",
        "--golden-deadline=3",
        "--golden-retries=0",
        "--golden-concurrency=2",
    )
    assert result.ret == 75, result.stdout.str()
    assert elapsed < 3 + STARTUP, elapsed
    attempts = _attempts(run_files)
    errored = [a for a in attempts if a["status"] == "ERROR"]
    assert errored and all(a["errorKind"] == "TIMEOUT" for a in errored)
    assert all(a["durationMs"] < 4000 for a in errored), [a["durationMs"] for a in errored]
    assert all(a["status"] in ("ERROR", "SKIPPED") for a in attempts)
    assert chat_calls(llm) == len(errored)


@pytest.mark.parametrize("protocol", ["ollama", "openai"])
def test_an_endless_stream_ends_at_the_whole_call_bound(
    pytester: pytest.Pytester, llm: FakeLLMServer, run_files: RunFiles, protocol: str
) -> None:
    llm.set_fault(Fault.endless_stream(every=0.2))
    result, elapsed = _run(
        pytester,
        *_protocol_args(llm, protocol),
        *ONE,
        "--golden-stream",
        "--golden-timeout=10",
        "--golden-call-timeout=2",
        "--golden-retries=1",
    )
    assert result.ret == 75, result.stdout.str()
    assert elapsed < 2 * 2 + 1 + STARTUP, elapsed  # two tries of 2 s and a backoff
    (attempt,) = _attempts(run_files)
    assert (attempt["errorKind"], attempt["tries"]) == ("TIMEOUT", 2)  # TIMEOUT is retried


# --------------------------------------------------------------------------- size and depth


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
def test_a_body_over_the_size_cap_is_response_too_large(
    pytester: pytest.Pytester, run_files: RunFiles, streamed: bool
) -> None:
    """Plain: the Content-Length is over the cap (refused before reading). Streamed (paced,
    chunked, no Content-Length): cut while reading, once past the cap."""
    with FakeLLMServer(stream_interval=0.01 if streamed else 0.0) as srv:
        srv.reply_with("word " * 2000)
        result, _ = _run(
            pytester,
            f"--golden-base-url={srv.base_url}",
            *ONE,
            "--golden-max-response-bytes=4000",
            "--golden-retries=2",
            *(["--golden-stream"] if streamed else []),
        )
    assert result.ret == 4, result.stdout.str()
    (attempt,) = _attempts(run_files)
    assert (attempt["errorKind"], attempt["tries"]) == ("RESPONSE_TOO_LARGE", 1)
    assert "over the limit of 4000 bytes" in attempt["errorMessage"]
    declared = "declares" in attempt["errorMessage"]
    assert declared is not streamed


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("status", [200, 500])
@pytest.mark.parametrize("protocol", ["ollama", "openai"])
def test_json_nested_100000_deep_is_a_parser_error_exit_4(
    pytester: pytest.Pytester,
    llm: FakeLLMServer,
    run_files: RunFiles,
    protocol: str,
    status: int,
    streamed: bool,
) -> None:
    llm.set_fault(Fault.deep_json(100_000, status=status))
    result, _ = _run(
        pytester,
        *_protocol_args(llm, protocol),
        *ONE,
        "--golden-retries=2",
        *(["--golden-stream"] if streamed else []),
    )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, out
    assert "RecursionError" not in out and "Traceback" not in out
    (attempt,) = _attempts(run_files)
    # Not retried: a retry cannot help (the same server sends the same document).
    assert (attempt["errorKind"], attempt["tries"]) == ("PARSER_ERROR", 1)
    assert "nested deeper than 64 levels" in attempt["errorMessage"]
    assert chat_calls(llm) == 1


def test_deeply_nested_tool_call_arguments_are_a_parser_error(
    pytester: pytest.Pytester, run_files: RunFiles
) -> None:
    deep = '{"a":' * 100_000 + "1" + "}" * 100_000
    with FakeLLMServer() as srv:
        srv.reply_with(Reply(content=None, tool_calls=[{"name": "f", "arguments": deep}]))
        result, _ = _run(pytester, *_protocol_args(srv, "openai"), *ONE, "--golden-retries=0")
    assert result.ret == 4, result.stdout.str()
    (attempt,) = _attempts(run_files)
    assert attempt["errorKind"] == "PARSER_ERROR"
    assert "tool call 'f' arguments" in attempt["errorMessage"]


# --------------------------------------------------------------------------- truncated streams


@pytest.mark.parametrize("protocol", ["ollama", "openai"])
def test_a_stream_cut_without_a_finish_reason_is_retried(
    pytester: pytest.Pytester, llm: FakeLLMServer, run_files: RunFiles, protocol: str
) -> None:
    """llama.cpp's server ends an older stream when a new request takes its slot: the cut
    stream is TRUNCATED_STREAM, retried; once the server answers whole, every row PASSes."""
    llm.script([Fault.truncated_stream()] * 3)
    result, _ = _run(
        pytester,
        *_protocol_args(llm, protocol),
        "--golden-stream",
        "--golden-retries=3",
        "--golden-concurrency=1",
    )
    assert result.ret == 0, result.stdout.str()
    attempts = _attempts(run_files)
    assert all(a["status"] == "PASS" for a in attempts), attempts
    assert sum(a["tries"] for a in attempts) == len(attempts) + 3
    assert chat_calls(llm) == len(attempts) + 3


@pytest.mark.parametrize("protocol", ["ollama", "openai"])
def test_a_truncated_stream_after_every_try_is_a_retryable_error(
    pytester: pytest.Pytester, llm: FakeLLMServer, run_files: RunFiles, protocol: str
) -> None:
    llm.set_fault(Fault.truncated_stream())
    result, _ = _run(
        pytester, *_protocol_args(llm, protocol), *ONE, "--golden-stream", "--golden-retries=1"
    )
    assert result.ret == 75, result.stdout.str()
    (attempt,) = _attempts(run_files)
    assert (attempt["errorKind"], attempt["tries"]) == ("TRUNCATED_STREAM", 2)
    assert "without a finish reason" in attempt["errorMessage"]


# --------------------------------------------------------------------------- the provider


@pytest.fixture
def srv() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


def _provider(srv: FakeLLMServer, protocol: str = "openai", **overrides: Any) -> HTTPProvider:
    values: dict[str, Any] = {
        "name": protocol,
        "model": "fake-llm:latest",
        "base_url": srv.base_url if protocol == "ollama" else srv.openai_base_url,
        "connect_timeout": 2.0,
        "read_timeout": 30.0,
        "retries": 0,
        "backoff_base": 0.01,
    }
    values.update(overrides)
    provider = make_http_provider(ProviderSettings(**values))
    assert isinstance(provider, HTTPProvider)
    return provider


REQUEST = ProviderRequest(
    case=GoldenCase(id="c1", prompt="hi", expect={}),
    attempt=1,
    system="Be brief.",
    user="hi",
    model=None,
    retrieved=[],
)


@pytest.mark.parametrize("protocol", ["ollama", "openai"])
def test_a_truncated_stream_makes_the_adaptive_pool_back_off(
    srv: FakeLLMServer, protocol: str
) -> None:
    srv.script([Fault.truncated_stream()])
    with _provider(srv, protocol, stream=True, retries=1, max_concurrency=8) as provider:
        assert provider.limiter is not None
        before = provider.limiter.limit
        answer = provider.complete(REQUEST)
        assert answer.tries == 2 and answer.text
        stats = provider.limiter.stats()
    assert stats.decreases == 1
    assert stats.limit < before


def test_the_watchdog_cuts_a_read_that_blocks_past_the_deadline(srv: FakeLLMServer) -> None:
    """Bytes 1.5 s apart, whole-call bound 2 s: after the byte at 1.5 s the next read would
    block until 3 s (its read timeout is capped at 2 s, so 3.5 s at worst). The watchdog
    shuts the socket down at 2 s."""
    srv.set_fault(Fault.slow_drip(declared=1000, every=1.5))
    with _provider(srv, call_timeout=2.0) as provider:
        start = time.monotonic()
        with pytest.raises(ProviderError) as info:
            provider.complete(REQUEST)
        elapsed = time.monotonic() - start
    assert info.value.kind == "TIMEOUT"
    # Without the watchdog the read returns with the byte at 3.0 s: anything below is the cut
    # (2.9, not tighter: a loaded CI machine schedules the watchdog's thread late).
    assert 1.9 <= elapsed < 2.9, elapsed


def test_a_call_after_the_run_deadline_is_not_sent(srv: FakeLLMServer) -> None:
    with _provider(srv, run_deadline=Deadline(0)) as provider:
        with pytest.raises(ProviderError) as info:
            provider.complete(REQUEST)
    assert info.value.kind == "TIMEOUT" and "run deadline" in info.value.message
    assert chat_calls(srv) == 0


def test_a_pooled_connection_is_reused_after_bounded_calls(srv: FakeLLMServer) -> None:
    """The watchdog is disarmed before a connection goes back to the pool: later calls on a
    kept-alive connection are not cut by an old alarm."""
    with _provider(srv, call_timeout=0.5) as provider:
        for _ in range(3):
            assert provider.complete(REQUEST).text
        time.sleep(0.7)  # past the first calls' deadlines
        assert provider.complete(REQUEST).text


# --------------------------------------------------------------------------- unit: the reader


def test_read_bounded_passes_a_body_within_its_limits() -> None:
    chunks = [b"ab", b"cd", b"e"]
    assert list(read_bounded(chunks, max_bytes=5, deadline=Deadline(None), what="x")) == chunks


def test_read_bounded_stops_at_the_first_piece_over_the_cap() -> None:
    taken: list[bytes] = []

    def endless() -> Iterator[bytes]:
        while True:
            taken.append(b"x" * 1000)
            yield taken[-1]

    with pytest.raises(LimitExceeded) as info:
        for _ in read_bounded(endless(), max_bytes=4500, deadline=Deadline(None), what="body"):
            pass
    assert info.value.limit == "response_bytes"
    assert len(taken) == 5  # nothing read past the piece that crossed the cap
    assert "body is over the limit of 4500 bytes" in str(info.value)


def test_read_bounded_stops_when_the_deadline_passes_between_pieces() -> None:
    now = [0.0]
    deadline = Deadline(10, clock=lambda: now[0])

    def ticking() -> Iterator[bytes]:
        while True:
            now[0] += 3
            yield b"."

    got = []
    with pytest.raises(LimitExceeded) as info:
        for chunk in read_bounded(ticking(), max_bytes=1 << 20, deadline=deadline, what="s"):
            got.append(chunk)
    assert info.value.limit == "call_seconds"
    assert len(got) == 3  # the pieces at 3, 6 and 9 s; the one at 12 s is refused


@given(st.lists(st.text(alphabet="ab\n\r€ ", max_size=30), max_size=8), st.data())
def test_iter_lines_splits_like_str_split_whatever_the_chunking(
    parts: list[str], data: st.DataObject
) -> None:
    text = "".join(parts)
    raw = text.encode("utf-8")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=6)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # a final newline ends the last line; it does not start another
    expected = [line.removesuffix("\r") for line in lines]
    assert list(iter_lines(chunks)) == expected


def test_the_watchdog_fires_once_and_never_after_cancel() -> None:
    dog = Watchdog()
    fired: list[str] = []
    late = dog.arm(Deadline(0.05), lambda: fired.append("late"))
    kept = dog.arm(Deadline(0.3), lambda: fired.append("kept"))
    never = dog.arm(Deadline(None), lambda: fired.append("never"))
    assert kept.cancel() is False
    time.sleep(0.5)
    assert fired == ["late"] and late.fired
    assert late.cancel() is True and not never.fired


def test_the_watchdog_action_and_cancel_do_not_interleave() -> None:
    """cancel() waits for a running action: once it returns, the guarded socket may be
    reused (pooled) without being shut down later by the alarm."""
    dog = Watchdog()
    inside = threading.Event()
    release = threading.Event()

    def slow_action() -> None:
        inside.set()
        release.wait(2)

    alarm = dog.arm(Deadline(0), slow_action)
    assert inside.wait(2)
    done: list[bool] = []
    waiter = threading.Thread(target=lambda: done.append(alarm.cancel()))
    waiter.start()
    time.sleep(0.1)
    assert not done  # still inside the action
    release.set()
    waiter.join(2)
    assert done == [True]


def test_cutting_a_socket_wakes_a_blocked_read() -> None:
    """What the watchdog does to a call: shutdown() from another thread ends a blocked recv."""
    left, right = socket.socketpair()
    try:
        timer = threading.Timer(0.2, lambda: left.shutdown(socket.SHUT_RDWR))
        start = time.monotonic()
        timer.start()
        left.settimeout(5)
        assert left.recv(10) == b""
        assert time.monotonic() - start < 2
    finally:
        left.close()
        right.close()


def test_docs_name_the_new_kinds_and_options() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "reliability.md").read_text("utf-8")
    for word in (
        "RESPONSE_TOO_LARGE",
        "TRUNCATED_STREAM",
        "--golden-call-timeout",
        "golden_max_response_bytes",
        "PARSER_ERROR",
    ):
        assert word in doc, word


def test_a_cancelled_alarm_keeps_nothing_alive() -> None:
    """Cancelled alarms wait in the heap until their due time (the whole-call bound, minutes):
    they must not hold the response (and its request body) of every finished call."""

    class Held:
        def run(self) -> None:
            raise AssertionError("never called")

    held = Held()
    ref = weakref.ref(held)
    alarm = Watchdog().arm(Deadline(600), held.run)
    del held
    gc.collect()
    assert ref() is not None  # armed: the action keeps its target
    alarm.cancel()
    gc.collect()
    assert ref() is None


def test_a_bad_max_response_bytes_ini_value_is_a_usage_error(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    pytester.makeini("[pytest]\ngolden_max_response_bytes = lots\n")
    result = pytester.runpytest(*LIVE, "--golden-base-url=http://127.0.0.1:9")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*golden_max_response_bytes = 'lots'*whole number of bytes*"])
