from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from goldeval.testing.llm_server import FakeLLMServer, fixture_responder


@pytest.fixture
def llm_server(golden_project: Path) -> Iterator[FakeLLMServer]:
    """A real HTTP server on 127.0.0.1 replaying the generation-v1 fixtures."""
    with FakeLLMServer() as srv:
        srv.responder = fixture_responder(golden_project / "golden" / "generation")
        yield srv
