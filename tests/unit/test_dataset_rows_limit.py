"""A rows file over ``dataset_rows`` is refused while it is read (a probe: 800,000 rows of
49 MB, under ``file_bytes``, took 2.9 GB and ended in a MemoryError traceback at collection).
The limit is lowered here to keep the test small; the count is what is tested."""

from __future__ import annotations

from pathlib import Path

import pytest

from goldeval.core.errors import DatasetError
from goldeval.core.limits import default
from goldeval.dataset import row_parser
from tests.reliability.test_bad_input_properties import GRADERS, KEYS


def _rows(path: Path, n: int) -> Path:
    lines = [
        f'{{"id": "r{i}", "prompt": "p", "expect": {{"contains_any": ["x"]}}}}' for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _lowered(monkeypatch: pytest.MonkeyPatch, most: int) -> None:
    real = row_parser.default
    monkeypatch.setattr(
        row_parser, "default", lambda name: most if name == "dataset_rows" else real(name)
    )


def test_the_row_past_the_limit_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _lowered(monkeypatch, 3)
    path = _rows(tmp_path / "rows.jsonl", 5)
    with pytest.raises(DatasetError) as refused:
        row_parser.parse_rows(path, KEYS, GRADERS)
    text = str(refused.value)
    assert "rows.jsonl:4" in text and "more than 3 rows (limit dataset_rows)" in text


def test_rows_up_to_the_limit_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _lowered(monkeypatch, 3)
    assert len(row_parser.parse_rows(_rows(tmp_path / "rows.jsonl", 3), KEYS, GRADERS)) == 3


def test_the_default_is_documented() -> None:
    assert default("dataset_rows") == 200_000
    assert "dataset_rows" in (Path(__file__).parents[2] / "docs/reliability.md").read_text()
