"""Fixtures shared by the reliability tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from goldeval.testing.llm_server import FakeLLMServer, fixture_responder


@pytest.fixture
def llm(golden_project: Path) -> Iterator[FakeLLMServer]:
    """The real local model server, answering each case with its recorded fixture."""
    with FakeLLMServer() as srv:
        srv.responder = fixture_responder(golden_project / "golden" / "generation")
        yield srv
