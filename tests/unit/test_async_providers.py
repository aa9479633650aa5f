"""Async providers: awaited on one shared event loop, from any thread (issue 17).

A real ``httpx.AsyncClient`` against the fake model server on 127.0.0.1: an async client is
bound to the loop it first ran on, so calls from several threads only work (and overlap) when
every coroutine runs on the same loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from goldeval.core.errors import ProviderError
from goldeval.core.models import AttemptRecord, Status
from goldeval.dataset.case import GoldenCase
from goldeval.judge.runner import Judge
from goldeval.providers.base import (
    Answer,
    AsyncProviderAdapter,
    CallableProvider,
    ProviderRequest,
    as_provider,
)
from goldeval.providers.cache import CachedProvider
from goldeval.testing.llm_server import FakeLLMServer, Reply


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


def _case(case_id: str = "c1", prompt: str = "hello") -> GoldenCase:
    return GoldenCase(id=case_id, prompt=prompt, expect={"contains_any": ["x"]})


def _request(case: GoldenCase, attempt: int = 1) -> ProviderRequest:
    return ProviderRequest(case, attempt, "system", case.prompt, "m", [])


class AsyncHTTPApp:
    """An app built on an async SDK: one AsyncClient, created on the first call."""

    name = "async-http"

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.client: httpx.AsyncClient | None = None
        self.loops: set[int] = set()
        self.closed = False

    async def complete(self, request: ProviderRequest) -> Answer:
        self.loops.add(id(asyncio.get_running_loop()))
        if self.client is None:
            self.client = httpx.AsyncClient(base_url=self.base_url, timeout=10)
        response = await self.client.post(
            "/api/chat",
            json={
                "model": "m",
                "stream": False,
                "messages": [{"role": "user", "content": request.user}],
            },
        )
        data = response.json()
        return Answer(text=data["message"]["content"], input_tokens=data.get("prompt_eval_count"))

    async def aclose(self) -> None:
        if self.client is not None:
            await self.client.aclose()
        self.closed = True


def test_async_sdk_client_is_reused_from_many_threads_on_one_loop(
    server: FakeLLMServer,
) -> None:
    server.responder = lambda req: Reply(f"answer to {req.last_user_message}", delay=0.1)
    app = AsyncHTTPApp(server.base_url)
    provider = as_provider(app)
    assert isinstance(provider, AsyncProviderAdapter) and provider.thread_safe
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(
            pool.map(lambda n: provider.complete(_request(_case(f"c{n}", f"q{n}"))), range(8))
        )
    assert [a.text for a in answers] == [f"answer to q{n}" for n in range(8)]
    assert len(app.loops) == 1  # every call ran on the one shared loop
    assert server.max_in_flight > 1  # and the calls from the pool's threads overlapped
    provider.close()
    assert app.closed  # aclose() was awaited, not left as a coroutine


def test_async_callable_and_its_crash(server: FakeLLMServer) -> None:
    calls: list[str] = []

    async def app(case: GoldenCase) -> str:
        await asyncio.sleep(0)
        calls.append(threading.current_thread().name)
        if case.id == "boom":
            raise RuntimeError("socket closed")
        return f"ok {case.id}"

    provider = as_provider(app)
    assert isinstance(provider, CallableProvider) and provider.thread_safe
    assert provider.complete(_request(_case("a"))).text == "ok a"
    with pytest.raises(ProviderError) as info:
        provider.complete(_request(_case("boom")))
    assert info.value.kind == "PROVIDER_ERROR" and "RuntimeError" in info.value.message
    assert set(calls) == {"goldeval-async"}


def test_async_provider_crash_is_an_infrastructure_error_not_a_traceback() -> None:
    class Flaky:
        name = "flaky"

        async def complete(self, request: ProviderRequest) -> Answer:
            raise ConnectionResetError("peer reset")

    with pytest.raises(ProviderError) as info:
        as_provider(Flaky()).complete(_request(_case()))
    assert info.value.kind == "PROVIDER_ERROR"
    assert info.value.message == "ConnectionResetError in flaky: peer reset"


def test_cache_around_an_async_provider(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = lambda req: "cached text"
    cached = CachedProvider(as_provider(AsyncHTTPApp(server.base_url)), tmp_path, {})
    first = cached.complete(_request(_case()))
    again = cached.complete(_request(_case()))
    cached.close()
    assert first.text == again.text == "cached text"
    assert again.input_tokens == first.input_tokens and again.tries == 0
    assert cached.hits == 1 and len(server.requests) == 1


def test_judge_awaits_an_async_provider(server: FakeLLMServer) -> None:
    server.responder = lambda req: Reply(
        '{"decision":"ACCEPT","score":0.8,"reasons":["fine"]}',
        prompt_tokens=30,
        completion_tokens=4,
    )
    app = AsyncHTTPApp(server.base_url)
    judge = Judge(as_provider(app), "judge-m", "rubric", repetitions=2)
    record = AttemptRecord(case_id="c1", index=1, status=Status.PASS)
    judge.judge(_case(), record, Answer(text="x"), [])
    judge.provider.close()
    assert record.judge is not None and record.judge.decision == "ACCEPT"
    assert record.judge.tokens is not None and record.judge.tokens.input_tokens == 60
    assert len(server.requests) == 2


def test_sync_provider_returning_a_coroutine_is_resolved_by_the_judge(
    server: FakeLLMServer,
) -> None:
    class Returns:
        name = "returns-coroutine"

        def complete(self, request: ProviderRequest) -> Any:
            async def go() -> Answer:
                return Answer(text='{"decision":"REJECT","score":0.1,"reasons":["no"]}')

            return go()

    judge = Judge(as_provider(Returns()), None, "rubric")
    record = AttemptRecord(case_id="c1", index=1, status=Status.FAIL)
    judge.judge(_case(), record, Answer(text="x"), [])
    assert record.judge is not None and record.judge.decision == "REJECT"
