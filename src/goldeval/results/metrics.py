"""Attempt-weighted metrics (reference 4.4): hits / quality attempts, never a mean of rates.

Pure functions over rolled-up cases. A rate with nothing counted is undefined (``None``,
printed ``n/a``), never 0% or 100%.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from goldeval.core.models import Rate
from goldeval.core.rates import RATE_NAMES
from goldeval.core.stats import wilson
from goldeval.results.sampling import Tally, pass_at_k_table

WEIGHT_TERMS = (
    ("contract", "contractPassRate"),
    ("judge", "judgeAcceptRate"),
    ("retrieval", "retrievalPassRate"),
    ("negative", "negativeCasePassRate"),
    ("hallucinationInverse", "hallucinationRate"),
    ("refusal", "refusalAccuracy"),
    ("layer", "layerAccuracy"),
    ("rag", "ragAccuracy"),
)


def _round_half_up(value: float) -> int:
    return math.floor(value + 0.5)


def latency_stats(samples: Sequence[int]) -> dict[str, int]:
    values = sorted(s for s in samples if s > 0)
    n = len(values)
    if n == 0:
        return {"minMs": 0, "avgMs": 0, "medianMs": 0, "p95Ms": 0, "maxMs": 0, "samples": 0}

    def pct(p: float) -> int:
        idx = min(max(math.ceil(p * n) - 1, 0), n - 1)
        return values[idx]

    return {
        "minMs": values[0],
        "avgMs": _round_half_up(sum(values) / n),
        "medianMs": pct(0.50),
        "p95Ms": pct(0.95),
        "maxMs": values[-1],
        "samples": n,
    }


def _add(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


class MetricsAccumulator:
    """Reference 4.4 metrics, fed one rolled-up case (a run.json case dict) at a time."""

    def __init__(self, pass_at_k: bool = False) -> None:
        """``pass_at_k``: add ``passAtK`` (the run repeated attempts: --golden-attempts > 1)."""
        self.pass_at_k = pass_at_k
        #: How many cases had each (passed, graded) tally: all pass@k needs, in little memory.
        self.tallies: Counter[Tally] = Counter()
        self.h = dict.fromkeys(RATE_NAMES, 0)
        self.t = dict.fromkeys(RATE_NAMES, 0)
        self.unstable_h = 0
        self.unstable_t = 0
        self.slices: dict[str, list[int]] = {}
        self.graders: dict[str, list[int]] = {}
        self.soft: dict[str, list[float]] = {}
        self.latencies: list[int] = []
        # Live calls through a provider limiter: wait before sending, time to first token.
        self.queue_waits: list[int] = []
        self.ttfts: list[int] = []
        self.tok_in: int | None = None
        self.tok_out: int | None = None
        self.tok_total: int | None = None
        self.cost: float | None = None
        self.cost_known = True
        # Operational facts the terminal and report.md show (retries, judge outcomes): the
        # run keeps only light copies of passing cases, so they are counted here, in passing.
        self.retried = 0
        self.extra_tries = 0
        self.retried_cases = _CaseNames()
        self.judge = {"accept": 0, "reject": 0, "pending": 0, "errors": 0}
        self.judged = False
        self.judge_tokens = _JudgeTokens()
        #: Attempts whose tokens are estimates (the provider reported no usage).
        self.tok_estimated = 0
        self.judge_pending = _CaseNames()
        self.judge_errors = _CaseNames()

    def add(self, case: Mapping[str, Any]) -> None:
        h, t = self.h, self.t
        kinds = case.get("kinds") or ()
        negative = "NEGATIVE" in kinds
        hallucination = "HALLUCINATION" in kinds
        refusal = "REFUSAL" in kinds
        retrieval = case.get("retrieval")
        if retrieval and retrieval.get("applicable"):
            t["retrievalPassRate"] += 1
            h["retrievalPassRate"] += bool(retrieval.get("passed"))
        case_hits = case_quality = 0
        for a in case.get("attempts") or ():
            status = a.get("status")
            self._usage(case, a, status)
            if status != "PASS" and status != "FAIL":
                continue
            passed = status == "PASS"
            case_quality += 1
            case_hits += passed
            t["overallPassRate"] += 1
            h["overallPassRate"] += passed
            c = a.get("contract")
            if c is not None:
                t["contractPassRate"] += 1
                h["contractPassRate"] += bool(c.get("passed"))
                if refusal and c.get("refuseChecked"):
                    t["refusalAccuracy"] += 1
                    h["refusalAccuracy"] += bool(c.get("refuseOk"))
                if c.get("layerChecked"):
                    t["layerAccuracy"] += 1
                    h["layerAccuracy"] += bool(c.get("layerOk"))
                if c.get("ragChecked"):
                    t["ragAccuracy"] += 1
                    h["ragAccuracy"] += bool(c.get("ragOk"))
            j = a.get("judge")
            if j:
                self._judge(case.get("caseId"), j)
            if j and not j.get("error") and j.get("decision") != "PENDING":
                t["judgeAcceptRate"] += 1
                h["judgeAcceptRate"] += j.get("decision") == "ACCEPT"
            if negative:
                t["negativeCasePassRate"] += 1
                h["negativeCasePassRate"] += passed
            if hallucination:
                t["hallucinationRate"] += 1
                h["hallucinationRate"] += not passed
            self._graders(a)
        if case_quality:
            self.tallies[Tally(case_hits, case_quality)] += 1
            for kind in kinds:
                sl = self.slices.setdefault(kind.lower(), [0, 0])
                sl[0] += case_hits
                sl[1] += case_quality
        rate = case.get("successRate") or {}
        if (rate.get("total") or 0) >= 2:
            self.unstable_t += 1
            self.unstable_h += 0 < rate.get("hits", 0) < rate["total"]

    def _usage(self, case: Mapping[str, Any], a: Mapping[str, Any], status: Any) -> None:
        """One attempt's latency, tokens, cost, waits and retries (whatever its status)."""
        duration = a.get("durationMs") or 0
        if status != "SKIPPED" and duration > 0:
            self.latencies.append(duration)
        jt = (a.get("judge") or {}).get("tokens")
        if jt:
            self.judge_tokens.add(jt)
        tk = a.get("tokens")
        if tk:
            self.tok_in = _add(self.tok_in, tk.get("inputTokens"))
            self.tok_out = _add(self.tok_out, tk.get("outputTokens"))
            self.tok_total = _add(self.tok_total, tk.get("totalTokens"))
            if tk.get("estimated") is True:
                self.tok_estimated += 1
            if tk.get("estimatedCost") is not None:
                self.cost = (self.cost or 0.0) + tk["estimatedCost"]
            elif status != "SKIPPED":
                self.cost_known = False
        elif status != "SKIPPED":
            self.cost_known = False
        if isinstance(a.get("queueMs"), int):
            self.queue_waits.append(a["queueMs"])
        if isinstance(a.get("ttftMs"), int):
            self.ttfts.append(a["ttftMs"])
        tries = a.get("tries")
        if isinstance(tries, int) and tries > 1:
            self.retried += 1
            self.extra_tries += tries - 1
            self.retried_cases.add(case.get("caseId"))

    def _graders(self, a: Mapping[str, Any]) -> None:
        """A graded attempt's per-grader tallies (hard) and scores (soft)."""
        for g in a.get("graders") or ():
            if g.get("hard", True):
                bucket = self.graders.setdefault(g["grader"], [0, 0])
                bucket[0] += bool(g.get("passed"))
                bucket[1] += 1
            elif g.get("score") is not None:
                self.soft.setdefault(g["grader"], []).append(g["score"])

    def _judge(self, case_id: Any, j: Mapping[str, Any]) -> None:
        self.judged = True
        if j.get("error"):
            self.judge["errors"] += 1
            self.judge_errors.add(case_id)
        elif j.get("decision") == "ACCEPT":
            self.judge["accept"] += 1
        elif j.get("decision") == "REJECT":
            self.judge["reject"] += 1
        else:
            self.judge["pending"] += 1
            self.judge_pending.add(case_id)

    def result(self, weights: Mapping[str, float] | None = None) -> dict[str, Any]:
        metrics: dict[str, Any] = {n: rate_dict(self.h[n], self.t[n]) for n in RATE_NAMES}
        score, formula = weighted_score(metrics, weights or {})
        metrics["weightedScore"] = score
        metrics["weightedScoreFormula"] = formula
        metrics["latency"] = latency_stats(self.latencies)
        if self.queue_waits:
            metrics["queueWait"] = latency_stats(self.queue_waits)
        if self.ttfts:
            metrics["timeToFirstToken"] = latency_stats(self.ttfts)
        tokens: dict[str, Any] = {}
        if self.tok_in is not None:
            tokens["inputTokens"] = self.tok_in
        if self.tok_out is not None:
            tokens["outputTokens"] = self.tok_out
        if self.tok_total is not None:
            tokens["totalTokens"] = self.tok_total
        if self.cost is not None and self.cost_known:
            tokens["estimatedCost"] = self.cost
        if self.tok_estimated:
            # Some counts are characters / 4, not the provider's usage: say so, and how many.
            tokens["estimated"] = True
            tokens["estimatedAttempts"] = self.tok_estimated
        if self.judge_tokens.counted:
            # The judge's calls, labelled apart: the totals above stay the model's own.
            tokens["judge"] = self.judge_tokens.dump()
        metrics["tokens"] = tokens
        metrics["unstableCaseRate"] = rate_dict(self.unstable_h, self.unstable_t)
        metrics["slices"] = {k: rate_dict(v[0], v[1]) for k, v in self.slices.items()}
        metrics["graders"] = {k: rate_dict(v[0], v[1]) for k, v in sorted(self.graders.items())}
        if self.retried:
            metrics["retries"] = {
                "attempts": self.retried,
                "extraTries": self.extra_tries,
                **self.retried_cases.dump("cases"),
            }
        if self.judged:
            metrics["judge"] = {
                **self.judge,
                **self.judge_pending.dump("pendingCases"),
                **self.judge_errors.dump("errorCases"),
            }
        if self.pass_at_k and self.tallies:
            metrics["passAtK"] = pass_at_k_table(list(self.tallies.elements()))
        if self.soft:
            metrics["softScores"] = {
                k: {"mean": sum(v) / len(v), "samples": len(v)}
                for k, v in sorted(self.soft.items())
            }
        return metrics


#: How many case ids a metrics entry names (the counts are always complete).
CASES_NAMED = 10


class _CaseNames:
    """Distinct cases counted, the first CASES_NAMED named (cases arrive one at a time)."""

    def __init__(self) -> None:
        self.count = 0
        self.ids: list[str] = []
        self._last: Any = None

    def add(self, case_id: Any) -> None:
        if case_id is None or case_id == self._last:
            return  # another attempt of the case just counted
        self._last = case_id
        self.count += 1
        if len(self.ids) < CASES_NAMED:
            self.ids.append(str(case_id))

    def dump(self, name: str) -> dict[str, Any]:
        return {name: self.count, name[:-1] + "Ids": list(self.ids)}


def compute_metrics(
    cases: Iterable[Mapping[str, Any]], weights: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """Every metric of reference 4.4 plus per-grader pass rates, as a JSON-plain dict."""
    acc = MetricsAccumulator()
    for case in cases:
        acc.add(case)
    return acc.result(weights)


def rate_dict(hits: int, total: int) -> dict[str, Any]:
    """``{"hits", "total", "rate"}``; rate is None when total is 0. Wilson 95% for reading."""
    out: dict[str, Any] = {
        "hits": int(hits),
        "total": int(total),
        "rate": hits / total if total else None,
    }
    ci = wilson(int(hits), int(total))
    if ci is not None:
        out["ci95"] = {"lower": ci[0], "upper": ci[1], "method": "wilson"}
    return out


def rate_value(metric: Mapping[str, Any] | None) -> float | None:
    if not metric:
        return None
    total = metric.get("total") or 0
    return (metric.get("hits") or 0) / total if total else None


def weighted_score(
    metrics: Mapping[str, Any], weights: Mapping[str, float]
) -> tuple[float | None, str | None]:
    num = den = 0.0
    parts = []
    for term, rate_name in WEIGHT_TERMS:
        w = float(weights.get(term, 1.0))
        value = rate_value(metrics.get(rate_name))
        if w <= 0 or value is None:
            continue
        if term == "hallucinationInverse":
            value = 1.0 - value
        num += w * value
        den += w
        parts.append(f"{w:.2f}*{term}({value:.3f})")
    if den == 0:
        return None, None
    return num / den, "(" + " + ".join(parts) + ") / " + f"{den:.2f}"


def format_rate(metric: Mapping[str, Any] | None) -> str:
    value = rate_value(metric)
    if value is None or metric is None:
        return "n/a"
    return f"{value * 100:.1f}% ({metric['hits']} / {metric['total']})"


def recompute_overall(cases: Iterable[Mapping[str, Any]]) -> Rate:
    """PASS / quality attempts straight from serialised cases (baseline integrity check)."""
    hits = total = 0
    for case in cases:
        for a in case.get("attempts") or []:
            if a.get("status") in ("PASS", "FAIL"):
                total += 1
                hits += a.get("status") == "PASS"
    return Rate(hits=hits, total=total)


class _JudgeTokens:
    """Token totals of the judge's calls (``metrics.tokens.judge``)."""

    def __init__(self) -> None:
        self.counted = False
        self.estimated = False
        self.values: dict[str, int] = {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}

    def add(self, tokens: Mapping[str, Any]) -> None:
        for key in self.values:
            value = tokens.get(key)
            if isinstance(value, int):
                self.values[key] += value
                self.counted = True
        self.estimated = self.estimated or tokens.get("estimated") is True

    def dump(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.values)
        if self.estimated:
            out["estimated"] = True
        return out
