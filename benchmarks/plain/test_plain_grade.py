"""Reference for fixture mode: a plain parametrised test calling the same grading functions."""

import json
from pathlib import Path

import pytest

from goldeval.dataset.pack import load_pack
from goldeval.graders.contract import ContractChecker
from goldeval.graders.retrieval import grade_retrieval
from goldeval.pipeline.retriever import LexicalRetriever

HERE = Path(__file__).parent.parent
DATASET = HERE / "golden/bench"
ROWS = [
    json.loads(line)
    for line in (DATASET / "rows.jsonl").read_text("utf-8").splitlines()
    if line.strip()
]
PACK = load_pack(HERE / "pack")
RETRIEVER = LexicalRetriever(PACK.chunks)
CHECKER = ContractChecker()


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_row(row):
    expect = row.get("expect") or {}
    answer = (DATASET / "fixtures" / f"{row['id']}.out.md").read_text("utf-8")
    refuse = expect.get("refuse") is True
    retrieved = [] if refuse else RETRIEVER.retrieve(row["prompt"])
    contract = CHECKER.grade(
        row["id"], expect, row.get("must_not") or [], answer, retrieved, PACK.chunk_ids
    )
    retrieval = grade_retrieval(refuse, expect.get("rag") or [], retrieved)
    assert contract.passed and retrieval.passed
