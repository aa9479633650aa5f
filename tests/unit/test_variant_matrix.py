"""goldeval.results.variant_matrix: the rows × variants matrix of a variant session, its
order (flipped, then not passed everywhere, then the rest), its cap and its report.md table."""

from __future__ import annotations

from goldeval.reports.markdown_variants import variant_lines
from goldeval.results.documents import VariantComparisonDoc, typed_run
from goldeval.results.variant_costs import case_figures
from goldeval.results.variant_matrix import MAX_MATRIX_ROWS, variant_matrix
from tests.builders import run_document


def _run(outcomes: dict[str, list[str]]) -> dict:
    return run_document(outcomes)


def test_rows_list_flipped_then_not_passed_then_the_rest_in_dataset_order() -> None:
    control = _run({"a": ["PASS"], "b": ["PASS"], "c": ["PASS", "FAIL"], "d": ["PASS"]})
    candidate = _run({"a": ["PASS"], "b": ["FAIL"], "c": ["PASS", "FAIL"], "d": ["PASS"]})
    figures = {
        "control": case_figures(control["cases"]),
        "candidate": case_figures(candidate["cases"]),
    }
    matrix = variant_matrix(
        [("control", typed_run(control)), ("candidate", typed_run(candidate))],
        figures,
        flipped=["b"],
    )
    assert matrix["variants"] == ["control", "candidate"]
    assert [row["caseId"] for row in matrix["rows"]] == ["b", "c", "a", "d"]
    b = matrix["rows"][0]["cells"]
    assert [cell["statuses"] for cell in b] == [["PASS"], ["FAIL"]]
    assert b[0]["latencyMs"] == figures["control"]["latencyMs"].get("b")
    assert matrix["more"] == 0


def test_a_case_one_variant_did_not_run_is_listed_with_an_empty_cell() -> None:
    control = _run({"a": ["PASS"], "b": ["PASS"]})
    candidate = _run({"a": ["PASS"]})
    matrix = variant_matrix(
        [("control", typed_run(control)), ("candidate", typed_run(candidate))], {}
    )
    assert [row["caseId"] for row in matrix["rows"]] == ["b", "a"]
    assert matrix["rows"][0]["cells"][1] == {
        "statuses": [],
        "latencyMs": None,
        "totalTokens": None,
    }


def test_the_matrix_keeps_at_most_max_rows_and_counts_the_rest() -> None:
    outcomes = {f"c{i:04d}": ["PASS"] for i in range(MAX_MATRIX_ROWS + 25)}
    outcomes["c0120"] = ["FAIL"]
    run = typed_run(_run(outcomes))
    matrix = variant_matrix([("only", run)], {})
    assert len(matrix["rows"]) == MAX_MATRIX_ROWS and matrix["more"] == 25
    assert matrix["rows"][0]["caseId"] == "c0120"  # the case that did not pass is kept


def test_report_md_shows_the_matrix_as_a_table() -> None:
    control = _run({"a": ["PASS"], "b": ["PASS"]})
    candidate = _run({"a": ["PASS"], "b": ["FAIL"]})
    runs = [("control", typed_run(control)), ("candidate", typed_run(candidate))]
    figures = {
        "control": case_figures(control["cases"]),
        "candidate": case_figures(candidate["cases"]),
    }
    doc = {
        "control": "control",
        "candidate": "candidate",
        "outcomeRule": "majority",
        "cases": 2,
        "margin": 0.05,
        "nonInferiority": "UNDERPOWERED",
        "mcnemar": {"rule": "majority", "cases": 2, "controlOnly": 1, "candidateOnly": 0},
        "resamples": 10,
        "seed": 0,
        "confidence": 0.95,
        "matrix": variant_matrix(runs, figures, ["b"]),
        "decision": "INCONCLUSIVE",
        "reason": "why",
    }
    text = "\n".join(variant_lines(VariantComparisonDoc.model_validate(doc)))
    assert "| Case | control | candidate |" in text
    rows = [line for line in text.splitlines() if line.startswith("| b |")]
    assert len(rows) == 1 and rows[0].startswith("| b | P · ") and "| F · " in rows[0]
    assert text.index("| b |") < text.index("| a |")
