"""Embedding clients for the ``similarity`` grader: Ollama and OpenAI-compatible servers.

Wire formats:

* Ollama: ``POST {base_url}/api/embed`` with ``{"model", "input": [a, b]}`` →
  ``{"embeddings": [[...], [...]]}``.
* OpenAI: ``POST {base_url}/v1/embeddings`` (or ``{base_url}/embeddings`` when the base URL
  already ends in ``/v1``) with ``{"model", "input": [a, b]}`` →
  ``{"data": [{"embedding": [...], "index": 0}, ...]}``.

Configuration (:func:`embedding_settings`), per field: the manifest's
``grader_options: {similarity: {provider, base_url, model, timeout, retries, api_key_env}}``
first, then
the environment: ``GOLDEVAL_EMBED_PROVIDER`` (``ollama`` | ``openai``), ``GOLDEVAL_EMBED_URL``,
``GOLDEVAL_EMBED_MODEL``, ``GOLDEVAL_EMBED_API_KEY``, ``GOLDEVAL_EMBED_TIMEOUT`` (seconds) and
``GOLDEVAL_EMBED_RETRIES`` (default 3).
Nothing is configured until a provider is named; a named provider without URL or model uses
its default (:data:`DEFAULT_BASE_URLS`, :data:`DEFAULT_MODELS`). API keys are read from the
environment only (``api_key_env`` names the variable), never from a committed manifest.

Calls go through the chat providers' HTTP client (:class:`goldeval.providers.http.HTTPProvider`):
pooled connections, the same retries with backoff on 429/408/5xx/timeouts/dropped connections,
the same error mapping and the same masking (:func:`goldeval.core.settings.secret_forms`: the key,
the password, their percent-encoded forms, the Basic token, credential query values; masked
before any excerpt is cut). Every failure is raised as ``ProviderError("EMBEDDING_ERROR",
"<kind>[ after N tries]: message")``. Messages show the URL without userinfo and with
credential parameters masked, never request headers, and chain no exception that holds the
request (and its headers).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import httpx

from goldeval.core.errors import ConfigError, ProviderError
from goldeval.core.limits import estimate_tokens
from goldeval.core.settings import ProviderSettings, check_credential, redact_url
from goldeval.providers.budget import Meter, current_meter
from goldeval.providers.http import HTTPProvider
from goldeval.providers.http.client import token_count
from goldeval.providers.http.limiter import CallLimiter

__all__ = [
    "DEFAULT_BASE_URLS",
    "DEFAULT_MODELS",
    "ENV_API_KEY",
    "ENV_MODEL",
    "ENV_PROVIDER",
    "ENV_RETRIES",
    "ENV_TIMEOUT",
    "ENV_URL",
    "KINDS",
    "MAX_INPUT_CHARS",
    "EmbeddingClient",
    "EmbeddingSettings",
    "cosine",
    "embedding_settings",
]

ENV_PROVIDER = "GOLDEVAL_EMBED_PROVIDER"
ENV_URL = "GOLDEVAL_EMBED_URL"
ENV_MODEL = "GOLDEVAL_EMBED_MODEL"
ENV_API_KEY = "GOLDEVAL_EMBED_API_KEY"
ENV_TIMEOUT = "GOLDEVAL_EMBED_TIMEOUT"
ENV_RETRIES = "GOLDEVAL_EMBED_RETRIES"
KINDS = ("ollama", "openai")
DEFAULT_BASE_URLS = {"ollama": "http://127.0.0.1:11434", "openai": "https://api.openai.com/v1"}
DEFAULT_MODELS = {"ollama": "nomic-embed-text", "openai": "text-embedding-3-small"}
DEFAULT_TIMEOUT = 30.0
#: Retries after the first try, on the same faults as chat calls (429, 408, 5xx, timeouts,
#: dropped connections); ``grader_options.similarity.retries`` / ``GOLDEVAL_EMBED_RETRIES``.
DEFAULT_RETRIES = 3
#: Each input is cut to this many characters before it is sent (embedding models have a
#: context limit anyway; a 10 MB answer must not become a 10 MB request).
MAX_INPUT_CHARS = 32_000
_KIND = "EMBEDDING_ERROR"


def _usage(data: Any) -> int | None:
    """The input tokens an embeddings answer reports: OpenAI ``usage.prompt_tokens``,
    Ollama ``prompt_eval_count``; None when it reports none."""
    if not isinstance(data, dict):
        return None
    usage = data.get("usage")
    if isinstance(usage, dict):
        return token_count(usage.get("prompt_tokens"))
    return token_count(data.get("prompt_eval_count"))


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors of the same length (ProviderError on zero vectors)."""
    if len(a) != len(b):
        raise ProviderError(_KIND, f"embedding dimensions differ ({len(a)} vs {len(b)})")
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norm_a = math.sqrt(math.fsum(x * x for x in a))
    norm_b = math.sqrt(math.fsum(y * y for y in b))
    if norm_a == 0.0 or norm_b == 0.0:
        raise ProviderError(_KIND, "the server returned a zero embedding vector")
    value = dot / (norm_a * norm_b)
    return max(-1.0, min(1.0, value))


@dataclass(frozen=True)
class EmbeddingSettings:
    """A resolved embedding configuration (``api_key`` is never shown in ``repr``)."""

    kind: str
    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout: float = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES

    def __repr__(self) -> str:
        # The base URL may hold user:password@ or ?key=...: shown only through redact_url.
        return (
            f"EmbeddingSettings(kind={self.kind!r}, base_url={redact_url(self.base_url)!r}, "
            f"model={self.model!r}, timeout={self.timeout!r}, retries={self.retries!r})"
        )

    def client(self) -> EmbeddingClient:
        return EmbeddingClient(
            self.kind,
            self.base_url,
            self.model,
            api_key=self.api_key,
            timeout=self.timeout,
            retries=self.retries,
        )


def _pick(options: Mapping[str, Any], key: str, environ: Mapping[str, str], env: str) -> Any:
    value = options.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        value = environ.get(env)
        if value is not None and not value.strip():
            value = None
    return value


def embedding_settings(
    options: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> EmbeddingSettings | None:
    """Settings from grader options, then environment variables; None when not configured.

    Raises :class:`ConfigError` for an unknown provider or a malformed value.
    """
    opts: Mapping[str, Any] = options or {}
    env: Mapping[str, str] = os.environ if environ is None else environ
    provider = _pick(opts, "provider", env, ENV_PROVIDER)
    if provider is None:
        return None
    if not isinstance(provider, str) or provider.strip().lower() not in KINDS:
        raise ConfigError(
            f"embedding provider must be one of {', '.join(KINDS)}, got {provider!r}",
            field=f"grader_options.similarity.provider / {ENV_PROVIDER}",
        )
    kind = provider.strip().lower()
    base_url = _pick(opts, "base_url", env, ENV_URL) or DEFAULT_BASE_URLS[kind]
    if not isinstance(base_url, str):
        raise ConfigError("must be a string", field="grader_options.similarity.base_url")
    model = _pick(opts, "model", env, ENV_MODEL) or DEFAULT_MODELS[kind]
    if not isinstance(model, str):
        raise ConfigError("must be a string", field="grader_options.similarity.model")
    raw_timeout = _pick(opts, "timeout", env, ENV_TIMEOUT)
    timeout = DEFAULT_TIMEOUT
    if raw_timeout is not None:
        try:
            if isinstance(raw_timeout, bool):
                raise ValueError
            timeout = float(raw_timeout)
        except (TypeError, ValueError):
            timeout = math.nan
        if not (math.isfinite(timeout) and timeout > 0):
            raise ConfigError(
                f"embedding timeout must be a positive number of seconds, got {raw_timeout!r}",
                field=f"grader_options.similarity.timeout / {ENV_TIMEOUT}",
            )
    key_env = opts.get("api_key_env")
    if key_env is not None and not isinstance(key_env, str):
        raise ConfigError(
            "must be an environment variable name", field="grader_options.similarity.api_key_env"
        )
    api_key = env.get(key_env) if key_env else env.get(ENV_API_KEY)
    api_key = api_key.strip() if api_key and api_key.strip() else None
    check_credential(api_key, key_env or ENV_API_KEY)
    raw_retries = _pick(opts, "retries", env, ENV_RETRIES)
    retries = DEFAULT_RETRIES
    if raw_retries is not None:
        try:
            if isinstance(raw_retries, (bool, float)):
                raise ValueError
            retries = int(raw_retries)
        except (TypeError, ValueError):
            retries = -1
        if retries < 0:
            raise ConfigError(
                f"embedding retries must be a whole number >= 0, got {raw_retries!r}",
                field=f"grader_options.similarity.retries / {ENV_RETRIES}",
            )
    return EmbeddingSettings(kind, base_url.strip(), model.strip(), api_key, timeout, retries)


class _EmbeddingTransport(HTTPProvider):
    """The chat providers' HTTP client (pooled connections, retries with backoff, error
    mapping, masking) pointed at an embeddings endpoint: one client implementation for chat,
    judge and embeddings, so a fix to any of them (masking before cutting, the Basic token)
    holds for all."""

    name = "embeddings"
    base_url_option = "grader_options.similarity.base_url"
    base_url_env = ENV_URL

    def __init__(self, kind: str, settings: ProviderSettings) -> None:
        self.kind = kind
        super().__init__(settings)

    @property
    def endpoint(self) -> str:
        if self.kind == "ollama":
            return self._url("/api/embed")
        if self._root.endswith("/v1"):
            return self._url("/embeddings")
        return self._url("/v1/embeddings")

    def _auth(self, user: str | None, password: str | None) -> httpx.Auth | None:
        if user is not None and user.strip():
            return httpx.BasicAuth(user, password or "")
        return None

    def _extra_headers(self) -> dict[str, str]:
        # OpenAI; also an Ollama behind an authenticating proxy.
        key = (self.settings.api_key or "").strip()
        return {"Authorization": f"Bearer {key}"} if key else {}


class EmbeddingClient:
    """Embeds texts with one HTTP call. Use as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        kind: str,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
    ) -> None:
        if kind not in KINDS:
            raise ConfigError(f"embedding provider must be one of {', '.join(KINDS)}, got {kind!r}")
        self.kind = kind
        self.model = model
        self.timeout = timeout
        settings = ProviderSettings(
            name=kind,
            model=model,
            base_url=base_url.strip(),
            api_key=api_key,
            connect_timeout=timeout,
            read_timeout=timeout,
            retries=retries,
        )
        self._transport = _EmbeddingTransport(kind, settings)
        #: The base URL without userinfo or trailing slash, credentials masked: safe to show.
        self.base_url = self._transport.base_url
        #: A run's account (budget, limiters by server), when a run installed one.
        self._meter: Meter | None = current_meter()
        if self._meter is not None:
            self._meter.share(self._transport, self._own_limiter)

    def _own_limiter(self) -> CallLimiter | None:
        """A limiter for an embedding server the generation provider does not ask."""
        meter = self._meter
        if meter is None or meter.concurrency is None:
            return None
        return CallLimiter(meter.concurrency)

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> EmbeddingClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"EmbeddingClient(kind={self.kind!r}, base_url={self.base_url!r}, model={self.model!r})"
        )

    # -- calls ------------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """The embeddings URL as it may be shown (credentials masked)."""
        return redact_url(self._transport.endpoint)

    def _fail(self, message: str) -> ProviderError:
        return ProviderError(_KIND, self._transport._scrub(message))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order. Texts are cut to :data:`MAX_INPUT_CHARS`."""
        inputs = [t[:MAX_INPUT_CHARS].encode("utf-8", "replace").decode("utf-8") for t in texts]
        url = self.endpoint
        payload = json.dumps({"model": self.model, "input": inputs}).encode("utf-8")
        failure: ProviderError | None = None
        usage: list[int | None] = []

        def parse(data: Any) -> list[list[float]]:
            vectors = self._parse(data, url)
            usage.append(_usage(data))
            return vectors

        try:
            vectors, _tries = self._transport.request_json(payload, parse)
        except ProviderError as exc:
            failure = exc
        if failure is not None and failure.kind == _KIND:
            raise failure  # already worded by _parse
        if failure is not None:  # outside the except block: nothing chained
            after = f" after {failure.tries} tries" if failure.tries > 1 else ""
            raise ProviderError(
                _KIND, f"{failure.kind}{after}: {failure.message}", tries=failure.tries
            )
        self._spend(usage[-1] if usage else None, inputs)
        if len(vectors) != len(inputs):
            raise self._fail(f"{url} returned {len(vectors)} embeddings for {len(inputs)} inputs")
        return list(vectors)

    def _spend(self, tokens: int | None, inputs: Sequence[str]) -> None:
        """Count the call's tokens (reported, else characters / 4) against the run's budget."""
        if self._meter is None:
            return
        if tokens is None:
            self._meter.budget.spend(estimate_tokens("".join(inputs)), None, estimated=True)
        else:
            self._meter.budget.spend(tokens, None)

    def _parse(self, data: Any, url: str) -> list[list[float]]:
        if not isinstance(data, dict):
            raise self._fail(f"unexpected response from {url}: not a JSON object")
        raw: Any
        if self.kind == "ollama":
            raw = data.get("embeddings")
            if not isinstance(raw, list):
                raise self._fail(f"unexpected response from {url}: no 'embeddings' list")
        else:
            items = data.get("data")
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                raise self._fail(f"unexpected response from {url}: no 'data' list")
            ordered = sorted(
                enumerate(items),
                key=lambda p: p[1]["index"] if isinstance(p[1].get("index"), int) else p[0],
            )
            raw = [item.get("embedding") for _, item in ordered]
        vectors: list[list[float]] = []
        for i, vec in enumerate(raw):
            if not isinstance(vec, list) or not vec:
                raise self._fail(f"{url} returned an empty or malformed embedding #{i}")
            out: list[float] = []
            for x in vec:
                if isinstance(x, bool) or not isinstance(x, (int, float)):
                    raise self._fail(f"{url} returned a non-numeric embedding #{i}")
                fx = float(x)
                if not math.isfinite(fx):
                    raise self._fail(f"{url} returned a non-finite embedding #{i}")
                out.append(fx)
            vectors.append(out)
        return vectors

    def similarity(self, a: str, b: str) -> float:
        """Cosine similarity of the embeddings of ``a`` and ``b`` (one request)."""
        va, vb = self.embed([a, b])
        if len(va) != len(vb):
            raise self._fail(f"embedding dimensions differ ({len(va)} vs {len(vb)})")
        return cosine(va, vb)
