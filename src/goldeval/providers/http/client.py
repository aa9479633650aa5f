"""Live HTTP providers: Ollama ``/api/chat`` and OpenAI-compatible ``/v1/chat/completions``.

Wire formats and error kinds follow reference section 7, with one deliberate difference: calls
are retried (bounded by ``settings.retries``) on rate limits, 408/5xx answers, connection
failures, read timeouts and dropped connections, with exponential backoff and full jitter,
honouring ``Retry-After`` on 429/503.

Credentials never reach a message: every URL shown is redacted, request headers are never
shown, any echo of a secret in a response excerpt is masked, and :class:`ProviderError` is
raised outside of the ``except`` block that caught the httpx exception, so it carries neither a
``__cause__`` nor a ``__context__`` (httpx exceptions hold the request, headers included).

This module is the call and its retries; what a response carries is read in :mod:`.wire`, a
failed try is mapped to its ERROR kind in :mod:`.failures`, and the base URL and pooled client
are set up in :mod:`.connection`.
"""

from __future__ import annotations

import functools
import json
import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from goldeval.core.errors import ProviderError
from goldeval.core.limits import Deadline, LimitExceeded, read_bounded
from goldeval.core.settings import ProviderSettings, mask_secrets, redact_url
from goldeval.core.watchdog import WATCHDOG
from goldeval.providers.base import Answer, Provider, ProviderRequest, ToolCall
from goldeval.providers.budget import cost_of
from goldeval.providers.http.connection import base_url, body_refusal, cut, pooled_client
from goldeval.providers.http.failures import (
    FIX_HINTS,
    bad_stream,
    classify,
    expired,
    json_body,
    overload,
    status_failure,
    status_kind,
    too_large,
    transport_failure,
    truncated,
)
from goldeval.providers.http.limiter import CallLimiter, Permit
from goldeval.providers.http.wire import (
    CallStats,
    Failure,
    error_text,
    excerpt,
    finish_reason_of,
    iter_lines,
    parse_retry_after,
    text_content,
    token_count,
    tool_calls,
)

# Failure, CallStats and the wire readers live in .wire; re-exported for the protocol modules
# and callers that import them from here.
__all__ = [
    "CallStats",
    "Failure",
    "HTTPProvider",
    "finish_reason_of",
    "iter_lines",
    "parse_retry_after",
    "text_content",
    "token_count",
]


class HTTPProvider(Provider):
    """Shared machinery: one pooled ``httpx.Client``, retries, error mapping, parsing."""

    name = "http"
    thread_safe = True
    #: Where the hint in connection errors points (this option or the variable below).
    base_url_option = "--golden-base-url"
    #: Where the hint in connection errors points (``--golden-base-url`` or this variable).
    base_url_env = ""
    #: Default base URL when the settings have none.
    default_base_url = ""

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self._sleep = sleep
        self._rng = rng if rng is not None else random.Random()
        self._rng_lock = threading.Lock()
        self._closed = False
        url = base_url(settings, self.default_base_url, self.base_url_option)
        self._root, self._query, self._secrets = url.root, url.query, url.secrets
        #: The base URL as it may be shown: no userinfo, credential parameters masked.
        self.base_url = url.shown
        self._client = pooled_client(settings, self._auth(url.user, url.password))
        self._client.headers.update(self._extra_headers())
        #: Shared by every thread calling this provider; None: no limit (judge, embeddings).
        self.limiter: CallLimiter | None = None
        if settings.max_concurrency is not None:
            self.limiter = CallLimiter(
                settings.max_concurrency,
                adaptive=settings.adaptive,
                rpm=settings.rpm,
                tpm=settings.tpm,
            )

    # -- protocol hooks ----------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        raise NotImplementedError

    def _url(self, path: str) -> str:
        """``{base}{path}`` with the base URL's query string, if it has one."""
        return f"{self._root}{path}" + (f"?{self._query}" if self._query else "")

    def _auth(self, user: str | None, password: str | None) -> httpx.Auth | None:
        return None

    def _extra_headers(self) -> dict[str, str]:
        return {}

    def _body(self, request: ProviderRequest, model: str) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, data: dict[str, Any]) -> Answer | Failure:
        raise NotImplementedError

    # -- public API --------------------------------------------------------------------------

    def complete(self, request: ProviderRequest) -> Answer:
        if self._closed:
            raise ProviderError("PROVIDER_ERROR", f"{self.name} provider is closed", tries=0)
        model = request.model or self.settings.model
        if not model:
            raise ProviderError(
                "CONFIG_ERROR",
                f"no model configured for {self.name}: pass --golden-model or --golden-models",
                tries=0,
            )
        try:
            payload = json.dumps(self._body(request, model), ensure_ascii=False).encode("utf-8")
        except (TypeError, ValueError) as exc:
            message = f"request body for {self.name} is not JSON-serialisable: {exc}"
        else:
            return self._send(payload, model)
        # Raised here, outside the except block: no chained exception.
        raise ProviderError("PROVIDER_ERROR", self._scrub(message), tries=0)

    def close(self) -> None:
        self._closed = True
        self._client.close()

    def __enter__(self) -> HTTPProvider:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, model={self.settings.model!r})"

    # -- one call with retries, for any JSON endpoint (chat here, embeddings in a subclass) --

    def request_json(
        self,
        payload: bytes,
        parse: Callable[[dict[str, Any]], Any],
        stats: CallStats | None = None,
        streamed: bool = False,
    ) -> tuple[Any, int]:
        """POST ``payload`` to :attr:`endpoint` with this client's retries, error mapping and
        masking; ``parse`` turns the JSON object into a result or a :class:`Failure`.

        Returns ``(result, tries)``; raises :class:`ProviderError` (masked, no chained
        exception) when every try failed or a failure is not retryable. ``stats``, when given,
        receives the tries, queue wait, time from send and tokens of every try.
        """
        if self._closed:
            raise ProviderError("PROVIDER_ERROR", f"{self.name} client is closed", tries=0)
        stats = stats if stats is not None else CallStats()
        total = max(0, self.settings.retries) + 1
        limiter = self.limiter
        estimate = limiter.estimate_tokens(len(payload)) if limiter is not None else 0.0
        run_deadline = self.settings.run_deadline
        while True:
            stats.tries += 1
            permit: Permit | None = limiter.acquire(estimate) if limiter is not None else None
            if permit is not None:
                stats.queue_s += permit.queue_s
            sent = time.perf_counter()
            # The whole try is bounded, and never outlives the run deadline.
            deadline = Deadline.earliest(Deadline(self.settings.whole_call_seconds()), run_deadline)
            try:
                outcome, ttft = self._permitted_try(payload, parse, streamed, deadline, permit)
            finally:
                took = time.perf_counter() - sent
                stats.busy_s += took
            if isinstance(outcome, Failure):
                retry_after = outcome.retry_after
                if retry_after is not None:
                    retry_after = min(max(0.0, self.settings.backoff_max), retry_after)
                if permit is not None and limiter is not None:
                    limiter.release(
                        permit,
                        overloaded=overload(outcome),
                        retry_after=retry_after if outcome.retryable else None,
                    )
            else:
                tokens_in = getattr(outcome, "input_tokens", None)
                tokens_out = getattr(outcome, "output_tokens", None)
                stats.add_tokens(tokens_in, tokens_out)
                stats.ttft_s = ttft
                if permit is not None and limiter is not None:
                    actual = None
                    if tokens_in is not None or tokens_out is not None:
                        actual = (tokens_in or 0) + (tokens_out or 0)
                    limiter.release(
                        permit,
                        latency=ttft if ttft is not None else took,
                        actual_tokens=actual,
                        answer_tokens=tokens_out,
                    )
                return outcome, stats.tries
            if not outcome.retryable or stats.tries >= total or _passed(run_deadline):
                # The number of tries travels as ``tries``; whoever shows the error adds it
                # once (a suffix here made "after 4 tries ... (after 4 tries)").
                error = ProviderError(outcome.kind, self._scrub(outcome.message), tries=stats.tries)
                error.duration_ms = max(1, round(stats.busy_s * 1000))  # type: ignore[attr-defined]
                error.queue_ms = round(stats.queue_s * 1000)  # type: ignore[attr-defined]
                raise error
            if limiter is not None and outcome.retry_after is not None:
                continue  # the limiter holds every caller until Retry-After has passed
            pause = self._delay(stats.tries, outcome.retry_after)
            left = run_deadline.remaining() if run_deadline is not None else None
            pause = pause if left is None else min(pause, left)
            self._sleep(pause)
            stats.busy_s += pause

    def _permitted_try(
        self,
        payload: bytes,
        parse: Callable[[dict[str, Any]], Any] | None,
        streamed: bool,
        deadline: Deadline,
        permit: Permit | None,
    ) -> tuple[Any, float | None]:
        """:meth:`_try_once` holding ``permit``, which goes back to the limiter if anything
        escapes (a parser's bug, KeyboardInterrupt in a serial call): a lost permit lowers
        the limit for good, and once every permit is lost each later call waits forever."""
        try:
            if self._closed:  # closed while this call waited for a permit or a retry
                return Failure(
                    "PROVIDER_ERROR", f"{self.name} client is closed", retryable=False
                ), None
            return self._try_once(payload, parse, streamed, deadline)
        except BaseException:
            if permit is not None and self.limiter is not None:
                self.limiter.release(permit)
            raise

    # -- retries -----------------------------------------------------------------------------

    def _send(self, payload: bytes, model: str) -> Answer:
        stats = CallStats()
        answer, tries = self.request_json(payload, self._parse, stats, self.settings.stream)
        assert isinstance(answer, Answer)
        answer.tries = tries
        answer.model = model
        # Latency and tokens cover every try; the wait for a permit is reported apart.
        answer.duration_ms = max(1, round(stats.busy_s * 1000))
        answer.queue_ms = round(stats.queue_s * 1000) if self.limiter is not None else None
        answer.ttft_ms = round(stats.ttft_s * 1000) if stats.ttft_s is not None else None
        answer.input_tokens = stats.input_tokens
        answer.output_tokens = stats.output_tokens
        answer.cost = self._cost(stats.input_tokens, stats.output_tokens, model)
        return answer

    def _delay(self, tries: int, retry_after: float | None) -> float:
        cap = max(0.0, self.settings.backoff_max)
        if retry_after is not None:
            return min(cap, retry_after)
        ceiling = min(cap, max(0.0, self.settings.backoff_base) * 2 ** (tries - 1))
        with self._rng_lock:
            return self._rng.uniform(0, ceiling)

    # -- one try -----------------------------------------------------------------------------

    def _try_once(
        self,
        payload: bytes,
        parse: Callable[[dict[str, Any]], Any] | None = None,
        streamed: bool = False,
        deadline: Deadline | None = None,
    ) -> tuple[Any, float | None]:
        """One try: ``(result or Failure, seconds from send to the first streamed piece)``.

        The try ends by ``deadline`` (default: the whole-call bound): every httpx timeout is
        capped at the time left, the body is read through :func:`read_bounded`, and the
        watchdog shuts the socket down if a read still blocks when the time is up.
        """
        url = self.endpoint
        if deadline is None:
            deadline = Deadline(self.settings.whole_call_seconds())
        if deadline.expired():
            return self._expired(deadline), None
        start = time.perf_counter()
        try:
            with self._client.stream(
                "POST", url, content=payload, timeout=self._timeouts(deadline)
            ) as response:
                alarm = WATCHDOG.arm(deadline, functools.partial(cut, response))
                try:
                    outcome, first = self._read_response(response, parse, streamed, deadline)
                finally:
                    alarm.cancel()
        except httpx.HTTPError as exc:
            if deadline.expired():
                return self._expired(deadline), None
            return self._transport_failure(exc), None
        except httpx.InvalidURL as exc:
            return Failure(
                "CONFIG_ERROR",
                f"invalid URL {redact_url(url)}: {exc} — set {self.base_url_option} or "
                f"{self.base_url_env}",
                retryable=False,
            ), None
        except RuntimeError:
            # httpx refuses to send on a client closed by another thread.
            return Failure(
                "PROVIDER_ERROR", f"{self.name} provider is closed", retryable=False
            ), None
        return outcome, (first - start if first is not None else None)

    def _timeouts(self, deadline: Deadline) -> httpx.Timeout:
        """This client's timeouts, none longer than the time ``deadline`` leaves."""
        s = self.settings
        left = deadline.remaining()

        def cap(seconds: float) -> float:
            return seconds if left is None else max(0.001, min(seconds, left))

        return httpx.Timeout(
            connect=cap(s.connect_timeout),
            read=cap(s.read_timeout),
            write=cap(s.read_timeout),
            pool=cap(s.connect_timeout + s.read_timeout),
        )

    def _read_response(
        self,
        response: httpx.Response,
        parse: Callable[[dict[str, Any]], Any] | None,
        streamed: bool,
        deadline: Deadline,
    ) -> tuple[Any, float | None]:
        """The answered try as a result or a Failure, the body read within the bounds;
        ``perf_counter`` time of the first streamed piece, when there is one."""
        url = self.endpoint
        cap = self.settings.max_response_bytes
        what = f"the response from {redact_url(url)}"
        refused = body_refusal(response, cap, what)
        if refused is not None:
            return self._too_large(refused), None
        chunks = read_bounded(response.iter_bytes(), max_bytes=cap, deadline=deadline, what=what)
        first: float | None = None
        try:
            if not 200 <= response.status_code < 300:
                return self._status_failure(response, b"".join(chunks)), None
            if streamed:
                assembled, first = self._read_stream(iter_lines(chunks))
                return self._outcome(assembled, url, parse), first
            body = b"".join(chunks)
            return self._plain_outcome(body, url, parse), None
        except LimitExceeded as exc:
            return self._limit_failure(exc, deadline), first

    def _plain_outcome(
        self, body: bytes, url: str, parse: Callable[[dict[str, Any]], Any] | None
    ) -> Any:
        """A whole (non-streamed) 2xx body as a result or a Failure."""
        data = json_body(body, url, self._scrub)
        return self._outcome(data, url, parse)

    def _limit_failure(self, exc: LimitExceeded, deadline: Deadline) -> Failure:
        """A limit met while reading a response, as the ERROR kind it means."""
        if exc.limit == "call_seconds":
            return self._expired(deadline)
        if exc.limit == "response_bytes":
            return self._too_large(exc)
        # json_depth: a document no parser should follow; the same body again is no better.
        return Failure("PARSER_ERROR", self._scrub(str(exc)), retryable=False)

    def _too_large(self, exc: LimitExceeded) -> Failure:
        return too_large(exc)

    def _expired(self, deadline: Deadline) -> Failure:
        """TIMEOUT for a try cut by its whole-call bound or by the run deadline."""
        return expired(deadline, endpoint=self.endpoint, run_deadline=self.settings.run_deadline)

    def _outcome(
        self,
        data: dict[str, Any] | Failure,
        url: str,
        parse: Callable[[dict[str, Any]], Any] | None,
    ) -> Any:
        """A parsed JSON object (or one assembled from a stream) as a result or a Failure."""
        if isinstance(data, Failure):
            return data
        if data.get("error") is not None:
            shown = self._scrub(error_text(data["error"]))
            kind = classify(shown) or "PROVIDER_ERROR"
            message = f"{self.name} reported an error: {excerpt(shown)}"
            if kind in FIX_HINTS:
                message += f" — {FIX_HINTS[kind]}"
            return Failure(kind, message, retryable=False)
        outcome = (parse or self._parse)(data)
        if isinstance(outcome, Answer):
            outcome.cost = self._cost(outcome.input_tokens, outcome.output_tokens)
        return outcome

    def _read_stream(self, lines: Iterable[str]) -> tuple[dict[str, Any] | Failure, float | None]:
        """A streamed answer (its ``lines``, read within the call's bounds) assembled into the
        protocol's non-streamed JSON shape, and the ``perf_counter`` time its first piece
        arrived. Each protocol module implements it. A stream that ends without saying why
        the model stopped is a :meth:`_truncated` failure."""
        raise NotImplementedError

    def _truncated(self, pieces: int) -> Failure:
        return truncated(pieces, self.endpoint)

    def _bad_stream(self, line: str) -> Failure:
        return bad_stream(self._scrub(line), self.endpoint)

    def _transport_failure(self, exc: httpx.HTTPError) -> Failure:
        return transport_failure(
            exc,
            endpoint=self.endpoint,
            detail=excerpt(self._scrub(str(exc))) or type(exc).__name__,
            hint=f"is the model server running? set {self.base_url_option} or {self.base_url_env}",
            read_timeout=self.settings.read_timeout,
            connect_timeout=self.settings.connect_timeout,
            base_url_hint=f"{self.base_url_option} or {self.base_url_env}",
        )

    def _status_failure(self, response: httpx.Response, raw: bytes | None = None) -> Failure:
        """A non-2xx answer as a Failure; ``raw`` is its body, read within the call's bounds
        (default: ``response.content``, for a response already read)."""
        body = response.content if raw is None else raw
        return status_failure(
            response, body, endpoint=self.endpoint, scrub=self._scrub, hint_for=self._status_hint
        )

    _status_kind = staticmethod(status_kind)

    def _status_hint(self, status: int) -> str:
        if status == 429:
            return "rate limited; lower --golden-concurrency or raise --golden-retries"
        if status == 404:
            return "wrong --golden-base-url, or the model is not available on the server"
        return ""

    # -- helpers -----------------------------------------------------------------------------

    def _cost(
        self, tokens_in: int | None, tokens_out: int | None, model: str | None = None
    ) -> float | None:
        return cost_of(self.settings, tokens_in, tokens_out, model)

    def _scrub(self, message: str) -> str:
        return mask_secrets(message, self._secrets)

    def _tool_calls(self, raw: Any) -> list[ToolCall] | Failure:
        return tool_calls(raw)


def _passed(deadline: Deadline | None) -> bool:
    return deadline is not None and deadline.expired()
