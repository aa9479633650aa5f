"""Live HTTP providers: Ollama ``/api/chat`` and OpenAI-compatible ``/v1/chat/completions``.

Wire formats and error kinds follow reference section 7, with one deliberate difference: calls
are retried (bounded by ``settings.retries``) on rate limits, 408/5xx answers, connection
failures, read timeouts and dropped connections, with exponential backoff and full jitter,
honouring ``Retry-After`` on 429/503.

Credentials never reach a message: every URL shown is redacted, request headers are never
shown, any echo of a secret in a response excerpt is masked, and :class:`ProviderError` is
raised outside of the ``except`` block that caught the httpx exception, so it carries neither a
``__cause__`` nor a ``__context__`` (httpx exceptions hold the request, headers included).
"""

from __future__ import annotations

import codecs
import email.utils
import functools
import json
import math
import random
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import timezone
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from goldeval.core.errors import ConfigError, ProviderError
from goldeval.core.limits import WATCHDOG, Deadline, LimitExceeded, loads_json, read_bounded
from goldeval.core.settings import (
    ProviderSettings,
    mask_secrets,
    redact_url,
    secret_forms,
    strip_userinfo,
    url_secrets,
)
from goldeval.providers.base import Answer, Provider, ProviderRequest, ToolCall
from goldeval.providers.budget import cost_of
from goldeval.providers.http.limiter import CallLimiter, Permit

__all__ = [
    "CallStats",
    "Failure",
    "HTTPProvider",
    "parse_retry_after",
    "text_content",
    "token_count",
]

#: Longest excerpt of an error body quoted in a message.
_EXCERPT = 200
#: Statuses retried when tries remain (besides every 5xx).
_RETRY_STATUSES = frozenset({408, 429})
#: Statuses whose ``Retry-After`` header is honoured.
_RETRY_AFTER_STATUSES = frozenset({429, 503})

# Wordings of errors that no retry can fix, whatever the status they come with (OpenAI's
# ``context_length_exceeded`` / ``model_not_found`` codes, vLLM's and llama.cpp's "maximum
# context length", Ollama's "input length exceeds the context length" and "model "x" not found,
# try pulling it first"). Matched on the unmasked-then-masked error text, case-insensitively.
_CONTEXT_WORDING = re.compile(
    r"context[_ ]length|context[_ ]window|maximum context|too many tokens|prompt is too long"
    r"|input (?:length|is too long)|exceeds? (?:the )?(?:model'?s? )?(?:max(?:imum)? )?"
    r"(?:context|token limit|number of tokens)",
    re.IGNORECASE,
)
_MODEL_WORDING = re.compile(
    r"model_not_found|try pulling it|(?:unknown|no such|invalid) model"
    r"|model\b[^.\n]{0,120}?\b(?:not found|does not exist)",
    re.IGNORECASE,
)
#: Hints for the kinds a retry cannot fix (they say what to change instead).
_FIX_HINTS = {
    "CONTEXT_LENGTH": "the prompt does not fit the model's context window: shorten the row's "
    "prompt or the pack, or use a model with a longer context (retrying will not help)",
    "MODEL_NOT_FOUND": "check --golden-model / --golden-models and that the model is pulled "
    "or available to this key (retrying will not help)",
}


def _classify(text: str) -> str | None:
    """CONTEXT_LENGTH or MODEL_NOT_FOUND when an error text says so, else None."""
    if _CONTEXT_WORDING.search(text):
        return "CONTEXT_LENGTH"
    if _MODEL_WORDING.search(text):
        return "MODEL_NOT_FOUND"
    return None


@dataclass
class Failure:
    """One failed try: what to report and whether another try may help."""

    kind: str
    message: str
    retryable: bool
    retry_after: float | None = None


@dataclass
class CallStats:
    """One call over all its tries: what the attempt reports as its latency and tokens.

    ``busy_s`` runs from each try's send to its end, plus the backoff between tries; the wait
    for a permit (:mod:`.limiter`) before each try is ``queue_s``, kept apart.
    """

    tries: int = 0
    queue_s: float = 0.0
    busy_s: float = 0.0
    ttft_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None

    def add_tokens(self, tokens_in: int | None, tokens_out: int | None) -> None:
        if tokens_in is not None:
            self.input_tokens = (self.input_tokens or 0) + tokens_in
        if tokens_out is not None:
            self.output_tokens = (self.output_tokens or 0) + tokens_out


def _excerpt(text: str, limit: int = _EXCERPT) -> str:
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1] + "…"


def _error_text(error: Any) -> str:
    """The human text of an ``error`` field: a string, ``{message}``, or its JSON."""
    if isinstance(error, str):
        return error
    if isinstance(error, dict):
        msg = error.get("message")
        if isinstance(msg, str) and msg.strip():
            return msg
    try:
        return json.dumps(error, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(error)


def token_count(value: Any) -> int | None:
    """A token count only when it is a (non-negative, integral) number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and value >= 0:
        return int(value)
    return None


def text_content(content: Any) -> str | None:
    """Message content as text; OpenAI-style lists of parts are joined; other shapes: None."""
    if content is None:
        return None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return None


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """One verifying TLS context per process (building one costs ~20 ms; sharing is safe)."""
    return httpx.create_ssl_context()


def finish_reason_of(value: Any) -> str | None:
    """Why the model stopped, as the protocol says it (OpenAI ``finish_reason``, Ollama
    ``done_reason``), when it is a plain string."""
    return value if isinstance(value, str) and value else None


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds from now (delta-seconds or an HTTP date); None if invalid."""
    if value is None:
        return None
    raw = value.strip()
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


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
        base = (settings.base_url or self.default_base_url).strip()
        if base and "://" not in base:
            base = "http://" + base
        user = settings.user
        password = settings.password
        try:
            parts = urlsplit(base)
            url_user, url_password = parts.username, parts.password
        except ValueError:
            raise ConfigError(
                f"invalid base URL {redact_url(base)!r}", field=self.base_url_option
            ) from None
        if url_user is not None:  # userinfo in the URL wins, as in the reference
            user = unquote(url_user)
            if url_password is not None:
                password = unquote(url_password)
        plain = strip_userinfo(base)
        #: Where endpoints are built: no userinfo, no query, no trailing slash.
        self._root = plain.split("#", 1)[0].split("?", 1)[0].rstrip("/")
        #: The base URL's query (``?api-version=...``, ``?key=...``), sent with every call.
        self._query = parts.query
        #: The base URL as it may be shown: no userinfo, credential parameters masked.
        self.base_url = redact_url(plain).rstrip("/")
        # The one masking list (goldeval.core.settings.secret_forms) for chat, judge and embeddings:
        # the password, the key, their percent-encoded forms, the Basic token, and credential
        # values of the base URL's query.
        self._secrets = secret_forms(user, password, settings.api_key, url_secrets(base))
        self._client = httpx.Client(
            timeout=httpx.Timeout(
                connect=settings.connect_timeout,
                read=settings.read_timeout,
                write=settings.read_timeout,
                # Waiting for a free pooled connection is bounded like one call.
                pool=settings.connect_timeout + settings.read_timeout,
            ),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
            headers={"Content-Type": "application/json", "Accept": "application/json"},
            auth=self._auth(user, password),
            follow_redirects=False,
            verify=_ssl_context(),
        )
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
                outcome, ttft = self._try_once(payload, parse, streamed, deadline)
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
                        overloaded=_overload(outcome),
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
                alarm = WATCHDOG.arm(deadline, functools.partial(_cut, response))
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
        declared = _declared_length(response)
        if declared is not None and declared > cap:
            return self._too_large(
                LimitExceeded(
                    "response_bytes",
                    f"{what} declares {declared} bytes (Content-Length), over the limit of "
                    f"{cap} bytes",
                )
            ), None
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
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return Failure(
                "PARSER_ERROR",
                f"response from {redact_url(url)} is not valid UTF-8",
                retryable=False,
            )
        try:
            data = loads_json(text, what=f"the response from {redact_url(url)}")
        except ValueError:
            return Failure(
                "PARSER_ERROR",
                f"response from {redact_url(url)} is not JSON: "
                f"{_excerpt(self._scrub(text)) or '<empty>'!r}",
                retryable=False,
            )
        if not isinstance(data, dict):
            return Failure(
                "PARSER_ERROR",
                f"response from {redact_url(url)} is not a JSON object: "
                f"{_excerpt(self._scrub(text))!r}",
                retryable=False,
            )
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
        return Failure(
            "RESPONSE_TOO_LARGE",
            f"{exc.message} — raise --golden-max-response-bytes (golden_max_response_bytes) "
            "if the model really answers this much",
            retryable=False,
        )

    def _expired(self, deadline: Deadline) -> Failure:
        """TIMEOUT for a try cut by its whole-call bound or by the run deadline."""
        url = redact_url(self.endpoint)
        run = self.settings.run_deadline
        if run is not None and deadline is run:
            message = (
                f"call to {url} cut at the run deadline (--golden-deadline="
                f"{run.seconds or 0:g}s) before a complete response"
            )
        else:
            message = (
                f"no complete response from {url} within {deadline.seconds or 0:g}s (the "
                "whole-call bound: connect, wait and the whole body or stream) — raise "
                "--golden-call-timeout or --golden-timeout"
            )
        return Failure("TIMEOUT", message, retryable=True)

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
            shown = self._scrub(_error_text(data["error"]))
            kind = _classify(shown) or "PROVIDER_ERROR"
            message = f"{self.name} reported an error: {_excerpt(shown)}"
            if kind in _FIX_HINTS:
                message += f" — {_FIX_HINTS[kind]}"
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
        """TRUNCATED_STREAM: the stream ended without a finish reason (llama.cpp's server cuts
        an older stream when a new one arrives). Retried, and a sign of overload."""
        return Failure(
            "TRUNCATED_STREAM",
            f"stream from {redact_url(self.endpoint)} ended after {pieces} piece"
            f"{'' if pieces == 1 else 's'} without a finish reason (cut by the server: "
            "overloaded, or another request took its slot)",
            retryable=True,
        )

    def _bad_stream(self, line: str) -> Failure:
        return Failure(
            "PARSER_ERROR",
            f"streamed response from {redact_url(self.endpoint)} has a line that is not JSON: "
            f"{_excerpt(self._scrub(line)) or '<empty>'!r}",
            retryable=False,
        )

    def _transport_failure(self, exc: httpx.HTTPError) -> Failure:
        url = redact_url(self.endpoint)
        detail = _excerpt(self._scrub(str(exc))) or type(exc).__name__
        hint = f"is the model server running? set {self.base_url_option} or {self.base_url_env}"
        s = self.settings
        if isinstance(exc, httpx.ReadTimeout):
            return Failure(
                "TIMEOUT",
                f"no response from {url} within {s.read_timeout:g}s (read timeout) — the model "
                "may be loading or overloaded; raise --golden-timeout or OLLAMA_TIMEOUT_MINUTES",
                retryable=True,
            )
        if isinstance(exc, (httpx.WriteTimeout, httpx.PoolTimeout)):
            what = (
                "sending the request"
                if isinstance(exc, httpx.WriteTimeout)
                else ("waiting for a free connection")
            )
            return Failure("TIMEOUT", f"timed out {what} to {url}", retryable=True)
        if isinstance(exc, httpx.ConnectTimeout):
            return Failure(
                "MODEL_UNAVAILABLE",
                f"no connection to {url} within {s.connect_timeout:g}s — {hint}",
                retryable=True,
            )
        if isinstance(exc, httpx.ConnectError):
            if _refused(exc):
                return Failure(
                    "MODEL_UNAVAILABLE", f"connection refused by {url} — {hint}", retryable=True
                )
            return Failure(
                "MODEL_UNAVAILABLE", f"cannot connect to {url}: {detail} — {hint}", retryable=True
            )
        if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
            return Failure(
                "MODEL_UNAVAILABLE",
                f"connection to {url} dropped before a complete response ({detail}) — the "
                "server may have crashed or restarted",
                retryable=True,
            )
        if isinstance(exc, httpx.UnsupportedProtocol):
            return Failure(
                "CONFIG_ERROR",
                f"unsupported URL scheme in {url} — set {self.base_url_option} or "
                f"{self.base_url_env} to an http(s) URL",
                retryable=False,
            )
        if isinstance(exc, httpx.DecodingError):
            return Failure(
                "PARSER_ERROR", f"cannot decode the response from {url}: {detail}", retryable=False
            )
        return Failure(
            "MODEL_UNAVAILABLE",
            f"HTTP transport error talking to {url}: {type(exc).__name__}: {detail}",
            retryable=False,
        )

    def _status_failure(self, response: httpx.Response, raw: bytes | None = None) -> Failure:
        """A non-2xx answer as a Failure; ``raw`` is its body, read within the call's bounds
        (default: ``response.content``, for a response already read)."""
        status = response.status_code
        url = redact_url(self.endpoint)
        body = (response.content if raw is None else raw).decode("utf-8", errors="replace")
        shown = body
        code = ""
        try:
            data = loads_json(body, what=f"the HTTP {status} body from {url}")
        except LimitExceeded as exc:
            return Failure("PARSER_ERROR", self._scrub(str(exc)), retryable=False)
        except ValueError:
            pass
        else:
            if isinstance(data, dict) and data.get("error") is not None:
                shown = _error_text(data["error"])
                if isinstance(data["error"], dict):
                    code = f"{data['error'].get('code') or ''} {data['error'].get('type') or ''}"
        scrubbed = self._scrub(shown)
        excerpt = _excerpt(scrubbed)  # mask before cutting: no half keys
        message = f"HTTP {status} from {url}" + (f": {excerpt}" if excerpt else "")
        kind = self._status_kind(status, f"{code} {scrubbed}")
        hint = _FIX_HINTS.get(kind) or self._status_hint(status)
        if hint:
            message += f" — {hint}"
        retry_after = None
        if status in _RETRY_AFTER_STATUSES:
            retry_after = parse_retry_after(response.headers.get("retry-after"))
        retryable = kind in ("RATE_LIMIT", "HTTP_ERROR")
        return Failure(kind, message, retryable=retryable, retry_after=retry_after)

    @staticmethod
    def _status_kind(status: int, text: str) -> str:
        """The ERROR kind of an HTTP error answer; only RATE_LIMIT and HTTP_ERROR are retried.

        What the body says wins over the status: a context overflow or an unknown model is
        not fixed by another try even when a server reports it as a 500.
        """
        said = _classify(text)
        if said is not None:
            return said
        if status == 429:
            return "RATE_LIMIT"
        if status in _RETRY_STATUSES or 500 <= status <= 599:
            return "HTTP_ERROR"
        if status in (401, 403):
            return "AUTH_FAILED"
        if status == 404:
            return "NOT_FOUND"
        if 400 <= status <= 499:
            return "BAD_REQUEST"
        return "HTTP_ERROR"  # 1xx/3xx (redirects are not followed): not a usable answer

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
        if raw is None:
            return []
        if not isinstance(raw, list):
            return Failure("PARSER_ERROR", "tool_calls is not a list", retryable=False)
        calls: list[ToolCall] = []
        for index, item in enumerate(raw):
            fn = item.get("function") if isinstance(item, dict) else None
            if not isinstance(fn, dict):
                fn = item if isinstance(item, dict) else None
            name = fn.get("name") if fn is not None else None
            if not isinstance(name, str) or not name:
                return Failure(
                    "PARSER_ERROR", f"tool call #{index + 1} has no function name", retryable=False
                )
            assert fn is not None
            args = fn.get("arguments")
            if args is None or (isinstance(args, str) and not args.strip()):
                parsed: Any = {}
            elif isinstance(args, str):
                try:
                    parsed = loads_json(args, what=f"tool call {name!r} arguments")
                except LimitExceeded as exc:
                    return Failure("PARSER_ERROR", str(exc), retryable=False)
                except ValueError:
                    return Failure(
                        "PARSER_ERROR",
                        f"tool call {name!r} has arguments that are not JSON: "
                        f"{_excerpt(args, 80)!r}",
                        retryable=False,
                    )
            else:
                parsed = args
            if not isinstance(parsed, dict):
                return Failure(
                    "PARSER_ERROR",
                    f"tool call {name!r} arguments are not a JSON object",
                    retryable=False,
                )
            calls.append(ToolCall(name=name, arguments=parsed))
        return calls

    @staticmethod
    def _messages(request: ProviderRequest) -> list[dict[str, str]]:
        messages: list[dict[str, str]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.append({"role": "user", "content": request.user or ""})
        return messages


def _refused(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return True
        current = current.__cause__ or current.__context__
    text = str(exc).lower()
    return "refused" in text or "errno 111" in text or "errno 61" in text


def _overload(failure: Failure) -> bool:
    """A sign of too many calls in flight: a timeout, a stream cut short, a 429 or a 503
    (see :mod:`.limiter`)."""
    if failure.kind in ("TIMEOUT", "TRUNCATED_STREAM"):
        return True
    return failure.kind in ("RATE_LIMIT", "HTTP_ERROR") and (
        "HTTP 429" in failure.message or "HTTP 503" in failure.message
    )


def _passed(deadline: Deadline | None) -> bool:
    return deadline is not None and deadline.expired()


def _declared_length(response: httpx.Response) -> int | None:
    """The body size a response declares (Content-Length), when it declares a valid one."""
    raw = response.headers.get("content-length")
    if raw is None:
        return None
    try:
        return int(raw.split(",")[0].strip())
    except ValueError:
        return None


def _cut(response: httpx.Response) -> None:
    """Shut down ``response``'s socket: a read blocked on it returns at once (the watchdog's
    action when a call's deadline passes between two pieces of its body)."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if isinstance(sock, socket.socket):
        # socket.socket's own shutdown, not ssl.SSLSocket's (that one also drops the TLS
        # object under the reading thread): the read sees end of file and fails.
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def iter_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines of a streamed body (UTF-8, ``\n`` or ``\r\n`` ends), piece by piece.

    A line is held only until its end arrives; ``chunks`` is already size-bounded, so a line
    that never ends cannot grow past the response limit.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending: list[str] = []
    for chunk in chunks:
        text = decoder.decode(chunk)
        if "\n" not in text:
            pending.append(text)
            continue
        parts = text.split("\n")
        parts[0] = "".join(pending) + parts[0]
        pending = [parts.pop()]
        for line in parts:
            yield line.removesuffix("\r")
    tail = "".join(pending) + decoder.decode(b"", final=True)
    if tail:
        yield tail.removesuffix("\r")
