"""Long attempt records wait on disk, not in memory (goldeval.results.text_spool)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from goldeval.results.run_document import RunCollector
from goldeval.results.text_spool import SPILL_CHARS, Spooled, TextSpool


def test_short_records_stay_in_memory_and_long_ones_come_back_whole() -> None:
    spool = TextSpool(threshold=10)
    short = spool.hold("0123456789")
    assert short == "0123456789"
    texts = ["é" * 11, "\ud800 lone surrogate, then more", "x" * 50]
    held = [spool.hold(t) for t in texts]
    assert all(isinstance(h, Spooled) for h in held)
    # Read back in any order, more than once.
    for h, t in reversed(list(zip(held, texts, strict=True))):
        assert spool.text(h) == t
        assert spool.text(h) == t
    assert spool.spooled_bytes == sum(h.size for h in held if isinstance(h, Spooled))
    spool.close()
    with pytest.raises(ValueError, match="closed"):
        spool.text(held[0])


def test_without_a_writable_temporary_folder_records_stay_in_memory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path) + "/missing")
    spool = TextSpool(threshold=10)
    text = "y" * 100
    assert spool.hold(text) == text
    assert spool.unavailable
    assert spool.hold(text + "z") == text + "z"  # not tried again
    assert spool.text(text) == text


def _payload(case_id: str, output: str) -> dict[str, object]:
    record = {"caseId": case_id, "index": 1, "status": "FAIL", "output": output}
    return {"caseId": case_id, "index": 1, "status": "FAIL", "record": json.dumps(record)}


def test_the_collector_spools_long_failing_answers_and_rolls_them_up_whole() -> None:
    collector = RunCollector()
    long_answer = "w" * (SPILL_CHARS + 1)
    collector.add(_payload("a", long_answer))
    collector.add(_payload("b", "short"))
    assert isinstance(collector.attempts["a"][("", 1)], Spooled)
    assert isinstance(collector.attempts["b"][("", 1)], str)
    assert collector.record(collector.attempts["a"][("", 1)])["output"] == long_answer
    outputs = {
        case["caseId"]: case["attempts"][0]["output"] for case in collector.iter_cases(release=True)
    }
    assert outputs == {"a": long_answer, "b": "short"}
    collector.close()
