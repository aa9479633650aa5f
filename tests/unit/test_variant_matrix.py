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


def _comparison(**figures: object) -> dict:
    """A two-case ``variantComparison`` (control passes b, the candidate fails it) with
    ``figures`` (its matrix, its Pareto table) added."""
    return {
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
        "decision": "INCONCLUSIVE",
        "reason": "why",
        **figures,
    }


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
        "excerpt": None,
    }
    excerpts = {("control", "a"): "first answer"}
    with_excerpts = variant_matrix(
        [("control", typed_run(control)), ("candidate", typed_run(candidate))],
        {},
        excerpt=lambda variant, case: excerpts.get((variant, case)),
    )
    cells = {row["caseId"]: row["cells"] for row in with_excerpts["rows"]}
    assert [c["excerpt"] for c in cells["a"]] == ["first answer", None]


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
    doc = _comparison(matrix=variant_matrix(runs, figures, ["b"]))
    text = "\n".join(variant_lines(VariantComparisonDoc.model_validate(doc)))
    assert "| Case | control | candidate |" in text
    rows = [line for line in text.splitlines() if line.startswith("| b |")]
    assert len(rows) == 1 and rows[0].startswith("| b | P · ") and "| F · " in rows[0]
    assert text.index("| b |") < text.index("| a |")


def test_the_html_pages_show_the_matrix_and_the_pareto_table(tmp_path) -> None:
    from html.parser import HTMLParser

    from goldeval.reports.html import render_summary
    from goldeval.reports.site import build_site
    from goldeval.results.variant_costs import pareto_table

    control = _run({"a": ["PASS"], "b": ["PASS"]})
    candidate = _run({"a": ["PASS"], "b": ["FAIL"]})
    runs = [("control", typed_run(control)), ("candidate", typed_run(candidate))]
    comparison = _comparison(pareto=pareto_table(runs), matrix=variant_matrix(runs, {}, ["b"]))
    candidate["runId"] = "r1"
    candidate["variantComparison"] = comparison

    class Tables(HTMLParser):
        """The text of each table's cells, by the table's class."""

        def __init__(self) -> None:
            super().__init__()
            self.tables: dict[str, list[list[str]]] = {}
            self.current: list[list[str]] | None = None

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.current = self.tables.setdefault(dict(attrs).get("class") or "", [])
            elif tag == "tr" and self.current is not None:
                self.current.append([])

        def handle_data(self, data):
            if self.current and data.strip():
                self.current[-1].append(data.strip())

        def handle_endtag(self, tag):
            if tag == "table":
                self.current = None

    build_site(tmp_path, [typed_run(candidate)])
    pages = [
        render_summary(typed_run(candidate)),
        (tmp_path / "runs" / "r1.html").read_text(encoding="utf-8"),
    ]
    for page in pages:
        parser = Tables()
        parser.feed(page)
        matrix = parser.tables["goldeval-matrix"]
        assert matrix[0] == ["Case", "control", "candidate"]
        assert matrix[1][0] == "b" and matrix[1][1].startswith("P ·")
        assert matrix[1][2].startswith("F ·")
        pareto = parser.tables["goldeval-pareto"]
        assert [row[0] for row in pareto[1:]] == ["control", "candidate"]
        # These runs carry no tokens: an unknown cost compares with nothing, both on the front.
        assert [row[-1] for row in pareto[1:]] == ["yes", "yes"]
