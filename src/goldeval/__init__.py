"""pytest-goldeval: versioned golden datasets as pytest tests for LLM, RAG and agent systems.

This package is imported by pytest for every run in a project that has it installed, so it
imports nothing heavy: public names are loaded on first attribute access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Answer",
    "ExpectKey",
    "GoldenCase",
    "GradeContext",
    "Grader",
    "GraderOutcome",
    "Provider",
    "ProviderError",
    "ProviderRequest",
    "ToolCall",
    "Violation",
    "__version__",
]

_LAZY = {
    "Answer": "goldeval.providers.base",
    "Provider": "goldeval.providers.base",
    "ProviderRequest": "goldeval.providers.base",
    "ToolCall": "goldeval.providers.base",
    "ExpectKey": "goldeval.graders.base",
    "GradeContext": "goldeval.graders.base",
    "Grader": "goldeval.graders.base",
    "GoldenCase": "goldeval.dataset.case",
    "GraderOutcome": "goldeval.core.models",
    "Violation": "goldeval.core.models",
    "ProviderError": "goldeval.core.errors",
}

if TYPE_CHECKING:
    from goldeval.core.errors import ProviderError
    from goldeval.core.models import GraderOutcome, Violation
    from goldeval.dataset.case import GoldenCase
    from goldeval.graders.base import ExpectKey, GradeContext, Grader
    from goldeval.providers.base import Answer, Provider, ProviderRequest, ToolCall


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'goldeval' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
