"""Variants that name their own provider or base URL (issue 35): each gets its own provider,
made through ``pytest_goldeval_make_provider`` like the session's, with the session's
timeouts, retries, limits and prices, and its own limiter when its server is another one
(goldeval.providers.budget.Meter keeps one limiter per server). Made in live and record mode
when the session starts, so a bad name or URL is a usage error before any call.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest

from goldeval.core.errors import GoldevalError
from goldeval.core.models import Mode
from goldeval.core.settings import ProviderSettings, provider_from_env
from goldeval.dataset.variants import Variant, VariantJudge
from goldeval.providers.base import as_provider

if TYPE_CHECKING:
    from goldeval.pytest_plugin.state import GoldenSession


def variant_settings(base: ProviderSettings, variant: Variant) -> ProviderSettings | None:
    """The variant's provider settings: the session's, with the variant's provider, base URL
    and model and that provider's credentials from the environment (OPENAI_API_KEY, ...).
    None when the variant names neither a provider nor a base URL (it uses the session's)."""
    if variant.provider is None and variant.base_url is None:
        return None
    name = (variant.provider or base.name).strip().lower()
    url = variant.base_url or (base.base_url if name == base.name else None)
    option = f"variants: {variant.name}: baseUrl"
    return _on_server(base, name, variant.model or base.model, url, option)


def _on_server(
    base: ProviderSettings, name: str, model: str | None, url: str | None, option: str
) -> ProviderSettings:
    """``base`` (timeouts, retries, limits, prices) with another provider, model and server,
    and that server's credentials: the provider's environment or the URL's userinfo. A bad
    name or URL is a usage error naming ``option``."""
    try:
        found = provider_from_env(name, model, url, option=option)
    except GoldevalError as exc:
        raise pytest.UsageError(str(exc)) from None
    return dataclasses.replace(
        base,
        name=found.name,
        model=found.model,
        base_url=found.base_url,
        api_key=found.api_key,
        user=found.user,
        password=found.password,
    )


def start_variant_providers(state: GoldenSession) -> None:
    """Make the providers of the selected variants that name their own (live and record)."""
    variants = state.variants
    if variants is None or state.settings.mode is Mode.FIXTURE:
        return
    for variant in variants.selected:
        settings = variant_settings(state.settings.provider, variant)
        if settings is None:
            continue
        provider = make_provider(state.config, settings, f"variant {variant.name!r}")
        state.meter.share(provider)
        variants.providers[variant.name] = (settings, provider)


def variant_judge_settings(
    base: ProviderSettings, judge: VariantJudge, variant: str
) -> ProviderSettings:
    """The settings of a variant's judge that names its own provider or base URL: the session
    judge's (timeouts, retries, limits, prices) with its provider, server and model, and the
    credentials of that server. The session judge's (GOLDEVAL_JUDGE_API_KEY, ...) go only to
    the session judge's own server: another server gets its provider's environment
    (OPENAI_API_KEY, ...) or its URL's userinfo, as a variant's own provider does."""
    name = (judge.provider or base.name).strip().lower()
    same_provider = name == base.name
    model = judge.model or (base.model if same_provider else None)
    if model is None:
        # Also for a plugin provider (the session judge may go without a model there): the
        # run records which model scored the variant, and "none" would read as the session's.
        raise pytest.UsageError(
            f"variants: {variant}: judge.provider {name!r} is not the session judge's "
            f"({base.name!r}): name judge.model as well"
            if not same_provider
            else f"variants: {variant}: the session judge names no model: name judge.model"
        )
    url = judge.base_url or (base.base_url if same_provider else None)
    own = _on_server(base, name, model, url, f"variants: {variant}: judge.baseUrl")
    userinfo = judge.base_url is not None and urlsplit(judge.base_url).username is not None
    if same_provider and own.base_url == base.base_url and not userinfo:
        return dataclasses.replace(base, model=own.model)  # the session judge's server
    return own


def start_variant_judges(state: GoldenSession) -> None:
    """Make the judge providers of the selected variants whose judge names its own provider
    or server, when the session runs the judge (live and record mode): a bad name or URL is
    a usage error before any call."""
    variants = state.variants
    if variants is None or not state.settings.judge or state.settings.mode is Mode.FIXTURE:
        return
    for variant in variants.selected:
        if variant.judge is None or not variant.judge.own_server:
            continue
        settings = variant_judge_settings(state.judge_settings(), variant.judge, variant.name)
        made = make_provider(state.config, settings, f"judge of variant {variant.name!r}")
        state.meter.share(made)
        try:
            provider = as_provider(made)
        except TypeError:
            raise pytest.UsageError(
                f"judge of variant {variant.name!r}: the pytest_goldeval_make_provider hook "
                f"returned a {type(made).__name__}, not a Provider"
            ) from None
        variants.judge_providers[variant.name] = (settings, provider)


def judge_client(state: GoldenSession, variant: Variant | None) -> tuple[ProviderSettings, Any]:
    """The judge settings and provider that score ``variant``'s answers: its judge's own
    (made at session start) when it names a provider or server, else the session judge's
    provider with the variant's judge model, if it names one."""
    own = variant.judge if variant is not None else None
    if variant is not None and own is not None and own.own_server and state.variants:
        return state.variants.judge_providers[variant.name]
    settings = state.judge_settings()
    if own is not None and own.model is not None:
        settings = dataclasses.replace(settings, model=own.model)
    return settings, state.judge_provider()


def make_provider(config: pytest.Config, settings: ProviderSettings, owner: str = "") -> Any:
    """The provider ``settings`` name, through ``pytest_goldeval_make_provider`` (built-ins
    register through it too); an unknown name or bad settings is a usage error naming
    ``owner`` (``judge``, ``variant 'b'``) when there is one."""
    try:
        provider = config.hook.pytest_goldeval_make_provider(
            config=config, name=settings.name, settings=settings
        )
    except GoldevalError as exc:
        raise pytest.UsageError(f"{owner}: {exc}" if owner else str(exc)) from None
    if provider is None:
        unknown = f"unknown {owner} provider" if owner == "judge" else "unknown provider"
        raise pytest.UsageError(
            (f"{owner}: " if owner and owner != "judge" else "")
            + f"{unknown} {settings.name!r}: use ollama, openai, or register one with the "
            "pytest_goldeval_make_provider hook"
        )
    return provider


def provider_for_variant(state: GoldenSession, provider: Any, variant: str | None) -> Any:
    """The provider a variant's attempts call: its own when it names one and ``provider`` is
    the plugin's own (a team's ``golden_provider`` override is theirs to route, it gets
    ``ProviderRequest.variant``), else ``provider``."""
    variants = state.variants
    if variant is None or variants is None or provider is not state._provider:
        return provider
    own = variants.providers.get(variant)
    return own[1] if own is not None else provider


def settings_of(state: GoldenSession, variant: str | None) -> ProviderSettings:
    """The provider settings a variant's run records (its own, else the session's)."""
    own = state.variants.providers.get(variant) if state.variants and variant else None
    return own[0] if own is not None else state.settings.provider


def model_checks(state: GoldenSession, check: Any) -> list[tuple[Any, str | None]]:
    """(model list check, model) for every model the session asks: each variant's on its own
    server when it names one, the session provider's ``check`` for the rest."""
    models: list[str | None] = [*state.settings.models] or [state.settings.provider.model]
    variants = state.variants
    if variants is None or not variants.providers:
        return [(check, model) for model in models]
    own = variants.providers
    return [
        (getattr(own[v.name][1], "model_refusal", None), own[v.name][0].model)
        if v.name in own
        else (check, v.model or state.settings.provider.model)
        for v in variants.selected
    ]


def servers(state: GoldenSession) -> int:
    """How many servers the session's calls go to (the prefetch pool gives each its share)."""
    variants = state.variants
    if variants is None:
        return 1
    urls = {settings.base_url for settings, _ in variants.providers.values()}
    if len(variants.providers) < len(variants.selected):
        urls.add(state.settings.provider.base_url)
    return max(1, len(urls))
