"""What two variants cost, compared case by case, and the Pareto table of a session's
variants (issue 35): ``variantComparison.pairedCosts`` and ``variantComparison.pareto``.

Figures only; nothing here gates. The paired differences are reported beside the pass-rate
comparison the verdict weighs (goldeval.verdict.variants) and never change its decision.

Paired: each case's figure is the mean over its *graded* attempts (PASS or FAIL, the
attempts the pass-rate comparison pairs), so a timed-out ERROR attempt does not stretch one
side's latency. The difference is candidate − control per case; its interval is the seeded
case bootstrap of :func:`goldeval.results.sampling.mean_intervals` (the normal interval past
``BOOTSTRAP_MAX_CASES`` cases), so attempts of one case are resampled together.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from goldeval.results.documents import Attempt, RunDocument
from goldeval.results.sampling import DEFAULT_RESAMPLES, DEFAULT_SEED, mean_intervals

#: The figures compared per case, as ``pairedCosts`` names them, and how an attempt gives one.
PAIRED_FIGURES: dict[str, Callable[[Attempt], float | None]] = {
    "latencyMs": lambda a: a.duration_ms,
    "totalTokens": lambda a: a.tokens.total_tokens if a.tokens is not None else None,
    "estimatedCost": lambda a: a.tokens.estimated_cost if a.tokens is not None else None,
}


#: Per figure of :data:`PAIRED_FIGURES`, each case's mean over its graded attempts.
CaseFigures = dict[str, dict[str, float]]


def case_figures(cases: Iterable[Mapping[str, Any]]) -> CaseFigures:
    """Each case's mean of every figure over its graded attempts that have it (a case with
    no such attempt is left out of that figure), from full cases as run.json writes them."""
    out: CaseFigures = {name: {} for name in PAIRED_FIGURES}
    for case in cases:
        graded = [
            Attempt.model_validate(a)
            for a in case.get("attempts", [])
            if a.get("status") in ("PASS", "FAIL")
        ]
        for name, figure in PAIRED_FIGURES.items():
            values = [v for a in graded if (v := figure(a)) is not None]
            if values:
                out[name][case["caseId"]] = sum(values) / len(values)
    return out


def case_figures_of_file(cases_file: Path) -> CaseFigures:
    """:func:`case_figures` of a run's cases file (one full case per JSON line, as
    goldeval.results.run_document.build_run wrote it): the in-memory run keeps passing cases
    light, without their attempts' latency and tokens."""
    with open(cases_file, encoding="utf-8") as fh:
        return case_figures(json.loads(line) for line in fh if line.strip())


def paired_costs(
    control: CaseFigures,
    candidate: CaseFigures,
    case_ids: Sequence[str],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict[str, Any]:
    """``pairedCosts``: per figure, on the ``case_ids`` (the paired cases) where both sides
    measured it, the control's and the candidate's mean per case, the mean difference
    (candidate − control) with its 95% interval, and the difference relative to the control.
    A figure neither side measured on a common case is null (no prices: no cost)."""
    out: dict[str, Any] = {}
    for name in PAIRED_FIGURES:
        a, b = control.get(name, {}), candidate.get(name, {})
        ids = [cid for cid in case_ids if cid in a and cid in b]
        if not ids:
            out[name] = None
            continue
        differences = [b[cid] - a[cid] for cid in ids]
        (interval,) = mean_intervals([differences], resamples=resamples, seed=seed)
        control_mean = sum(a[cid] for cid in ids) / len(ids)
        difference = sum(differences) / len(ids)
        out[name] = {
            "cases": len(ids),
            "control": control_mean,
            "candidate": sum(b[cid] for cid in ids) / len(ids),
            "difference": difference,
            "ci95": interval.dump() if interval is not None else None,
            "relative": difference / control_mean if control_mean else None,
        }
    return out


def pareto_table(runs: Sequence[tuple[str, RunDocument]]) -> dict[str, Any]:
    """``pareto``: every variant of the session with its attempt-weighted pass rate, p95
    latency and cost, and which variants dominate it (at least as good on all three, better
    on one). The cost is the estimated price when every variant has one, else total tokens
    (``costBasis`` says which). A figure unknown on either side makes two variants
    incomparable: neither dominates the other, so an unknown never puts a variant off the
    front."""
    rows = [_pareto_row(name, run) for name, run in runs]
    basis = (
        "estimatedCost"
        if rows and all(r["estimatedCost"] is not None for r in rows)
        else "totalTokens"
    )
    for row in rows:
        row["cost"] = row[basis]
    for row in rows:
        row["dominatedBy"] = [other["variant"] for other in rows if _dominates(other, row)]
        row["front"] = not row["dominatedBy"]
    return {"costBasis": basis, "rows": rows}


def _pareto_row(name: str, run: RunDocument) -> dict[str, Any]:
    metrics = run.metrics
    # The run's own attempt-weighted rate (PASS / (PASS + FAIL), results.metrics).
    overall = metrics.overall_pass_rate if metrics is not None else None
    latency = (metrics.latency if metrics is not None else None) or {}
    tokens = metrics.tokens if metrics is not None else None
    return {
        "variant": name,
        "model": run.model,
        "passRate": overall.hits / overall.total if overall and overall.total else None,
        "gradedAttempts": overall.total if overall else 0,
        "p95Ms": latency.get("p95Ms") if latency.get("samples", 1) else None,
        "totalTokens": tokens.total_tokens if tokens is not None else None,
        "estimatedCost": tokens.estimated_cost if tokens is not None else None,
    }


def _dominates(x: dict[str, Any], y: dict[str, Any]) -> bool:
    """x is at least as good as y on pass rate (higher), cost and p95 (lower), and better on
    one; False when any of the three is unknown for either."""
    gx, gy = _goodness(x), _goodness(y)
    if gx is None or gy is None:
        return False
    pairs = list(zip(gx, gy, strict=True))
    return all(p >= q for p, q in pairs) and any(p > q for p, q in pairs)


def _goodness(row: dict[str, Any]) -> tuple[float, float, float] | None:
    """The row's three figures, each the higher the better (None when one is unknown)."""
    rate, cost, p95 = row["passRate"], row["cost"], row["p95Ms"]
    if rate is None or cost is None or p95 is None:
        return None
    return (rate, -cost, -p95)
