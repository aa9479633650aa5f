"""Built-in graders and providers, registered through the public hooks like any plugin."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from goldeval.graders.contract import ContractGrader
from goldeval.graders.registry import builtin_graders

if TYPE_CHECKING:
    from goldeval.core.settings import ProviderSettings
    from goldeval.graders.base import Grader
    from goldeval.providers.base import Provider


@pytest.hookimpl(trylast=True)
def pytest_goldeval_register_graders(config: pytest.Config) -> list[Grader]:
    return [ContractGrader(), *builtin_graders()]


@pytest.hookimpl(trylast=True)
def pytest_goldeval_make_provider(
    config: pytest.Config, name: str, settings: ProviderSettings
) -> Provider | None:
    if name in ("ollama", "openai"):
        # Imported here: httpx (and the CLI helpers it loads) is a noticeable part of every
        # collection's start-up, and a fixture-mode run never calls a model.
        from goldeval.providers.http import make_http_provider

        return make_http_provider(settings)
    return None
