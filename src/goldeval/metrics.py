"""Attempt-weighted metrics (reference 4.4): hits / quality attempts, never a mean of rates.

Pure functions over rolled-up cases. A rate with nothing counted is undefined (``None``,
printed ``n/a``), never 0% or 100%.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from goldeval.models import CaseRecord, Rate, Status

RATE_NAMES = (
    "overallPassRate",
    "contractPassRate",
    "judgeAcceptRate",
    "retrievalPassRate",
    "negativeCasePassRate",
    "hallucinationRate",
    "refusalAccuracy",
    "layerAccuracy",
    "ragAccuracy",
)
LOWER_IS_BETTER = frozenset({"hallucinationRate", "latencyAvgMs"})
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
Z95 = 1.959963984540054


def wilson(hits: int, total: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval (for reading only; never gated)."""
    if total <= 0:
        return None
    p = hits / total
    denom = 1 + z * z / total
    centre = p + z * z / (2 * total)
    spread = z * math.sqrt((p * (1 - p) + z * z / (4 * total)) / total)
    return max(0.0, (centre - spread) / denom), min(1.0, (centre + spread) / denom)


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


def compute_metrics(
    cases: Iterable[CaseRecord], weights: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """Every metric of reference 4.4 plus per-grader pass rates, as a JSON-plain dict."""
    h = dict.fromkeys(RATE_NAMES, 0)
    t = dict.fromkeys(RATE_NAMES, 0)
    unstable_h = unstable_t = 0
    slices: dict[str, list[int]] = {}
    graders: dict[str, list[int]] = {}
    soft: dict[str, list[float]] = {}
    latencies: list[int] = []
    tok_in: int | None = None
    tok_out: int | None = None
    tok_total: int | None = None
    cost: float | None = None
    cost_known = True
    PASS, FAIL, SKIPPED = Status.PASS, Status.FAIL, Status.SKIPPED
    for case in cases:
        kinds = case.kinds
        negative = "NEGATIVE" in kinds
        hallucination = "HALLUCINATION" in kinds
        refusal = "REFUSAL" in kinds
        if case.retrieval is not None and case.retrieval.applicable:
            t["retrievalPassRate"] += 1
            h["retrievalPassRate"] += case.retrieval.passed
        case_hits = case_quality = 0
        for a in case.attempts:
            if a.status is not SKIPPED:
                if a.duration_ms > 0:
                    latencies.append(a.duration_ms)
            tk = a.tokens
            tok_in = _add(tok_in, tk.input_tokens)
            tok_out = _add(tok_out, tk.output_tokens)
            tok_total = _add(tok_total, tk.total_tokens)
            if tk.estimated_cost is None:
                cost_known = cost_known and a.status is SKIPPED
            else:
                cost = (cost or 0.0) + tk.estimated_cost
            if a.status is not PASS and a.status is not FAIL:
                continue
            passed = a.status is PASS
            case_quality += 1
            case_hits += passed
            t["overallPassRate"] += 1
            h["overallPassRate"] += passed
            c = a.contract
            if c is not None:
                t["contractPassRate"] += 1
                h["contractPassRate"] += c.passed
                if refusal and c.refuse_checked:
                    t["refusalAccuracy"] += 1
                    h["refusalAccuracy"] += c.refuse_ok
                if c.layer_checked:
                    t["layerAccuracy"] += 1
                    h["layerAccuracy"] += c.layer_ok
                if c.rag_checked:
                    t["ragAccuracy"] += 1
                    h["ragAccuracy"] += c.rag_ok
            j = a.judge
            if j is not None and j.error is None and j.decision != "PENDING":
                t["judgeAcceptRate"] += 1
                h["judgeAcceptRate"] += j.decision == "ACCEPT"
            if negative:
                t["negativeCasePassRate"] += 1
                h["negativeCasePassRate"] += passed
            if hallucination:
                t["hallucinationRate"] += 1
                h["hallucinationRate"] += not passed
            for g in a.graders:
                if g.hard:
                    bucket = graders.setdefault(g.grader, [0, 0])
                    bucket[0] += g.passed
                    bucket[1] += 1
                elif g.score is not None:
                    soft.setdefault(g.grader, []).append(g.score)
        if case_quality:
            for kind in kinds:
                s = slices.setdefault(kind.lower(), [0, 0])
                s[0] += case_hits
                s[1] += case_quality
        if case.success_rate.total >= 2:
            unstable_t += 1
            unstable_h += 0 < case.success_rate.hits < case.success_rate.total
    metrics: dict[str, Any] = {name: rate_dict(h[name], t[name]) for name in RATE_NAMES}
    score, formula = weighted_score(metrics, weights or {})
    metrics["weightedScore"] = score
    metrics["weightedScoreFormula"] = formula
    metrics["latency"] = latency_stats(latencies)
    tokens: dict[str, Any] = {}
    if tok_in is not None:
        tokens["inputTokens"] = tok_in
    if tok_out is not None:
        tokens["outputTokens"] = tok_out
    if tok_total is not None:
        tokens["totalTokens"] = tok_total
    if cost is not None and cost_known:
        tokens["estimatedCost"] = cost
    metrics["tokens"] = tokens
    metrics["unstableCaseRate"] = rate_dict(unstable_h, unstable_t)
    metrics["slices"] = {k: rate_dict(v[0], v[1]) for k, v in slices.items()}
    metrics["graders"] = {k: rate_dict(v[0], v[1]) for k, v in sorted(graders.items())}
    if soft:
        metrics["softScores"] = {
            k: {"mean": sum(v) / len(v), "samples": len(v)} for k, v in sorted(soft.items())
        }
    return metrics


def rate_dict(hits: int, total: int) -> dict[str, Any]:
    """``{"hits", "total", "rate"}``; rate is None when total is 0. Wilson 95% for reading."""
    out: dict[str, Any] = {"hits": int(hits), "total": int(total), "rate": hits / total if total else None}
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
