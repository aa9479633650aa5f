"""Fixture mode: replay the recorded answer ``fixtures/<id>.out.md``; no model is called."""

from __future__ import annotations

import time
from pathlib import Path

from goldeval.errors import ProviderError
from goldeval.providers.base import Answer, Provider, ProviderRequest


def fixture_path(dataset_dir: Path, case_id: str) -> Path:
    return dataset_dir / "fixtures" / f"{case_id}.out.md"


class FixtureProvider(Provider):
    name = "fixture"

    def __init__(self, dataset_dir: Path) -> None:
        self.dataset_dir = dataset_dir

    def complete(self, request: ProviderRequest) -> Answer:
        start = time.perf_counter()
        path = fixture_path(self.dataset_dir, request.case.id)
        try:
            data = path.read_bytes()
        except OSError as exc:
            # Checked at collection; this only happens if the file vanished mid-run.
            raise ProviderError(
                "PROVIDER_ERROR", f"cannot read fixture {path}: {exc.strerror}"
            ) from None
        text = data.decode("utf-8", errors="replace")
        return Answer(text=text, duration_ms=max(1, round((time.perf_counter() - start) * 1000)))
