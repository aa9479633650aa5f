"""The HTML fragments pytest-html shows (``--html=report.html --self-contained-html``).

* :func:`render_summary`: the golden run at the top of the summary: dataset and protocol,
  the metrics with their Wilson intervals, the deltas against the baseline, the per-case
  classes and the gate decision with its rules (``templates/summary.html.j2``);
* :func:`render_attempt`: the expandable section per attempt: prompt, answer, what was
  retrieved, violations, the judge's reasons (``templates/attempt.html.j2``).

Pure functions over the typed run document (``RunDocument``); the pytest hooks that call them
live in :mod:`goldeval.pytest_plugin.html`. The views built here (:func:`protocol_rows`,
:func:`metric_rows`, :func:`comparison_view`, :func:`gate_view`) are shared with the history
site (:mod:`goldeval.reports.site`). Every value reaches the page through the templates'
autoescape (:mod:`goldeval.reports.templating`): answers and prompts are untrusted text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from goldeval.core.rates import GRADER_PREFIX
from goldeval.reports.labels import rate_label, shown_rates
from goldeval.reports.markdown_variants import PAIR_HEAD, matrix_cell_text, pair_cells
from goldeval.reports.templating import esc, render, status_class
from goldeval.reports.variant_charts import pass_at_k_chart
from goldeval.results.documents import Configuration, Metrics, RateDoc, RunDocument
from goldeval.verdict.comparison import comparison_label
from goldeval.verdict.gate_label import gate_label
from goldeval.verdict.variants import decide_variants

__all__ = [
    "MAX_TEXT",
    "ComparisonView",
    "comparison_view",
    "esc",
    "fmt_ci",
    "fmt_pct",
    "gate_view",
    "metric_rows",
    "protocol_rows",
    "rate_of",
    "render_attempt",
    "render_summary",
    "status_class",
]

MAX_TEXT = 50_000
#: Shown after the nine rates: the share of cases whose attempts disagree.
UNSTABLE = "unstableCaseRate"


def _clip(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + f"\n… ({len(text) - MAX_TEXT} more characters not shown)"


def fmt_pct(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "n/a"
    return f"{value * 100:.1f}%"


def fmt_ci(metric: RateDoc | None) -> str:
    ci = metric.ci95 if metric is not None else None
    if ci is None:
        return "n/a"
    return f"{ci.lower * 100:.1f}% – {ci.upper * 100:.1f}%"


def rate_of(metric: RateDoc | None) -> float | None:
    if metric is None:
        return None
    if metric.rate is not None:
        return float(metric.rate)
    return metric.hits / metric.total if metric.total else None


# -- views shared with the site ---------------------------------------------------------------


def protocol_rows(run: RunDocument) -> list[tuple[str, Any]]:
    """(label, value) rows of the dataset and protocol table."""
    p = run.protocol
    cfg = run.configuration or Configuration()
    return [
        ("Run", run.run_id),
        ("Status", run.status),
        ("Dataset", (p.dataset_id if p else None) or run.dataset_version),
        ("Dataset hash", (p.dataset_hash if p else None) or run.dataset_hash),
        ("Pack", (p.pack_id if p else None) or run.pack_dataset_version),
        ("Pack hash", (p.pack_hash if p else None) or run.pack_hash),
        ("Mode", f"{p.mode if p else None} ({cfg.as_written('golden_mode', 'n/a')})"),
        (
            "Provider / model",
            f"{cfg.as_written('provider', 'n/a')} / {(p.model if p else None) or 'n/a'}",
        ),
        ("Attempts per case", p.attempts if p else None),
        ("Selected cases", len(p.selected_case_ids) if p else 0),
        ("Grader config hash", p.grader_config_hash if p else None),
        *_retry_rows(run),
    ]


def _retry_rows(run: RunDocument) -> list[tuple[str, Any]]:
    """Provider retries of the run in total (live runs; absent when every call took one try)."""
    retries = (run.metrics.retries if run.metrics else None) or {}
    if not retries.get("attempts"):
        return []
    return [
        (
            "Retries",
            f"{retries['attempts']} attempt(s) needed more than one provider try "
            f"({retries.get('extraTries', 0)} extra tries)",
        )
    ]


def metric_rows(run: RunDocument) -> list[dict[str, Any]]:
    """The metrics table: the rates (core.rates order), the unstable-case rate, then one row
    per grader; a metric the run does not have is left out."""
    metrics = run.metrics or Metrics()
    graders = metrics.graders or {}
    named: list[tuple[str, str, RateDoc | None]] = [
        (name, rate_label(name), metrics.rate(name)) for name in (*shown_rates(run), UNSTABLE)
    ]
    named += [(f"{GRADER_PREFIX}{g}", f"Grader {g}", graders.get(g)) for g in sorted(graders)]
    return [
        {
            "name": name,
            "label": label,
            "rate": fmt_pct(rate_of(metric)),
            "hits": metric.hits,
            "total": metric.total,
            "ci": fmt_ci(metric),
        }
        for name, label, metric in named
        if metric is not None
    ]


def _fmt_delta_value(name: str, value: Any, signed: bool = False) -> str:
    if not isinstance(value, (int, float)):
        return "n/a"
    if name == "latencyAvgMs":
        return f"{value:+.0f} ms" if signed else f"{value:.0f} ms"
    return f"{value * 100:+.1f} pp" if signed else f"{value * 100:.1f}%"


class DeltaRow(TypedDict):
    """One compared metric as the pages show it (formatted already)."""

    name: str
    baseline: str
    candidate: str
    delta: str
    direction: Any


class ComparisonView(TypedDict):
    """The comparison block of a run's page: the verdict's label and why, the baseline, the
    reasons a comparison is invalid, and the metric deltas."""

    decision: str
    decision_note: str | None
    baseline_path: str | None
    reasons: list[str]
    deltas: list[DeltaRow]


def comparison_view(run: RunDocument) -> ComparisonView | None:
    """The baseline comparison (decision, invalid reasons, metric deltas), or None."""
    cmp = run.comparison
    if cmp is None:
        return None
    deltas: list[DeltaRow] = []
    for d in cmp.metrics:
        name = str(d.get("name"))
        deltas.append(
            {
                "name": name,
                "baseline": _fmt_delta_value(name, d.get("baseline")),
                "candidate": _fmt_delta_value(name, d.get("candidate")),
                "delta": _fmt_delta_value(name, d.get("delta"), signed=True),
                "direction": d.get("direction"),
            }
        )
    label, why = comparison_label(cmp)
    return {
        "decision": label,
        "decision_note": why,
        "baseline_path": run.baseline_path,
        "reasons": list(cmp.invalid_reasons),
        "deltas": deltas,
    }


def variant_view(run: RunDocument) -> dict[str, Any] | None:
    """``variantComparison`` for the HTML pages: the verdict's decision and line,
    and the figures as (label, value) rows; None when the run compared no variants."""
    cmp = run.variant_comparison
    if cmp is None:
        return None
    ci = cmp.ci95
    test = cmp.mcnemar
    p_value = test.p_value
    rows: list[tuple[str, Any]] = [
        ("Control", f"{cmp.control} ({_who(cmp.control_model)})"),
        ("Candidate", f"{cmp.candidate} ({_who(cmp.candidate_model)})"),
        ("Paired cases", f"{cmp.cases} (not paired: {cmp.unpaired})"),
        (
            "Pass rate control / candidate",
            f"{fmt_pct(cmp.control_pass_rate)} / {fmt_pct(cmp.candidate_pass_rate)}",
        ),
        (
            "Difference, 95% CI",
            f"{fmt_pct(cmp.difference)} "
            f"[{fmt_pct(ci.lower if ci else None)}, {fmt_pct(ci.upper if ci else None)}]",
        ),
        ("Non-inferiority margin", fmt_pct(cmp.margin)),
        (
            "Exact McNemar",
            f"{test.control_only} control only, {test.candidate_only} candidate only, p = "
            + (f"{p_value:.4g}" if p_value is not None else "n/a"),
        ),
        ("Flipped to FAIL", ", ".join(cmp.flipped_worse) or "none"),
        ("Flipped to PASS", ", ".join(cmp.flipped_better) or "none"),
    ]
    matrix, verdict = cmp.matrix, decide_variants(cmp)  # decided again from the figures
    return {
        "decision": verdict.decision.value,
        "reason": verdict.reason,
        "rows": rows,
        "matrix": None
        if matrix is None or not matrix.rows
        else {
            "head": ["Case", *matrix.variants],
            "rows": [
                (r.case_id, [(matrix_cell_text(c), c.excerpt) for c in r.cells])
                for r in matrix.rows
            ],
            "more": matrix.more,
        },
        "pairs": None
        if cmp.pairs is None or not cmp.pairs.rows
        else {
            "which": "every pair"
            if cmp.pairs.mode == "all"
            else "each variant against the control",
            "count": len(cmp.pairs.rows),
            "head": PAIR_HEAD,
            "rows": [pair_cells(pair) for pair in cmp.pairs.rows],
        },
        "passk": pass_at_k_chart(cmp.pass_at_k),
        "answers": [
            {
                "case": a.case_id,
                "flipped": "flipped to FAIL" if a.direction == "worse" else "flipped to PASS",
                "control": a.control,
                "candidate": a.candidate,
                "truncated": a.truncated,
                "diff": [(seg.op, seg.text) for seg in a.diff],
            }
            for a in cmp.answers or []
        ],
        "pareto": [
            (
                row.variant,
                _who(row.model),
                fmt_pct(row.pass_rate),
                "n/a" if row.cost is None else row.cost,
                "n/a" if row.p95_ms is None else f"{row.p95_ms} ms",
                "yes" if row.front else "no (dominated by " + ", ".join(row.dominated_by) + ")",
            )
            for row in (cmp.pareto.rows if cmp.pareto is not None else [])
        ],
    }


def _who(model: str | None) -> str:
    """A variant's model as the pages name it (a fixture-mode run asks none)."""
    return f"model {model}" if model else "recorded answers"


def gate_view(run: RunDocument) -> dict[str, Any]:
    """The gate verdict and rules (``applied`` False without a gate) and the exit status."""
    gate = run.quality_gate
    decision = run.exit_decision
    view: dict[str, Any] = {
        "applied": gate is not None,
        "exit": (
            {"code": decision.code, "reason": decision.reason} if decision is not None else None
        ),
    }
    if gate is not None:
        view["verdict"] = gate_label(run)
        view["rules"] = [
            {"name": r.name, "kind": r.kind, "detail": r.detail, "passed": r.passed}
            for r in gate.rules
        ]
        view["warnings"] = list(gate.warnings)
    return view


def comparison_classes(run: RunDocument) -> dict[str, Any]:
    """caseId → its class against the baseline (NEW_FAILURE, RECOVERED, REMOVED, …)."""
    cases = run.comparison.cases if run.comparison is not None else []
    return {str(c.get("caseId")): c.get("class") for c in cases}


def _case_rows(run: RunDocument) -> list[dict[str, Any]]:
    classes = comparison_classes(run)
    rows = []
    for case in run.cases:
        rate = case.success_rate
        rows.append(
            {
                "case_id": case.case_id,
                "present": True,
                "status": case.status,
                "hits": rate.hits if rate else 0,
                "total": rate.total if rate else 0,
                "cls": classes.pop(case.case_id, None),
            }
        )
    # In the baseline only (REMOVED).
    rows += [{"case_id": c, "present": False, "cls": cls} for c, cls in classes.items()]
    return rows


# -- the pytest-html fragments ----------------------------------------------------------------


def render_summary(run: RunDocument, anchor: str = "goldeval-summary") -> str:
    """The golden run as an HTML fragment for the top of pytest-html's summary."""
    protocol = run.protocol
    return render(
        "summary.html.j2",
        anchor=anchor,
        dataset=(protocol.dataset_id if protocol else None) or run.dataset_version,
        model=protocol.model if protocol else None,
        verdict=gate_label(run),
        counts={
            "total": run.cases_total,
            "passed": run.cases_passed,
            "failed": run.cases_failed,
            "error": run.cases_error,
            "skipped": run.cases_skipped,
        },
        protocol=protocol_rows(run),
        metrics=metric_rows(run),
        comparison=comparison_view(run),
        variants=variant_view(run),
        cases=_case_rows(run),
        gate=gate_view(run),
    )


def _violation(v: Mapping[str, Any]) -> str:
    return f"[{v.get('category')}/{v.get('severity')}] {v.get('grader')}: {v.get('reason')}"


def _messages_text(messages: Any) -> str:
    """The messages sent (a template's rendering or a conversation), one ``[role]`` block per
    turn; images named by their path."""
    if not isinstance(messages, list):
        return ""
    blocks = []
    for turn in messages:
        if not isinstance(turn, Mapping):
            continue
        content = turn.get("content")
        if isinstance(content, list):
            content = " ".join(
                str(p.get("text", "")) if p.get("type") == "text" else f"[image {p.get('path')}]"
                for p in content
                if isinstance(p, Mapping)
            )
        blocks.append(f"[{turn.get('role')}] {content or ''}")
    return "\n\n".join(blocks)


def render_attempt(payload: Mapping[str, Any]) -> str:
    """The expandable per-attempt section added to pytest-html's row (all escaped)."""
    case = payload.get("case") or {}
    attempt = payload.get("attempt") or {}
    status = attempt.get("status")
    facts: list[tuple[str, Any]] = [
        ("Kinds", ", ".join(str(k) for k in case.get("kinds") or []) or "none"),
        ("Tags", ", ".join(str(t) for t in case.get("tags") or []) or "none"),
        ("Model", attempt.get("model")),
        ("Duration", f"{attempt.get('durationMs', 0)} ms"),
    ]
    if attempt.get("tries") is not None:
        facts.append(("Provider tries", attempt.get("tries")))
    if attempt.get("queueMs") is not None:
        facts.append(("Queue wait", f"{attempt.get('queueMs')} ms"))
    if attempt.get("ttftMs") is not None:
        facts.append(("Time to first token", f"{attempt.get('ttftMs')} ms"))
    tokens = attempt.get("tokens") or {}
    if tokens.get("totalTokens") is not None:
        facts.append(
            ("Tokens", f"{tokens.get('inputTokens')} in / {tokens.get('outputTokens')} out")
        )
    output = attempt.get("output")
    retrieval = attempt.get("retrieval")
    retrieval_view: dict[str, Any] | None = None
    if retrieval and retrieval.get("applicable", True):
        retrieval_view = {
            key: list(retrieval.get(key) or [])
            for key in ("retrieved", "expected", "missing", "unexpected")
        }
        retrieval_view["passed"] = bool(retrieval.get("passed"))
        retrieval_view["forbidden"] = bool(retrieval.get("forbiddenRetrieval"))
    contract = attempt.get("contract") or {}
    violations = [_violation(v) for v in contract.get("taxonomy") or []] or list(
        contract.get("violations") or []
    )
    graders = attempt.get("graders") or []
    for grader in graders:
        violations += [_violation(v) for v in grader.get("violations") or []]
    judge = attempt.get("judge")
    error = None
    if attempt.get("errorKind") or (status == "ERROR" and attempt.get("errorMessage")):
        error = {"kind": attempt.get("errorKind"), "message": attempt.get("errorMessage")}
    return render(
        "attempt.html.j2",
        open=status not in ("PASS", "SKIPPED"),
        case_id=attempt.get("caseId") or case.get("caseId"),
        index=attempt.get("index"),
        status=status,
        facts=facts,
        prompt=_clip(
            _messages_text(attempt.get("promptMessages")) or str(case.get("prompt") or "")
        ),
        answer=_clip(str(output)) if output is not None else None,
        retrieval=retrieval_view,
        violations=violations,
        graders=[
            {
                "grader": g.get("grader"),
                "passed": bool(g.get("passed")),
                "kind": "hard" if g.get("hard", True) else "soft",
                "score": g.get("score"),
                "threshold": g.get("threshold"),
            }
            for g in graders
        ],
        judge=(
            {
                "decision": judge.get("decision"),
                "score": judge.get("score"),
                "error": judge.get("error"),
                "reasons": list(judge.get("reasons") or []),
            }
            if judge
            else None
        ),
        error=error,
        skip_reason=attempt.get("skipReason"),
    )
