"""The side-by-side reference: a plain parametrised test over the same JSONL rows."""

import json
from pathlib import Path

import pytest

ROWS = [
    json.loads(line)
    for line in (Path(__file__).parent.parent / "golden/bench/rows.jsonl")
    .read_text("utf-8")
    .splitlines()
    if line.strip()
]


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_row(row):
    assert row["id"]
