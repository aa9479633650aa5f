"""Attempt-weighted metrics with the reference's worked examples (section 4.4)."""

from __future__ import annotations

import pytest

from goldeval.core.models import (
    AttemptRecord,
    CaseInfo,
    ContractResult,
    RetrievalResult,
    Status,
)
from goldeval.core.stats import wilson
from goldeval.results.metrics import compute_metrics, latency_stats
from goldeval.results.rollup import case_status, count, roll_up


def attempts(case_id: str, statuses: str, **kw) -> list[AttemptRecord]:
    out = []
    for i, s in enumerate(statuses, start=1):
        status = {"P": Status.PASS, "F": Status.FAIL, "S": Status.SKIPPED, "E": Status.ERROR}[s]
        contract = ContractResult(passed=s == "P") if s in "PF" else None
        out.append(
            AttemptRecord(
                case_id=case_id,
                index=i,
                status=status,
                contract=contract,
                duration_ms=kw.get("ms", 10),
                retrieval=kw.get("retrieval"),
            ).dump()
        )
    return out


def case(case_id: str, statuses: str, kinds=("GENERATION",), retrieval=None):
    info = CaseInfo(case_id=case_id, kinds=list(kinds), prompt="p").dump()
    return roll_up(info, attempts(case_id, statuses, retrieval=retrieval))


def test_one_pass_and_five_fails_is_one_sixth_not_half() -> None:
    m = compute_metrics([case("a", "P"), case("b", "FFFFF")])
    assert (m["overallPassRate"]["hits"], m["overallPassRate"]["total"]) == (1, 6)
    assert m["overallPassRate"]["rate"] == pytest.approx(1 / 6)


def test_fourteen_of_fifteen_and_unstable_cases() -> None:
    m = compute_metrics([case("a", "PPPPP"), case("b", "PPPPF"), case("c", "PPPPP")])
    assert (m["overallPassRate"]["hits"], m["overallPassRate"]["total"]) == (14, 15)
    assert (m["unstableCaseRate"]["hits"], m["unstableCaseRate"]["total"]) == (1, 3)
    m = compute_metrics([case("a", "PPPPP"), case("b", "PPPFF"), case("c", "PPPPP")])
    assert (m["overallPassRate"]["hits"], m["unstableCaseRate"]["hits"]) == (13, 1)


def test_undefined_rates_are_none_never_zero_or_hundred() -> None:
    m = compute_metrics([case("a", "EE"), case("b", "S")])
    for name in ("overallPassRate", "contractPassRate", "hallucinationRate", "judgeAcceptRate"):
        assert m[name]["rate"] is None and m[name]["total"] == 0
    assert m["weightedScore"] is None


def test_hallucination_is_a_fail_rate_and_slice_is_a_pass_rate() -> None:
    kinds = ("GENERATION", "RAG", "NEGATIVE", "HALLUCINATION")
    m = compute_metrics([case("hallucinate-a", "PF", kinds), case("hallucinate-b", "FF", kinds)])
    assert (m["hallucinationRate"]["hits"], m["hallucinationRate"]["total"]) == (3, 4)
    assert (m["slices"]["hallucination"]["hits"], m["slices"]["hallucination"]["total"]) == (1, 4)
    assert (m["negativeCasePassRate"]["hits"], m["negativeCasePassRate"]["total"]) == (1, 4)


def test_retrieval_counts_cases_and_skipped_cases_count() -> None:
    ok = RetrievalResult(applicable=True, passed=True)
    bad = RetrievalResult(applicable=True, passed=False)
    m = compute_metrics([case("a", "P", retrieval=ok), case("b", "S", retrieval=bad)])
    assert (m["retrievalPassRate"]["hits"], m["retrievalPassRate"]["total"]) == (1, 2)


def test_case_rollup_rules() -> None:
    def st(s: str) -> str:
        return case_status([a["status"] for a in attempts("x", s)])

    assert st("SS") == "SKIPPED"
    assert st("EE") == "ERROR"
    assert st("PE") == "ERROR"  # a PASS+ERROR mix is an ERROR case
    assert st("FE") == "FAIL"
    assert st("PP") == "PASS"
    assert st("PF") == "FAIL"
    failed_retrieval = RetrievalResult(applicable=True, passed=False)
    assert case("r", "P", retrieval=failed_retrieval)["status"] == "FAIL"


def test_counters() -> None:
    c = count([case("a", "PF"), case("b", "E"), case("c", "S")])
    assert (c.cases_total, c.cases_failed, c.cases_error, c.cases_skipped) == (3, 1, 1, 1)
    assert (c.attempts_total, c.attempts_passed, c.attempts_failed) == (4, 1, 1)


def test_wilson_reference_values() -> None:
    assert wilson(8, 8)[0] == pytest.approx(0.6755924351161198, abs=1e-15)
    assert wilson(5, 5)[0] == pytest.approx(0.5655175352168252, abs=1e-15)
    assert wilson(3, 3)[0] == pytest.approx(0.4385029682449545, abs=1e-15)
    assert wilson(1, 1)[0] == pytest.approx(0.20654931437723742, abs=1e-15)
    assert wilson(0, 2)[1] == pytest.approx(0.6576197724933469, abs=1e-15)
    assert wilson(0, 0) is None


def test_latency_percentiles_and_rounding() -> None:
    assert latency_stats([1, 2, 3, 6, 0]) == {
        "minMs": 1,
        "avgMs": 3,
        "medianMs": 2,
        "p95Ms": 6,
        "maxMs": 6,
        "samples": 4,
    }
    assert latency_stats([])["samples"] == 0


def test_weighted_score_formula() -> None:
    m = compute_metrics([case("a", "P"), case("b", "F")])
    assert m["weightedScore"] == pytest.approx(0.5)
    assert m["weightedScoreFormula"] == "(1.00*contract(0.500)) / 1.00"


def test_pass_at_k_only_when_asked_and_from_the_cases_tallies() -> None:
    from goldeval.results.metrics import MetricsAccumulator
    from goldeval.results.sampling import pass_at_k, pass_hat_k

    cases = [case("a", "PPP"), case("b", "PFF"), case("c", "FFF"), case("d", "PPE")]
    assert "passAtK" not in compute_metrics(cases)
    acc = MetricsAccumulator(pass_at_k=True)
    for c in cases:
        acc.add(c)
    table = acc.result()["passAtK"]
    assert (table["cases"], table["seed"], table["resamples"]) == (4, 0, 2000)
    rows = {row["k"]: row for row in table["byK"]}
    assert sorted(rows) == [1, 2, 3]
    # k = 3: case d has only 2 graded attempts (one ERROR) and is left out.
    assert rows[3]["cases"] == 3 and rows[2]["cases"] == 4
    expected = (pass_at_k(3, 3, 2) + pass_at_k(3, 1, 2) + 0.0 + pass_at_k(2, 2, 2)) / 4
    assert rows[2]["passAtK"] == pytest.approx(expected)
    assert rows[2]["passHatK"] == pytest.approx((1.0 + pass_hat_k(3, 1, 2) + 0.0 + 1.0) / 4)
    assert rows[2]["passAtKCi95"]["method"] == "bootstrap-percentile"
