"""The HTML fragments pytest-html shows (``--html=report.html --self-contained-html``).

* :func:`render_summary`: the golden run at the top of the summary: dataset and protocol,
  the metrics with their Wilson intervals, the deltas against the baseline, the per-case
  classes and the gate decision with its rules (``templates/summary.html.j2``);
* :func:`render_attempt`: the expandable section per attempt: prompt, answer, what was
  retrieved, violations, the judge's reasons (``templates/attempt.html.j2``).

Pure functions over the run document; the pytest hooks that call them live in
:mod:`goldeval.pytest_plugin.html`. The views built here (:func:`protocol_rows`,
:func:`metric_rows`, :func:`comparison_view`, :func:`gate_view`) are shared with the history
site (:mod:`goldeval.reports.site`). Every value reaches the page through the templates'
autoescape (:mod:`goldeval.reports.templating`): answers and prompts are untrusted text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from goldeval.core.rates import GRADER_PREFIX
from goldeval.reports.labels import rate_label, shown_rates
from goldeval.reports.templating import esc, render, status_class
from goldeval.verdict.comparison import comparison_label

__all__ = [
    "MAX_TEXT",
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


def fmt_ci(metric: Mapping[str, Any] | None) -> str:
    ci = (metric or {}).get("ci95")
    if not ci or ci.get("lower") is None or ci.get("upper") is None:
        return "n/a"
    return f"{ci['lower'] * 100:.1f}% – {ci['upper'] * 100:.1f}%"


def rate_of(metric: Mapping[str, Any] | None) -> float | None:
    if not metric:
        return None
    rate = metric.get("rate")
    if isinstance(rate, (int, float)):
        return float(rate)
    total = metric.get("total") or 0
    return (metric.get("hits") or 0) / total if total else None


# -- views shared with the site ---------------------------------------------------------------


def protocol_rows(run: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(label, value) rows of the dataset and protocol table."""
    p = run.get("protocol") or {}
    cfg = run.get("configuration") or {}
    return [
        ("Run", run.get("runId")),
        ("Status", run.get("status")),
        ("Dataset", p.get("datasetId") or run.get("datasetVersion")),
        ("Dataset hash", p.get("datasetHash") or run.get("datasetHash")),
        ("Pack", p.get("packId") or run.get("packDatasetVersion")),
        ("Pack hash", p.get("packHash") or run.get("packHash")),
        ("Mode", f"{p.get('mode')} ({cfg.get('goldenMode', 'n/a')})"),
        ("Provider / model", f"{cfg.get('provider', 'n/a')} / {p.get('model') or 'n/a'}"),
        ("Attempts per case", p.get("attempts")),
        ("Selected cases", len(p.get("selectedCaseIds") or [])),
        ("Grader config hash", p.get("graderConfigHash")),
        *_retry_rows(run),
    ]


def _retry_rows(run: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Provider retries of the run in total (live runs; absent when every call took one try)."""
    retries = (run.get("metrics") or {}).get("retries") or {}
    if not retries.get("attempts"):
        return []
    return [
        (
            "Retries",
            f"{retries['attempts']} attempt(s) needed more than one provider try "
            f"({retries.get('extraTries', 0)} extra tries)",
        )
    ]


def metric_rows(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The metrics table: the rates (core.rates order), the unstable-case rate, then one row
    per grader; a metric the run does not have is left out."""
    metrics = run.get("metrics") or {}
    graders = metrics.get("graders") or {}
    named: list[tuple[str, str, Any]] = [
        (name, rate_label(name), metrics.get(name)) for name in (*shown_rates(run), UNSTABLE)
    ]
    named += [(f"{GRADER_PREFIX}{g}", f"Grader {g}", graders.get(g)) for g in sorted(graders)]
    return [
        {
            "name": name,
            "label": label,
            "rate": fmt_pct(rate_of(metric)),
            "hits": metric.get("hits", 0),
            "total": metric.get("total", 0),
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


def comparison_view(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """The baseline comparison (decision, invalid reasons, metric deltas), or None."""
    cmp = run.get("comparison")
    if not cmp:
        return None
    deltas = []
    for d in cmp.get("metrics") or []:
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
        "baseline_path": run.get("baselinePath"),
        "reasons": list(cmp.get("invalidReasons") or []),
        "deltas": deltas,
    }


def variant_view(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """``variantComparison`` for the HTML pages: the verdict's recorded decision and line,
    and the figures as (label, value) rows; None when the run compared no variants."""
    cmp = run.get("variantComparison")
    if not cmp:
        return None
    ci = cmp.get("ci95") or {}
    test = cmp.get("mcnemar") or {}
    p_value = test.get("pValue")
    rows: list[tuple[str, Any]] = [
        ("Control", f"{cmp.get('control')} (model {cmp.get('controlModel')})"),
        ("Candidate", f"{cmp.get('candidate')} (model {cmp.get('candidateModel')})"),
        ("Paired cases", f"{cmp.get('cases')} (not paired: {cmp.get('unpaired', 0)})"),
        (
            "Pass rate control / candidate",
            f"{fmt_pct(cmp.get('controlPassRate'))} / {fmt_pct(cmp.get('candidatePassRate'))}",
        ),
        (
            "Difference, 95% CI",
            f"{fmt_pct(cmp.get('difference'))} "
            f"[{fmt_pct(ci.get('lower'))}, {fmt_pct(ci.get('upper'))}]",
        ),
        ("Non-inferiority margin", fmt_pct(cmp.get("margin"))),
        (
            "Exact McNemar",
            f"{test.get('controlOnly')} control only, "
            f"{test.get('candidateOnly')} candidate only, p = "
            + (f"{p_value:.4g}" if isinstance(p_value, (int, float)) else "n/a"),
        ),
        ("Flipped to FAIL", ", ".join(str(i) for i in cmp.get("flippedWorse") or []) or "none"),
        ("Flipped to PASS", ", ".join(str(i) for i in cmp.get("flippedBetter") or []) or "none"),
    ]
    return {"decision": cmp.get("decision"), "reason": cmp.get("reason"), "rows": rows}


def gate_view(run: Mapping[str, Any]) -> dict[str, Any]:
    """The gate verdict and rules (``applied`` False without a gate) and the exit status."""
    gate = run.get("qualityGate")
    decision = run.get("exitDecision") or {}
    view: dict[str, Any] = {
        "applied": bool(gate),
        "exit": (
            {"code": decision.get("code"), "reason": decision.get("reason")} if decision else None
        ),
    }
    if gate:
        view["verdict"] = gate.get("verdict")
        view["rules"] = [
            {
                "name": r.get("name"),
                "kind": r.get("kind"),
                "detail": r.get("detail"),
                "passed": bool(r.get("passed")),
            }
            for r in gate.get("rules") or []
        ]
        view["warnings"] = list(gate.get("warnings") or [])
    return view


def comparison_classes(run: Mapping[str, Any]) -> dict[str, Any]:
    """caseId → its class against the baseline (NEW_FAILURE, RECOVERED, REMOVED, …)."""
    return {
        str(c.get("caseId")): c.get("class")
        for c in (run.get("comparison") or {}).get("cases") or []
    }


def _case_rows(run: Mapping[str, Any]) -> list[dict[str, Any]]:
    classes = comparison_classes(run)
    rows = []
    for case in run.get("cases") or []:
        rate = case.get("successRate") or {}
        case_id = str(case.get("caseId"))
        rows.append(
            {
                "case_id": case_id,
                "present": True,
                "status": case.get("status"),
                "hits": rate.get("hits", 0),
                "total": rate.get("total", 0),
                "cls": classes.pop(case_id, None),
            }
        )
    # In the baseline only (REMOVED).
    rows += [{"case_id": c, "present": False, "cls": cls} for c, cls in classes.items()]
    return rows


# -- the pytest-html fragments ----------------------------------------------------------------


def render_summary(run: Mapping[str, Any], anchor: str = "goldeval-summary") -> str:
    """The golden run as an HTML fragment for the top of pytest-html's summary."""
    protocol = run.get("protocol") or {}
    gate = run.get("qualityGate") or {}
    return render(
        "summary.html.j2",
        anchor=anchor,
        dataset=protocol.get("datasetId") or run.get("datasetVersion"),
        model=protocol.get("model"),
        verdict=gate.get("verdict") or "not applied",
        counts={
            "total": run.get("casesTotal"),
            "passed": run.get("casesPassed"),
            "failed": run.get("casesFailed"),
            "error": run.get("casesError"),
            "skipped": run.get("casesSkipped"),
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
