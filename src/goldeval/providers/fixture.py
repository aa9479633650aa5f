"""Fixture mode: replay the recorded answer ``fixtures/<id>.out.md``; no model is called."""

from __future__ import annotations

import time
from pathlib import Path

from goldeval.core.errors import DatasetError, ProviderError
from goldeval.core.safe_files import contained_file, read_regular_file
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
            # Checked at collection for the selected rows; checked again here because a file
            # can be swapped for a link out (/proc/self/environ) or a FIFO mid-run, and a
            # conftest may override golden_case with a row the collection never saw.
            real = contained_file(path, self.dataset_dir, what="recorded answer")
            data = read_regular_file(real)
        except DatasetError as exc:
            raise ProviderError("PROVIDER_ERROR", f"cannot read fixture: {exc}") from None
        text = data.decode("utf-8", errors="replace")
        return Answer(text=text, duration_ms=max(1, round((time.perf_counter() - start) * 1000)))
