"""Live HTTP providers: one retrying pooled client (:mod:`.client`) and one module per wire
protocol (:mod:`.ollama`, :mod:`.openai`). Chat, judge and embeddings calls all go through
:class:`~goldeval.providers.http.client.HTTPProvider`."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from goldeval.core.errors import ConfigError
from goldeval.core.settings import ProviderSettings
from goldeval.providers.base import Provider
from goldeval.providers.http.client import HTTPProvider, parse_retry_after
from goldeval.providers.http.ollama import OllamaProvider
from goldeval.providers.http.openai import OpenAIProvider

__all__ = [
    "HTTPProvider",
    "OllamaProvider",
    "OpenAIProvider",
    "make_http_provider",
    "parse_retry_after",
]


def make_http_provider(
    settings: ProviderSettings,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> Provider:
    """The HTTP provider named by ``settings.name`` (``ollama`` or ``openai``)."""
    name = (settings.name or "").strip().lower()
    if name == "ollama":
        return OllamaProvider(settings, sleep=sleep, rng=rng)
    if name == "openai":
        return OpenAIProvider(settings, sleep=sleep, rng=rng)
    raise ConfigError(
        f"unknown HTTP provider {settings.name!r} (expected ollama or openai)",
        field="--golden-provider",
    )
