"""The gate's word on every surface: PASS only for a run that exits 0 (a run with ERROR
attempts passed its quality rules and exited 75, and the site showed it with a green PASS)."""

from __future__ import annotations

from typing import Any

import pytest

from goldeval.reports.junit import dashboard_xml
from goldeval.reports.site import render_index
from goldeval.reports.templating import status_class
from goldeval.results.documents import typed_run
from goldeval.verdict.gate_label import gate_label


def _run(verdict: str | None, code: int | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"runId": "r1", "status": "COMPLETED", "cases": []}
    if verdict is not None:
        doc["qualityGate"] = {"verdict": verdict, "passed": verdict == "PASS", "rules": []}
    if code is not None:
        doc["exitDecision"] = {"code": code, "reason": "why"}
    return doc


@pytest.mark.parametrize(
    ("verdict", "code", "shown"),
    [
        ("PASS", 0, "PASS"),
        ("PASS", 75, "PASS, but the run exits 75"),
        ("PASS", 1, "PASS, but the run exits 1"),
        ("FAIL", 1, "FAIL"),
        ("PASS", 65, "not comparable"),
        (None, 0, "not applied"),
        (None, 65, "not comparable"),
    ],
)
def test_the_gate_word(verdict: str | None, code: int | None, shown: str) -> None:
    assert gate_label(typed_run(_run(verdict, code))) == shown


def test_no_surface_shows_a_bare_pass_for_a_run_that_does_not_exit_0() -> None:
    run = typed_run(_run("PASS", 75))
    assert status_class(gate_label(run)) != "goldeval-pass"
    index = render_index([run], {id(run): "r1.html"})
    assert "PASS, but the run exits 75" in index
    xml = dashboard_xml([run])
    assert 'name="golden.verdict" value="PASS, but the run exits 75"' in xml, xml
