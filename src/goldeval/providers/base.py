"""The provider interface shared by fixtures, HTTP models and plain callables."""

from __future__ import annotations

import abc
import inspect
import re
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from goldeval.core.errors import ProviderError
from goldeval.core.secrets import SecretMasker
from goldeval.core.settings import redact_url

if TYPE_CHECKING:
    import asyncio

    from goldeval.dataset.case import GoldenCase


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def dump(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments}


@dataclass
class Answer:
    """What a provider returned for one attempt."""

    text: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    duration_ms: int = 0
    tries: int = 1
    model: str | None = None
    #: Milliseconds waiting for the provider's limiter before the tries (None: no limiter).
    queue_ms: int | None = None
    #: Milliseconds from send to the first streamed piece of the answered try.
    ttft_ms: int | None = None
    #: Why the model stopped (``stop``, ``length``, ``tool_calls``, ...), when the protocol says.
    finish_reason: str | None = None
    #: The counts above are estimates (characters / 4): the provider reported no usage.
    tokens_estimated: bool = False
    #: The model the server says answered (the response's ``model`` field), when it says so.
    served_model: str | None = None


def masked_answer(answer: Answer, masker: SecretMasker) -> Answer:
    """``answer`` with every secret ``masker`` knows replaced by ``***`` in all it carries
    (text, tool-call names and arguments, model, the served model's name, finish reason):
    a copy when anything was
    masked, ``answer`` itself when nothing was, so ``result is not answer`` says a secret was
    found. Free with an empty masker (a run given no credentials)."""
    if not masker:
        return answer
    mask = masker.mask
    calls = [ToolCall(mask(t.name), masker.mask_data(t.arguments)) for t in answer.tool_calls]
    masked = replace(
        answer,
        text=None if answer.text is None else masker.mask(answer.text),
        tool_calls=calls,
        model=None if answer.model is None else masker.mask(answer.model),
        served_model=None if answer.served_model is None else mask(answer.served_model),
        finish_reason=None if answer.finish_reason is None else masker.mask(answer.finish_reason),
    )
    return answer if masked == answer else masked


class ProviderRequest:
    """One generation call: the assembled messages plus the case they came from.

    ``system`` may be given as a callable: the system prompt is then assembled on first
    access, so a provider that never reads it (fixture replay) does not pay for it.
    """

    __slots__ = (
        "_system",
        "attempt",
        "case",
        "messages",
        "model",
        "options",
        "retrieved",
        "user",
        "variant",
    )

    def __init__(
        self,
        case: GoldenCase,
        attempt: int,
        system: str | Callable[[], str],
        user: str,
        model: str | None,
        retrieved: list[str],
        options: dict[str, Any] | None = None,
        messages: list[dict[str, Any]] | None = None,
        variant: str | None = None,
    ) -> None:
        self.case = case
        #: The manifest variant this call answers for (None outside variant sessions): the
        #: fixture provider replays ``fixtures/<variant>/``; a team's provider may read it.
        self.variant = variant
        #: A conversation row's turns (system first when there is one); None: system + user.
        self.messages = messages
        self.attempt = attempt
        self._system = system
        self.user = user
        self.model = model
        self.retrieved = retrieved
        self.options: dict[str, Any] = {} if options is None else options

    @property
    def system(self) -> str:
        if not isinstance(self._system, str):
            self._system = self._system()
        return self._system

    def __repr__(self) -> str:
        return (
            f"ProviderRequest(case={self.case.id!r}, attempt={self.attempt}, "
            f"model={self.model!r}, retrieved={self.retrieved!r})"
        )


class _LoopThread:
    """One event loop, on one daemon thread, that runs every coroutine a provider returns.

    Why one shared loop rather than ``asyncio.run`` per call or a loop per worker thread: an
    async client (``httpx.AsyncClient``, an SDK) created on the first call is bound to the loop
    it first ran on, so every later call must run on that same loop; and calls submitted from
    the prefetch pool's threads then really overlap on it. It also works when the calling
    thread already runs a loop of its own (``asyncio.run`` would refuse). Started on first use
    only: a run without async providers never creates it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        # asyncio (and ssl behind it) is imported with the first async provider: a run
        # without one does not pay its start-up time and memory.
        import asyncio

        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="goldeval-async", daemon=True
                )
                thread.start()
                self._loop = loop
            return self._loop

    def run(self, awaitable: Awaitable[Any]) -> Any:
        async def _await() -> Any:
            return await awaitable

        import asyncio

        future = asyncio.run_coroutine_threadsafe(_await(), self.loop())
        return future.result()


_LOOP = _LoopThread()


def resolve(value: Any) -> Any:
    """``value``, or what it evaluates to when it is awaitable (a coroutine, a future, ...)."""
    if inspect.isawaitable(value):
        return _LOOP.run(value)
    return value


def is_async_callable(func: Any) -> bool:
    """Whether calling ``func`` gives a coroutine (``async def``, also behind partial/__call__)."""
    if inspect.iscoroutinefunction(func):
        return True
    call = getattr(func, "__call__", None)  # noqa: B004 - an instance with async __call__
    return call is not None and inspect.iscoroutinefunction(call)


class Provider(abc.ABC):
    """Base class. ``complete`` must raise :class:`ProviderError` for infrastructure faults.

    ``complete`` may be ``async def`` (or return an awaitable): the plugin awaits it on its
    own event loop (see :func:`resolve`), so an async SDK client works unchanged.
    """

    name: str = ""
    #: Whether calls may run concurrently from several threads (HTTP providers: yes).
    thread_safe: bool = True

    @abc.abstractmethod
    def complete(self, request: ProviderRequest) -> Answer: ...

    def model_refusal(self, model: str) -> str | None:
        """Why ``model`` cannot be used, when the server lists its models and not this one;
        None otherwise (the default: a provider that cannot tell). Asked once, before the
        first call of a live run (the HTTP providers ask ``/v1/models`` or ``/api/tags``)."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release pooled connections."""


class CallableProvider(Provider):
    """A plain Python callable ``case -> str | Answer`` (the team's own app) as a provider."""

    name = "callable"

    def __init__(self, func: Callable[..., Any], *, thread_safe: bool | None = None) -> None:
        self.func = func
        # An async callable runs on the one shared loop: concurrent calls interleave as in any
        # asyncio program, so the prefetch pool may start several at once. A plain callable
        # may hold state that is not thread-safe, so it runs one call at a time by default.
        self.thread_safe = is_async_callable(func) if thread_safe is None else thread_safe
        self.name = getattr(func, "__name__", None) or type(func).__name__

    def complete(self, request: ProviderRequest) -> Answer:
        start = time.perf_counter()
        try:
            value = resolve(self.func(request.case))
        except ProviderError:
            raise
        except Exception as exc:  # the app crashed: that's an infrastructure error, not a FAIL
            raise error_from_exception(exc, self.name) from exc
        elapsed = max(1, round((time.perf_counter() - start) * 1000))
        if isinstance(value, Answer):
            if not value.duration_ms:
                value.duration_ms = elapsed
            return value
        if value is None:
            raise ProviderError("EMPTY_RESPONSE", f"{self.name} returned None")
        return Answer(text=str(value), duration_ms=elapsed)


#: The ERROR kind of an HTTP status a user's provider failed with, when no retry can fix it.
#: Any other status (408, 429, 5xx, ...) and an exception without one stay retryable.
_PERMANENT_STATUSES = {
    400: "BAD_REQUEST",
    401: "AUTH_FAILED",
    403: "AUTH_FAILED",
    404: "NOT_FOUND",
    422: "BAD_REQUEST",
}
_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")


def status_code_of(exc: BaseException) -> int | None:
    """The HTTP status an exception carries, in the shapes the common clients give it:
    ``status_code`` (the openai and anthropic SDKs' APIStatusError), ``response.status_code``
    (httpx.HTTPStatusError, requests.HTTPError), ``status`` (aiohttp's ClientResponseError,
    urllib's HTTPError). Looked for on the exception, then on what it was raised from (an
    app that wraps the SDK's error)."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return None
        for value in (
            getattr(seen, "status_code", None),
            getattr(getattr(seen, "response", None), "status_code", None),
            getattr(seen, "status", None),
        ):
            if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
                return value
        seen = seen.__cause__
    return None


def error_from_exception(exc: BaseException, source: str) -> ProviderError:
    """A user's provider (callable, SDK) raised ``exc``: the ERROR its HTTP status says.

    401/403 are AUTH_FAILED, 404 NOT_FOUND, 400/422 BAD_REQUEST: no retry fixes them (exit 4).
    429 is RATE_LIMIT; anything else (408, 5xx, a connection error, an app's bug) is
    PROVIDER_ERROR, retryable (exit 75). URLs in the exception's text are shown redacted
    (no userinfo, no credential parameters).
    """
    status = status_code_of(exc)
    text = _URL.sub(lambda m: redact_url(m.group(0)), str(exc))
    message = f"{type(exc).__name__} in {source}: {text}"
    if status is None:
        return ProviderError("PROVIDER_ERROR", message)
    kind = _PERMANENT_STATUSES.get(status) or ("RATE_LIMIT" if status == 429 else "PROVIDER_ERROR")
    return ProviderError(kind, f"{message} (HTTP {status})")


class AsyncProviderAdapter(Provider):
    """A provider whose ``complete`` is ``async def`` (or returns an awaitable), made blocking.

    Every caller (the prefetch pool, the cache, the judge) then sees an ordinary provider.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "") or type(inner).__name__
        # Coroutines interleave on the shared loop; a provider that says it is not
        # thread-safe still runs one call at a time.
        self.thread_safe = bool(getattr(inner, "thread_safe", True))

    def complete(self, request: ProviderRequest) -> Answer:
        try:
            answer = resolve(self.inner.complete(request))
        except ProviderError:
            raise
        except Exception as exc:  # the async app or SDK crashed: infrastructure, not a FAIL
            raise error_from_exception(exc, self.name) from exc
        if not isinstance(answer, Answer):
            if answer is None:
                raise ProviderError("EMPTY_RESPONSE", f"{self.name} returned None")
            answer = Answer(text=str(answer))
        return answer

    def close(self) -> None:
        closer = getattr(self.inner, "aclose", None) or getattr(self.inner, "close", None)
        if callable(closer):
            resolve(closer())


def as_provider(value: Any) -> Provider:
    """Accept a Provider instance or a plain callable (what a conftest fixture may return).

    Async forms are accepted too: an ``async def`` callable, a callable returning a coroutine,
    a Provider (or any object with ``complete``) whose ``complete`` is ``async def``. Their
    coroutines are awaited, never graded as text.
    """
    if isinstance(value, AsyncProviderAdapter | CallableProvider):
        return value
    complete = getattr(value, "complete", None)
    if callable(complete) and is_async_callable(complete):
        return AsyncProviderAdapter(value)
    if isinstance(value, Provider):
        return value  # a ``complete`` returning an awaitable is resolved by its callers
    if callable(complete):
        # Duck-typed: an object with ``complete`` that is no Provider subclass (what a hook
        # may return); the adapter resolves what it returns, awaitable or not.
        return AsyncProviderAdapter(value)
    if callable(value):
        return CallableProvider(value)
    raise TypeError(
        f"golden_provider must return a goldeval Provider or a callable, got {type(value).__name__}"
    )
