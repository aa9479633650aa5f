"""A failed try of a model call as an ERROR kind, a message and whether to retry.

One place for the mapping of reference section 7: transport errors (timeouts, refused or
dropped connections), HTTP error answers (the body's wording wins over the status), limits met
while reading, and the signs of overload the limiter reacts to. Every message is built from
values already masked by the caller's ``scrub`` (the provider's secrets), excerpted after
masking so no half key is shown.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx

from goldeval.core.limits import Deadline, LimitExceeded, loads_json
from goldeval.core.settings import redact_url
from goldeval.providers.http.wire import Failure, error_text, excerpt, parse_retry_after

#: Statuses retried when tries remain (besides every 5xx).
RETRY_STATUSES = frozenset({408, 429})
#: Statuses whose ``Retry-After`` header is honoured.
RETRY_AFTER_STATUSES = frozenset({429, 503})

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
FIX_HINTS = {
    "CONTEXT_LENGTH": "the prompt does not fit the model's context window: shorten the row's "
    "prompt or the pack, or use a model with a longer context (retrying will not help)",
    "MODEL_NOT_FOUND": "check --golden-model / --golden-models and that the model is pulled "
    "or available to this key (retrying will not help)",
}


def classify(text: str) -> str | None:
    """CONTEXT_LENGTH or MODEL_NOT_FOUND when an error text says so, else None."""
    if _CONTEXT_WORDING.search(text):
        return "CONTEXT_LENGTH"
    if _MODEL_WORDING.search(text):
        return "MODEL_NOT_FOUND"
    return None


def status_kind(status: int, text: str) -> str:
    """The ERROR kind of an HTTP error answer; only RATE_LIMIT and HTTP_ERROR are retried.

    What the body says wins over the status: a context overflow or an unknown model is
    not fixed by another try even when a server reports it as a 500.
    """
    said = classify(text)
    if said is not None:
        return said
    if status == 429:
        return "RATE_LIMIT"
    if status in RETRY_STATUSES or 500 <= status <= 599:
        return "HTTP_ERROR"
    if status in (401, 403):
        return "AUTH_FAILED"
    if status == 404:
        return "NOT_FOUND"
    if 400 <= status <= 499:
        return "BAD_REQUEST"
    if 300 <= status <= 399:
        # redirects are not followed (a key must not go where the URL does not say): the
        # base URL is wrong, which another try does not fix (it was retried as HTTP_ERROR)
        return "CONFIG_ERROR"
    return "HTTP_ERROR"  # 1xx: not a usable answer


def status_failure(
    response: httpx.Response,
    body_bytes: bytes,
    *,
    endpoint: str,
    scrub: Callable[[str], str],
    hint_for: Callable[[int], str],
) -> Failure:
    """A non-2xx answer (``body_bytes``, read within the call's bounds) as a Failure;
    ``hint_for`` is the provider's hint for a status."""
    status = response.status_code
    url = redact_url(endpoint)
    body = body_bytes.decode("utf-8", errors="replace")
    shown = body
    code = ""
    try:
        data = loads_json(body, what=f"the HTTP {status} body from {url}")
    except LimitExceeded as exc:
        return Failure("PARSER_ERROR", scrub(str(exc)), retryable=False)
    except ValueError:
        pass
    else:
        if isinstance(data, dict) and data.get("error") is not None:
            shown = error_text(data["error"])
            if isinstance(data["error"], dict):
                code = f"{data['error'].get('code') or ''} {data['error'].get('type') or ''}"
    scrubbed = scrub(shown)
    cut = excerpt(scrubbed)  # mask before cutting: no half keys
    message = f"HTTP {status} from {url}" + (f": {cut}" if cut else "")
    kind = status_kind(status, f"{code} {scrubbed}")
    hint = FIX_HINTS.get(kind) or hint_for(status)
    if 300 <= status <= 399:
        where = scrub(redact_url(response.headers.get("location") or "")) or "elsewhere"
        hint = f"the server redirects to {where}: use that URL as the base URL"
    if hint:
        message += f" — {hint}"
    retry_after = None
    if status in RETRY_AFTER_STATUSES:
        retry_after = parse_retry_after(response.headers.get("retry-after"))
    retryable = kind in ("RATE_LIMIT", "HTTP_ERROR")
    return Failure(kind, message, retryable=retryable, retry_after=retry_after)


def transport_failure(
    exc: httpx.HTTPError,
    *,
    endpoint: str,
    detail: str,
    hint: str,
    read_timeout: float,
    connect_timeout: float,
    base_url_hint: str,
) -> Failure:
    """An httpx transport error as a Failure. ``detail`` is the masked excerpt of the error,
    ``hint`` where to point a connection problem, ``base_url_hint`` the option or variable
    that sets the base URL."""
    url = redact_url(endpoint)
    if isinstance(exc, httpx.ReadTimeout):
        return Failure(
            "TIMEOUT",
            f"no response from {url} within {read_timeout:g}s (read timeout) — the model "
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
            f"no connection to {url} within {connect_timeout:g}s — {hint}",
            retryable=True,
        )
    if isinstance(exc, httpx.ConnectError):
        if refused(exc):
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
            f"unsupported URL scheme in {url} — set {base_url_hint} to an http(s) URL",
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


def too_large(exc: LimitExceeded) -> Failure:
    return Failure(
        "RESPONSE_TOO_LARGE",
        f"{exc.message} — raise --golden-max-response-bytes (golden_max_response_bytes) "
        "if the model really answers this much",
        retryable=False,
    )


def expired(deadline: Deadline, *, endpoint: str, run_deadline: Deadline | None) -> Failure:
    """TIMEOUT for a try cut by its whole-call bound or by the run deadline."""
    url = redact_url(endpoint)
    if run_deadline is not None and deadline is run_deadline:
        message = (
            f"call to {url} cut at the run deadline (--golden-deadline="
            f"{run_deadline.seconds or 0:g}s) before a complete response"
        )
    else:
        message = (
            f"no complete response from {url} within {deadline.seconds or 0:g}s (the "
            "whole-call bound: connect, wait and the whole body or stream) — raise "
            "--golden-call-timeout or --golden-timeout"
        )
    return Failure("TIMEOUT", message, retryable=True)


def json_body(body: bytes, url: str, scrub: Callable[[str], str]) -> dict[str, Any] | Failure:
    """A whole (non-streamed) 2xx body as a JSON object, or why it is not one."""
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
            f"response from {redact_url(url)} is not JSON: {excerpt(scrub(text)) or '<empty>'!r}",
            retryable=False,
        )
    if not isinstance(data, dict):
        return Failure(
            "PARSER_ERROR",
            f"response from {redact_url(url)} is not a JSON object: {excerpt(scrub(text))!r}",
            retryable=False,
        )
    return data


def truncated(pieces: int, endpoint: str) -> Failure:
    """TRUNCATED_STREAM: the stream ended without a finish reason (llama.cpp's server cuts
    an older stream when a new one arrives). Retried, and a sign of overload."""
    return Failure(
        "TRUNCATED_STREAM",
        f"stream from {redact_url(endpoint)} ended after {pieces} piece"
        f"{'' if pieces == 1 else 's'} without a finish reason (cut by the server: "
        "overloaded, or another request took its slot)",
        retryable=True,
    )


#: Finish reasons with which a server says the generation itself failed (an error, an abort):
#: an infrastructure fault, retried; graded, such an answer passed (a probe).
FAILED_FINISH = frozenset({"error", "abort", "aborted", "cancelled", "canceled"})
#: Finish reasons of an answer cut short: the model's answer, graded under the manifest's
#: ``truncated`` policy (goldeval.pipeline.truncation), also when nothing was written before
#: the cut (a reasoning model that spent max_tokens thinking): never "retry the run".
CUT_FINISH = frozenset({"length", "model_length", "content_filter"})


def failed_finish(provider: str, reason: str | None) -> Failure | None:
    """PROVIDER_ERROR (retried) when ``reason`` says the generation failed on the server."""
    if reason is None or reason.lower() not in FAILED_FINISH:  # servers differ in case
        return None
    return Failure(
        "PROVIDER_ERROR",
        f"{provider} ended the answer with finish reason {reason!r}: the generation failed on "
        "the server",
        retryable=True,
    )


def cut_finish(reason: str | None) -> bool:
    """Whether ``reason`` says the answer was cut short (in any case)."""
    return reason is not None and reason.lower() in CUT_FINISH


def unfinished(provider: str, said: str) -> Failure:
    """TRUNCATED_STREAM for a whole (not streamed) answer its envelope calls unfinished
    (Ollama ``done: false``, OpenAI ``finish_reason: null``): graded as it was, it passed
    where the same answer streamed was an ERROR. Retried like a cut stream."""
    return Failure(
        "TRUNCATED_STREAM",
        f"{provider} answered with {said}: the server says the answer is not finished",
        retryable=True,
    )


def bad_stream(shown_line: str, endpoint: str) -> Failure:
    """PARSER_ERROR for a streamed line that is not JSON (``shown_line`` already masked)."""
    return Failure(
        "PARSER_ERROR",
        f"streamed response from {redact_url(endpoint)} has a line that is not JSON: "
        f"{excerpt(shown_line) or '<empty>'!r}",
        retryable=False,
    )


def refused(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return True
        current = current.__cause__ or current.__context__
    text = str(exc).lower()
    return "refused" in text or "errno 111" in text or "errno 61" in text


def overload(failure: Failure) -> bool:
    """A sign of too many calls in flight: a timeout, a stream cut short, a 429 or a 503
    (see :mod:`.limiter`)."""
    if failure.kind in ("TIMEOUT", "TRUNCATED_STREAM"):
        return True
    return failure.kind in ("RATE_LIMIT", "HTTP_ERROR") and (
        "HTTP 429" in failure.message or "HTTP 503" in failure.message
    )
