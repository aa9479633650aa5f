"""Embedding clients for the ``similarity`` grader: Ollama and OpenAI-compatible servers.

Wire formats:

* Ollama: ``POST {base_url}/api/embed`` with ``{"model", "input": [a, b]}`` →
  ``{"embeddings": [[...], [...]]}``.
* OpenAI: ``POST {base_url}/v1/embeddings`` (or ``{base_url}/embeddings`` when the base URL
  already ends in ``/v1``) with ``{"model", "input": [a, b]}`` →
  ``{"data": [{"embedding": [...], "index": 0}, ...]}``.

Configuration (:func:`embedding_settings`), per field: the manifest's
``grader_options: {similarity: {provider, base_url, model, timeout, api_key_env}}`` first, then
the environment: ``GOLDEVAL_EMBED_PROVIDER`` (``ollama`` | ``openai``), ``GOLDEVAL_EMBED_URL``,
``GOLDEVAL_EMBED_MODEL``, ``GOLDEVAL_EMBED_API_KEY`` and ``GOLDEVAL_EMBED_TIMEOUT`` (seconds).
Nothing is configured until a provider is named; a named provider without URL or model uses
its default (:data:`DEFAULT_BASE_URLS`, :data:`DEFAULT_MODELS`). API keys are read from the
environment only (``api_key_env`` names the variable), never from a committed manifest.

Every failure (connection, timeout, HTTP status, malformed body) is raised as
``ProviderError("EMBEDDING_ERROR", message)``. Messages show the URL without userinfo, never
request headers, and mask the API key and password if a server echoes them. The error is raised
outside the ``except`` block that caught the httpx exception, so it chains nothing that holds
the request (and its headers).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from goldeval.errors import ConfigError, ProviderError
from goldeval.settings import redact_url

__all__ = [
    "DEFAULT_BASE_URLS",
    "DEFAULT_MODELS",
    "ENV_API_KEY",
    "ENV_MODEL",
    "ENV_PROVIDER",
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
KINDS = ("ollama", "openai")
DEFAULT_BASE_URLS = {"ollama": "http://127.0.0.1:11434", "openai": "https://api.openai.com/v1"}
DEFAULT_MODELS = {"ollama": "nomic-embed-text", "openai": "text-embedding-3-small"}
DEFAULT_TIMEOUT = 30.0
#: Each input is cut to this many characters before it is sent (embedding models have a
#: context limit anyway; a 10 MB answer must not become a 10 MB request).
MAX_INPUT_CHARS = 32_000
_KIND = "EMBEDDING_ERROR"
_EXCERPT = 200
_MASK = "***"


def _excerpt(text: str, limit: int = _EXCERPT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


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

    def client(self) -> EmbeddingClient:
        return EmbeddingClient(
            self.kind, self.base_url, self.model, api_key=self.api_key, timeout=self.timeout
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
    return EmbeddingSettings(kind, base_url.strip(), model.strip(), api_key, timeout)


class EmbeddingClient:
    """Embeds texts with one HTTP call. Use as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        kind: str,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if kind not in KINDS:
            raise ConfigError(f"embedding provider must be one of {', '.join(KINDS)}, got {kind!r}")
        self.kind = kind
        self.model = model
        self.timeout = timeout
        base = base_url.strip()
        if base and "://" not in base:
            base = "http://" + base
        user: str | None = None
        password: str | None = None
        try:
            parts = urlsplit(base)
            if parts.username is not None:
                user = unquote(parts.username)
                password = unquote(parts.password) if parts.password is not None else ""
        except ValueError:
            raise ConfigError("invalid embedding base URL", field=ENV_URL) from None
        #: The base URL without userinfo or trailing slash: safe to show.
        self.base_url = redact_url(base).rstrip("/")
        secrets = [s for s in (api_key, password) if s]
        self._secrets = tuple(sorted(set(secrets), key=len, reverse=True))
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:  # OpenAI; also an Ollama behind an authenticating proxy
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout),
            headers=headers,
            auth=httpx.BasicAuth(user, password or "") if user is not None else None,
            follow_redirects=False,
            trust_env=False,
        )

    # -- lifecycle ------------------------------------------------------------------------

    def close(self) -> None:
        self._client.close()

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
        if self.kind == "ollama":
            return f"{self.base_url}/api/embed"
        if self.base_url.endswith("/v1"):
            return f"{self.base_url}/embeddings"
        return f"{self.base_url}/v1/embeddings"

    def _scrub(self, message: str) -> str:
        for secret in self._secrets:
            message = message.replace(secret, _MASK)
        return message

    def _fail(self, message: str) -> ProviderError:
        return ProviderError(_KIND, self._scrub(message))

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order. Texts are cut to :data:`MAX_INPUT_CHARS`."""
        inputs = [t[:MAX_INPUT_CHARS].encode("utf-8", "replace").decode("utf-8") for t in texts]
        url = self.endpoint
        payload = {"model": self.model, "input": inputs}
        failure: str | None = None
        response: httpx.Response | None = None
        try:
            response = self._client.post(url, json=payload)
        except httpx.TimeoutException:
            failure = f"timed out after {self.timeout:g}s calling {url}"
        except httpx.HTTPError as exc:
            failure = f"cannot reach {url}: {type(exc).__name__}: {exc}"
        except httpx.InvalidURL:
            failure = f"invalid embedding URL {url}"
        except Exception as exc:  # e.g. an httpcore error that httpx did not map
            if "timeout" in type(exc).__name__.lower():
                failure = f"timed out after {self.timeout:g}s calling {url}"
            else:
                failure = f"cannot reach {url}: {type(exc).__name__}: {exc}"
        if failure is not None or response is None:
            raise self._fail(failure or f"no response from {url}")
        if response.status_code >= 400:
            raise self._fail(
                f"HTTP {response.status_code} from {url} (model {self.model!r}): "
                f"{_excerpt(response.text)}"
            )
        data: Any = None
        try:
            data = response.json()
        except (ValueError, UnicodeDecodeError):
            failure = f"invalid JSON from {url}: {_excerpt(response.text)}"
        if failure is not None:
            raise self._fail(failure)
        vectors = self._parse(data, url)
        if len(vectors) != len(inputs):
            raise self._fail(f"{url} returned {len(vectors)} embeddings for {len(inputs)} inputs")
        return vectors

    def _parse(self, data: Any, url: str) -> list[list[float]]:
        if not isinstance(data, dict):
            raise self._fail(f"unexpected response from {url}: not a JSON object")
        if data.get("error") is not None:
            error = data["error"]
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                error = error["message"]
            raise self._fail(f"{url} reported an error: {_excerpt(str(error))}")
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
