"""Resolved run settings: command-line options, ini values and environment fallbacks."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from goldeval.errors import ConfigError
from goldeval.models import Mode


@dataclass
class ProviderSettings:
    name: str = "ollama"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    connect_timeout: float = 5.0
    read_timeout: float = 180.0
    retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    temperature: float = 0.0
    price_per_1k_input: float | None = None
    price_per_1k_output: float | None = None

    def public(self) -> dict[str, Any]:
        """What may be written to artifacts: never credentials."""
        return {
            "name": self.name,
            "model": self.model,
            "baseUrl": redact_url(self.base_url) if self.base_url else None,
            "connectTimeout": self.connect_timeout,
            "readTimeout": self.read_timeout,
            "retries": self.retries,
            "temperature": self.temperature,
        }


def redact_url(url: str) -> str:
    """Drop userinfo (``user:pass@``) from a URL; used for every URL we print or store."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid url>"
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


@dataclass
class RunSettings:
    dataset: str
    mode: Mode = Mode.FIXTURE
    attempts: int = 1
    out_dir: Path = Path(".goldeval/runs")
    artifacts: str = "failure"
    provider: ProviderSettings = field(default_factory=ProviderSettings)
    models: list[str] = field(default_factory=list)
    concurrency: int = 8
    deadline: float | None = None
    baseline: str | None = None
    save_baseline: str | None = None
    force_save_baseline: bool = False
    gate: bool = True
    judge: bool = False
    judge_model: str | None = None
    judge_repetitions: int = 1
    cache_dir: Path | None = None
    overwrite_fixtures: bool = False
    experiment: str | None = None
    junit_path: str | None = None
    store: str | None = None
    run_key: str | None = None
    rerun_errors: bool = False


def _env_timeout_minutes(default: float) -> float:
    raw = os.environ.get("OLLAMA_TIMEOUT_MINUTES")
    if not raw:
        return default
    try:
        minutes = float(raw)
    except ValueError:
        return default
    return max(1.0, minutes) * 60.0


def provider_from_env(name: str, model: str | None, base_url: str | None) -> ProviderSettings:
    """Apply the reference's environment fallbacks (OLLAMA_HOST, OPENAI_BASE_URL, keys)."""
    from urllib.parse import unquote, urlsplit

    s = ProviderSettings(name=name, model=model)
    if name == "ollama":
        url = base_url or os.environ.get("OLLAMA_HOST") or "http://127.0.0.1:11434"
        s.user = os.environ.get("OLLAMA_USER") or None
        s.password = os.environ.get("OLLAMA_PASSWORD")
        s.read_timeout = _env_timeout_minutes(180.0)
    elif name == "openai":
        url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com"
        s.api_key = os.environ.get("OPENAI_API_KEY") or None
    else:
        url = base_url or ""
    if url and "://" not in url:
        url = "http://" + url
    if url:
        try:
            parts = urlsplit(url)
        except ValueError:
            raise ConfigError("invalid base URL", field="--golden-base-url") from None
        if parts.username is not None:
            s.user = unquote(parts.username)
            s.password = unquote(parts.password) if parts.password is not None else s.password
        url = redact_url(url).rstrip("/")
    s.base_url = url or None
    return s
