"""Live calls at provider scale, against the real fake server on 127.0.0.1 (no patching):
adaptive concurrency, Retry-After across the pool, rate buckets, every try counted, streaming."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from goldeval.core.errors import ConfigError, ProviderError
from goldeval.core.settings import ProviderSettings
from goldeval.dataset.case import GoldenCase
from goldeval.providers.base import Answer, ProviderRequest
from goldeval.providers.budget import Budget, parse_prices
from goldeval.providers.http import HTTPProvider, make_http_provider
from goldeval.providers.http.limiter import CallLimiter
from goldeval.testing.llm_server import FakeLLMServer, Fault, Reply

PROTOCOLS = ("ollama", "openai")
CASE = GoldenCase(id="c1", prompt="What is 2+2?", expect={})


@pytest.fixture
def srv() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


Factory = Callable[..., HTTPProvider]


@pytest.fixture
def make(srv: FakeLLMServer) -> Iterator[Factory]:
    made: list[HTTPProvider] = []

    def factory(protocol: str = "ollama", **overrides: Any) -> HTTPProvider:
        values: dict[str, Any] = {
            "name": protocol,
            "model": "fake-llm:latest",
            "base_url": srv.base_url if protocol == "ollama" else srv.openai_base_url,
            "connect_timeout": 2.0,
            "read_timeout": 5.0,
            "retries": 2,
            "backoff_base": 0.01,
            "backoff_max": 5.0,
        }
        values.update(overrides)
        provider = make_http_provider(ProviderSettings(**values))
        assert isinstance(provider, HTTPProvider)
        made.append(provider)
        return provider

    yield factory
    for provider in made:
        provider.close()


def request(user: str = "What is 2+2?") -> ProviderRequest:
    return ProviderRequest(
        case=CASE, attempt=1, system="Be brief.", user=user, model=None, retrieved=[]
    )


def run_pool(provider: HTTPProvider, calls: int, threads: int) -> list[Answer | ProviderError]:
    """What the prefetch pool does: ``threads`` workers calling one provider."""

    def call(i: int) -> Answer | ProviderError:
        try:
            return provider.complete(request(f"q{i}"))
        except ProviderError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(call, range(calls)))


# --------------------------------------------------------------------------- adaptive concurrency


def test_one_slot_server_times_out_at_fixed_8_but_not_adaptive(
    srv: FakeLLMServer, make: Factory
) -> None:
    """A server serving one call at a time (llama.cpp with one slot): 8 calls in flight wait
    up to 8 x 0.1 s, past the 0.55 s read timeout; the adaptive pool keeps the queue short."""
    srv.latency = 0.1
    srv.capacity = 1
    fixed = make(max_concurrency=8, adaptive=False, read_timeout=0.55, retries=0)
    outcomes = run_pool(fixed, 16, 8)
    assert any(isinstance(o, ProviderError) and o.kind == "TIMEOUT" for o in outcomes)

    # The abandoned calls are still served (as a real server does): wait for the queue to drain.
    deadline = time.monotonic() + 10
    while srv.in_flight and time.monotonic() < deadline:
        time.sleep(0.05)
    adaptive = make(max_concurrency=8, adaptive=True, read_timeout=0.55, retries=0)
    outcomes = run_pool(adaptive, 24, 8)
    assert all(isinstance(o, Answer) for o in outcomes), [
        o.kind for o in outcomes if isinstance(o, ProviderError)
    ]
    assert adaptive.limiter is not None
    stats = adaptive.limiter.stats()
    assert stats.decreases >= 1 and stats.limit < 8
    # the queue wait on our side is recorded apart from the call's own latency
    answers = [o for o in outcomes if isinstance(o, Answer)]
    assert all(a.queue_ms is not None for a in answers)
    assert max(a.queue_ms or 0 for a in answers) > 100


def test_a_permit_comes_back_when_an_exception_escapes_the_try(
    srv: FakeLLMServer, make: Factory
) -> None:
    """A parser that raises (or a KeyboardInterrupt in a serial call) must not keep its permit:
    with one permit, the next call would wait for it forever (a CI run hung so at exit)."""
    provider = make(max_concurrency=1, adaptive=False, retries=0)
    payload = json.dumps(
        {
            "model": "fake-llm:latest",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": False,
        }
    ).encode()

    def broken_parser(_data: dict[str, Any]) -> Any:
        raise KeyError("a parser's bug")

    with pytest.raises(KeyError):
        provider.request_json(payload, broken_parser)
    answers: list[Answer] = []
    # A daemon thread: without the fix the call never ends, and the test must still end.
    thread = threading.Thread(target=lambda: answers.append(provider.complete(request())))
    thread.daemon = True
    thread.start()
    thread.join(20)
    assert len(answers) == 1, "the next call waited for the lost permit"


def test_a_call_waiting_for_a_permit_ends_once_its_provider_is_closed(
    srv: FakeLLMServer, make: Factory
) -> None:
    srv.latency = 0.5
    provider = make(max_concurrency=1, adaptive=False, retries=0)
    with ThreadPoolExecutor(max_workers=2) as pool:
        first = pool.submit(provider.complete, request("one"))
        while not srv.in_flight:
            time.sleep(0.01)
        queued = pool.submit(provider.complete, request("two"))  # waits for the one permit
        time.sleep(0.1)
        provider.close()
        with pytest.raises(ProviderError, match="closed"):
            queued.result(timeout=20)
        first.exception(timeout=20)  # the call in flight ends too (answered or cut)
    assert srv.max_in_flight == 1


def test_adaptive_limit_grows_to_the_maximum_on_a_fast_server(
    srv: FakeLLMServer, make: Factory
) -> None:
    srv.latency = 0.05
    provider = make(max_concurrency=12)
    outcomes = run_pool(provider, 96, 12)
    assert all(isinstance(o, Answer) for o in outcomes)
    assert provider.limiter is not None and provider.limiter.stats().peak_limit == 12
    assert srv.max_in_flight >= 10


def test_overload_halves_the_limit_once_per_round() -> None:
    limiter = CallLimiter(16, adaptive=True)
    permits = [limiter.acquire() for _ in range(4)]  # starts at 4
    for p in permits:
        limiter.release(p, overloaded=True)  # four timeouts from one burst
    assert limiter.limit == 2.0  # halved once, not four times
    p = limiter.acquire()
    limiter.release(p, overloaded=True)
    assert limiter.limit == 1.0  # a call sent after the decrease can decrease again


def test_fixed_mode_keeps_the_maximum() -> None:
    limiter = CallLimiter(8, adaptive=False)
    p = limiter.acquire()
    limiter.release(p, overloaded=True)
    assert limiter.limit == 8.0


# --------------------------------------------------------------------------- 429 and Retry-After


def test_retry_after_pauses_every_caller_not_only_the_one_that_got_it(
    srv: FakeLLMServer, make: Factory
) -> None:
    srv.script([Fault.status(429, retry_after=0.6)])
    provider = make(max_concurrency=4)
    results: list[Any] = []
    first = threading.Thread(target=lambda: results.append(provider.complete(request("a"))))
    first.start()
    # Wait for the event, not a guessed time: the limiter has taken the 429's Retry-After
    # (its pause started), so the second caller must now wait behind it.
    limiter = provider.limiter
    assert limiter is not None
    deadline = time.monotonic() + 5
    while limiter.stats().paused_s == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert limiter.stats().paused_s > 0, "the 429 never reached the limiter"
    second = provider.complete(request("b"))
    first.join()
    got_429 = srv.requests[0].received_at
    others = [r.received_at for r in srv.requests[1:]]
    assert len(others) == 2 and all(t - got_429 >= 0.5 for t in others)
    assert isinstance(second, Answer) and second.tries == 1
    assert results[0].tries == 2


def test_rate_limited_server_gives_no_error_attempts(srv: FakeLLMServer, make: Factory) -> None:
    srv.rate_limit = 20
    srv.latency = 0.02
    provider = make(max_concurrency=8, retries=8)
    outcomes = run_pool(provider, 60, 8)
    assert all(isinstance(o, Answer) for o in outcomes)
    assert srv.rejected > 0  # the server did say 429
    assert sum(o.tries for o in outcomes if isinstance(o, Answer)) == 60 + srv.rejected


def test_requests_per_minute_bucket_spaces_calls(srv: FakeLLMServer, make: Factory) -> None:
    provider = make(max_concurrency=8, rpm=600)  # 10 a second, one second deep
    run_pool(provider, 15, 8)
    times = sorted(r.received_at for r in srv.requests)
    assert times[-1] - times[0] >= 0.4  # 10 at once, then 5 more at 10 a second


def test_tokens_per_minute_bucket_spaces_calls(srv: FakeLLMServer, make: Factory) -> None:
    srv.reply_with(Reply(content="ok", prompt_tokens=50, completion_tokens=50))
    provider = make(max_concurrency=4, tpm=6000)  # 100 tokens a second = one call a second
    run_pool(provider, 3, 3)
    times = sorted(r.received_at for r in srv.requests)
    assert times[-1] - times[0] >= 1.0


# --------------------------------------------------------------------------- every try counted


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_latency_and_tokens_cover_every_try(
    srv: FakeLLMServer, make: Factory, protocol: str
) -> None:
    srv.latency = 0.15
    srv.script([Fault.status(503), Reply(content="ok", prompt_tokens=7, completion_tokens=3)])
    answer = make(protocol, max_concurrency=2).complete(request())
    assert answer.tries == 2
    assert answer.duration_ms >= 300  # both tries, not only the last
    assert answer.input_tokens == 7 and answer.output_tokens == 3
    assert answer.queue_ms is not None and answer.queue_ms < 100


def test_error_after_retries_carries_the_time_of_every_try(
    srv: FakeLLMServer, make: Factory
) -> None:
    srv.latency = 0.1
    srv.set_fault(Fault.status(500))
    with pytest.raises(ProviderError) as info:
        make(max_concurrency=2, retries=2).complete(request())
    assert info.value.tries == 3
    assert info.value.duration_ms >= 300  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- streaming


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_streamed_answer_is_no_read_timeout_and_records_time_to_first_token(
    srv: FakeLLMServer, make: Factory, protocol: str
) -> None:
    """Pieces 0.3 s apart: 0.9 s in all, over a 0.5 s read timeout that only applies
    between pieces when the answer is streamed."""
    srv.stream_interval = 0.3
    srv.reply_with(Reply(content="one two three four five six", prompt_tokens=4))
    streamed = make(protocol, stream=True, read_timeout=0.5, retries=0).complete(request())
    assert streamed.text == "one two three four five six"
    assert streamed.ttft_ms is not None and streamed.ttft_ms < 250
    assert streamed.duration_ms >= 550
    assert streamed.input_tokens == 4 and streamed.output_tokens == 6
    body = srv.requests[-1].json
    assert body["stream"] is True
    with pytest.raises(ProviderError) as info:  # the same answer not streamed
        make(protocol, stream=False, read_timeout=0.5, retries=0).complete(request())
    assert info.value.kind == "TIMEOUT"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_streamed_tool_calls(srv: FakeLLMServer, make: Factory, protocol: str) -> None:
    srv.reply_with(
        Reply(content=None, tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}])
    )
    answer = make(protocol, stream=True).complete(request())
    assert [(c.name, c.arguments) for c in answer.tool_calls] == [("get_weather", {"city": "Oslo"})]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_streamed_error_status_is_mapped_like_a_plain_one(
    srv: FakeLLMServer, make: Factory, protocol: str
) -> None:
    srv.set_fault(Fault.context_length())
    with pytest.raises(ProviderError) as info:
        make(protocol, stream=True).complete(request())
    assert info.value.kind == "CONTEXT_LENGTH"


def test_streamed_garbage_line_is_a_parser_error(srv: FakeLLMServer, make: Factory) -> None:
    srv.reply_with(Reply(raw_body=b'{"message": {"content": "a"}}\nnot json\n'))
    with pytest.raises(ProviderError) as info:
        make(stream=True, retries=0).complete(request())
    assert info.value.kind == "PARSER_ERROR"


# --------------------------------------------------------------------------- prices and budget


def test_prices_per_model_set_the_cost(srv: FakeLLMServer, make: Factory) -> None:
    srv.reply_with(Reply(content="ok", prompt_tokens=1000, completion_tokens=2000))
    prices = parse_prices(["fake-llm:latest = 0.5 1.5", "# comment", "other = 9 9"])
    answer = make(prices=prices).complete(request())
    assert answer.cost == pytest.approx(0.5 + 3.0)


@pytest.mark.parametrize("line", ["model 0.5 1.5", "m = 1", "m = a b", "= 1 2", "m = -1 2"])
def test_bad_price_line_names_the_line(line: str) -> None:
    with pytest.raises(ConfigError, match=r"golden_prices line 2: .*MODEL = INPUT OUTPUT"):
        parse_prices(["ok = 1 2", line])


def test_budget_is_spent_by_tokens_or_cost() -> None:
    budget = Budget(max_tokens=100)
    budget.spend(60, None)
    assert not budget.exhausted()
    budget.spend(40, None)
    assert budget.exhausted() and "100 tokens of --golden-max-tokens=100" in budget.describe()
    money = Budget(max_cost=1.0)
    money.spend(None, 0.99)
    assert not money.exhausted()
    money.spend(None, 0.02)
    assert money.exhausted()
