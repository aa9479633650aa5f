"""Paired cost and latency of two variants and the Pareto table of a session's variants
(issue 35, goldeval.results.variant_costs), and how report.md shows them."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from goldeval.reports.markdown_variants import variant_lines
from goldeval.results.documents import RunDocument, VariantComparisonDoc
from goldeval.results.sampling import mean_intervals
from goldeval.results.variant_comparison import compare_variants
from goldeval.results.variant_costs import (
    CaseFigures,
    case_figures,
    case_figures_of_file,
    paired_costs,
    pareto_table,
)

# One attempt: (status, durationMs, totalTokens, estimatedCost); None leaves the figure out.
AttemptFigures = tuple[str, float | None, int | None, float | None]


def _run(model: str, cases: dict[str, list[AttemptFigures]], **metrics: Any) -> RunDocument:
    docs = []
    for cid, attempts in cases.items():
        attempt_docs = []
        for i, (status, ms, tokens, cost) in enumerate(attempts, 1):
            doc: dict[str, Any] = {"index": i, "status": status}
            if ms is not None:
                doc["durationMs"] = ms
            if tokens is not None or cost is not None:
                doc["tokens"] = {"totalTokens": tokens, "estimatedCost": cost}
            attempt_docs.append(doc)
        docs.append({"caseId": cid, "status": "PASS", "attempts": attempt_docs})
    return RunDocument.model_validate({"model": model, "cases": docs, "metrics": metrics})


CONTROL = _run(
    "m-a",
    {
        "c1": [("PASS", 100.0, 10, None), ("FAIL", 200.0, 30, None)],
        "c2": [("PASS", 50.0, 20, None), ("ERROR", 90_000.0, None, None)],
        "c3": [("PASS", 80.0, None, None)],
    },
)
CANDIDATE = _run(
    "m-b",
    {
        "c1": [("PASS", 130.0, 12, None), ("PASS", 170.0, 28, None)],
        "c2": [("FAIL", 75.0, 30, None)],
        "c3": [("PASS", 100.0, 40, None)],
    },
)


def _figures(run: RunDocument) -> CaseFigures:
    return case_figures(case.dump() for case in run.cases)


def test_each_case_is_the_mean_of_its_graded_attempts_and_errors_are_left_out() -> None:
    figures = paired_costs(_figures(CONTROL), _figures(CANDIDATE), ["c1", "c2", "c3"])
    latency = figures["latencyMs"]
    # Control per case: c1 (100+200)/2 = 150, c2 50 (the 90 s ERROR attempt is not graded),
    # c3 80; candidate: 150, 75, 100. Differences 0, +25, +20.
    assert latency["cases"] == 3
    assert latency["control"] == pytest.approx((150 + 50 + 80) / 3)
    assert latency["candidate"] == pytest.approx((150 + 75 + 100) / 3)
    assert latency["difference"] == pytest.approx(15.0)
    assert latency["relative"] == pytest.approx(15.0 / ((150 + 50 + 80) / 3))
    (expected,) = mean_intervals([[0.0, 25.0, 20.0]])
    assert expected is not None and latency["ci95"] == expected.dump()
    # c3 has no tokens on the control's side: two cases pair on tokens.
    tokens = figures["totalTokens"]
    assert tokens["cases"] == 2
    assert tokens["control"] == pytest.approx((20 + 20) / 2)
    assert tokens["difference"] == pytest.approx(((20 - 20) + (30 - 20)) / 2)
    # No price anywhere: the cost is not measured, not zero.
    assert figures["estimatedCost"] is None


def test_only_the_paired_cases_count_and_the_figures_are_reproducible() -> None:
    only_c2 = paired_costs(_figures(CONTROL), _figures(CANDIDATE), ["c2"])
    assert only_c2["latencyMs"]["cases"] == 1
    assert only_c2["latencyMs"]["difference"] == pytest.approx(25.0)
    both = (_figures(CONTROL), _figures(CANDIDATE))
    assert paired_costs(*both, ["c1", "c2", "c3"]) == paired_costs(*both, ["c1", "c2", "c3"])
    # A constant difference has a degenerate interval at that difference.
    slower = _run("m", {f"c{i}": [("PASS", 10.0 * i + 7, None, None)] for i in range(30)})
    faster = _run("m", {f"c{i}": [("PASS", 10.0 * i, None, None)] for i in range(30)})
    ids = [f"c{i}" for i in range(30)]
    ci = paired_costs(_figures(faster), _figures(slower), ids)["latencyMs"]["ci95"]
    assert ci["lower"] == pytest.approx(7.0) and ci["upper"] == pytest.approx(7.0)


def test_compare_variants_carries_the_paired_costs_on_its_paired_cases() -> None:
    figures = compare_variants(
        CONTROL, CANDIDATE, control="a", candidate="b", margin=0.05, resamples=200
    )
    assert figures["cases"] == 3
    assert figures["pairedCosts"] == paired_costs(
        _figures(CONTROL), _figures(CANDIDATE), ["c1", "c2", "c3"], resamples=200
    )
    doc = VariantComparisonDoc.model_validate({**figures, "decision": "INCONCLUSIVE"})
    assert doc.paired_costs is not None and doc.paired_costs["estimatedCost"] is None


def test_figures_are_read_from_the_cases_file_line_by_line(tmp_path: Path) -> None:
    cases_file = tmp_path / "cases.jsonl"
    lines = [json.dumps(case.dump()) for case in CONTROL.cases]
    cases_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert case_figures_of_file(cases_file) == _figures(CONTROL)
    assert case_figures_of_file(cases_file)["latencyMs"] == {"c1": 150.0, "c2": 50.0, "c3": 80.0}


def _variant(rate: float, cost: float | None, p95: int | None) -> RunDocument:
    passed = round(rate * 20)
    attempts: list[AttemptFigures] = [
        ("PASS" if i < passed else "FAIL", None, None, None) for i in range(20)
    ]
    latency = {"p95Ms": p95 or 0, "samples": 20 if p95 is not None else 0}
    tokens = {"totalTokens": 1000, "estimatedCost": cost}
    overall = {"hits": passed, "total": 20}  # what results.metrics counts from the attempts
    return _run("m", {"c": attempts}, latency=latency, tokens=tokens, overallPassRate=overall)


def test_pareto_front_and_who_dominates_whom() -> None:
    table = pareto_table(
        [
            ("a", _variant(0.90, 1.0, 50)),
            ("b", _variant(0.80, 1.2, 60)),  # worse than a on all three
            ("c", _variant(0.95, 2.0, 40)),  # best rate, dearest: on the front
            ("d", _variant(0.90, 1.0, 50)),  # equal to a: neither dominates
        ]
    )
    assert table["costBasis"] == "estimatedCost"
    rows = {r["variant"]: r for r in table["rows"]}
    assert rows["b"]["dominatedBy"] == ["a", "d"] and rows["b"]["front"] is False
    assert [v for v, r in rows.items() if r["front"]] == ["a", "c", "d"]
    assert rows["a"]["passRate"] == pytest.approx(0.9) and rows["a"]["gradedAttempts"] == 20


def test_pareto_an_unknown_figure_compares_with_nothing_and_tokens_stand_in_for_price() -> None:
    table = pareto_table(
        [
            ("priced", _variant(0.9, 1.0, 50)),
            ("unpriced", _variant(0.5, None, 90)),  # worse, but its price is unknown
            ("no-latency", _variant(0.1, 1.0, None)),
        ]
    )
    # One variant has no price: every variant is weighed on tokens (all 1000 here).
    assert table["costBasis"] == "totalTokens"
    rows = {r["variant"]: r for r in table["rows"]}
    assert rows["unpriced"]["dominatedBy"] == ["priced"]
    assert rows["no-latency"]["p95Ms"] is None and rows["no-latency"]["front"] is True


def test_pareto_matches_brute_force_dominance_on_random_tables() -> None:
    rng = random.Random(7)
    for _ in range(50):
        figures = [
            (rng.choice([0.5, 0.7, 0.9]), rng.choice([1.0, 2.0]), rng.choice([10, 20, None]))
            for _ in range(5)
        ]
        table = pareto_table([(f"v{i}", _variant(*f)) for i, f in enumerate(figures)])
        for (i, x), (j, y) in itertools.permutations(enumerate(figures), 2):
            known = x[2] is not None and y[2] is not None
            dominates = (
                known
                and x[0] >= y[0]
                and x[1] <= y[1]
                and x[2] <= y[2]  # type: ignore[operator]
                and (x[0], -x[1], -x[2]) != (y[0], -y[1], -y[2])  # type: ignore[operator]
            )
            assert (f"v{i}" in table["rows"][j]["dominatedBy"]) is dominates


def test_report_md_shows_the_paired_costs_and_the_pareto_table() -> None:
    figures = compare_variants(
        CONTROL, CANDIDATE, control="a", candidate="b", margin=0.05, resamples=200
    )
    figures["pareto"] = pareto_table([("a", _variant(0.9, 1.0, 50)), ("b", _variant(0.8, 1.2, 60))])
    doc = VariantComparisonDoc.model_validate(
        {**figures, "decision": "INCONCLUSIVE", "reason": "r"}
    )
    lines = variant_lines(doc)
    paired = [line for line in lines if line.startswith(("| Figure", "| Latency", "| Estimated"))]
    assert paired[0] == "| Figure | Cases | Control | Candidate | Difference | 95% CI | Relative |"
    assert paired[1].startswith("| Latency per attempt | 3 | 93.3 ms | 108.3 ms | +15.0 ms |")
    assert paired[-1] == "| Estimated cost per attempt | 0 | n/a | n/a | n/a | n/a | n/a |"
    header = "| Variant | Model | Pass rate | Estimated cost | p95 | On the front |"
    front = lines[lines.index(header) :]
    assert front[2:] == [
        "| a | m | 90.0% | 1.0 | 50 ms | yes |",
        "| b | m | 80.0% | 1.2 | 60 ms | no (dominated by a) |",
    ]
