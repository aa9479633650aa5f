"""tests.builders.run_document: the run document the verdict tests build is a valid run.json."""

from __future__ import annotations

from tests.builders import run_document
from tests.verdict_json import typed


def test_counters_and_case_status_come_from_the_attempts() -> None:
    doc = run_document(
        {
            "a": "PASS",
            "b": ["FAIL", "PASS"],
            "c": [("ERROR", "TIMEOUT")],
            "d": ["SKIPPED"],
            "e": ["PASS", ("ERROR", "HTTP_ERROR")],
        },
        protocol={"mode": "LIVE"},
    )
    run = typed(doc)  # the JSON form is a valid run document
    assert [c.status for c in run.cases] == ["PASS", "FAIL", "ERROR", "SKIPPED", "ERROR"]
    assert (run.cases_total, run.cases_passed, run.cases_failed) == (5, 1, 1)
    assert (run.cases_skipped, run.cases_error) == (1, 2)
    assert (run.attempts_total, run.attempts_passed, run.attempts_failed) == (7, 3, 1)
    assert (run.attempts_skipped, run.attempts_error) == (1, 2)
    assert doc["cases"][2]["attempts"] == [{"index": 1, "status": "ERROR", "errorKind": "TIMEOUT"}]
    assert doc["cases"][1]["successRate"] == {"hits": 1, "total": 2}
    assert doc["protocol"]["mode"] == "LIVE"
    assert doc["protocol"]["selectedCaseIds"] == ["a", "b", "c", "d", "e"]


def test_no_protocol_or_metrics_unless_asked() -> None:
    doc = run_document({"a": "PASS"})
    assert "protocol" not in doc and "metrics" not in doc
    assert typed(doc).protocol is None
