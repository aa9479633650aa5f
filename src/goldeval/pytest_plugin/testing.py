"""Opt-in fixtures for testing a provider, a grader or a whole live run against the fake model
server (:mod:`goldeval.testing.llm_server`), the way ``pytester`` is opt-in in pytest itself.

Nothing here is active unless a project asks for it, in its root ``conftest.py``::

    pytest_plugins = ["goldeval.pytest_plugin.testing"]

or on the command line with ``-p goldeval.pytest_plugin.testing``. It lives under
``pytest_plugin/`` because that is the only package allowed to import pytest; the server
itself (:class:`~goldeval.testing.llm_server.FakeLLMServer`) does not need pytest.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from goldeval.testing.llm_server import FakeLLMServer

__all__ = ["golden_llm_server"]


@pytest.fixture
def golden_llm_server() -> Iterator[FakeLLMServer]:
    """A started fake Ollama + OpenAI server on 127.0.0.1 (a free port), stopped afterwards.

    Each test gets its own server: program it (``reply_map``, ``script``, ``set_fault``,
    ``capacity``, ``rate_limit``), point the code under test at ``base_url`` (Ollama) or
    ``openai_base_url`` (OpenAI), then assert on ``requests``.
    """
    with FakeLLMServer() as server:
        yield server
