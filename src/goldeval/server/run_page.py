"""The service's run page (``/ui/runs/<id>.html``), bounded at any run size (issue 33).

The page used to rebuild the whole run document, every attempt (535 KB and 385 ms at 3,000
attempts, 3.6 MB and 3.7 s at 20,000). It now reads, whatever the run's size:

* the run's stored summary (run.json without its cases, written when the run finished): its
  protocol, metrics, comparison with its own baseline, gate and exit decision; a run still
  running shows its protocol and its attempt counts only;
* the run's attempt counts by status (``run_counts``, kept as attempts are written);
* one keyset page of :data:`PAGE_ATTEMPTS` attempts (``Store.attempts_page``, cursor = the
  last shown (case, attempt, model)), optionally of one status, with links to the next page
  and to each status;
* with ``?compare=<baseline>``: the baseline's status of this page's attempts (the primary
  key's ranges of the page's cases). The whole comparison (gate, exit decision) is decided
  only while both runs hold at most :data:`WHOLE_COMPARE_ATTEMPTS` attempts; beyond, the page
  compares the two stored summaries' metrics and names the compare endpoint for the verdict.

Every text shown goes through the template's autoescape and the caller's ``public_text``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from goldeval.core.limits import LIMITS_BY_NAME
from goldeval.reports.html import ComparisonView, DeltaRow, fmt_pct, rate_of
from goldeval.reports.junit import error_reasons, failure_reasons
from goldeval.results.documents import (
    Attempt,
    Case,
    ExitDecisionDoc,
    Metrics,
    RunDocument,
    typed_run,
)
from goldeval.results.run_document import RUN_DOCUMENT
from goldeval.server.problems import Problem, validation_problem
from goldeval.server.run_views import check_run_id
from goldeval.store.base import Store
from goldeval.store.cursors import cursor_index, cursor_scope, decode_cursor, encode_cursor
from goldeval.store.migrations import ATTEMPT_STATUSES
from goldeval.store.queue import RunQueue, ServiceRun
from goldeval.store.rows import AttemptJson, AttemptKey, RunRow
from goldeval.store.views import VERDICT_KEYS, withheld_note

#: Attempts a run page shows (about 150 KB of HTML at most: reasons are cut short).
PAGE_ATTEMPTS = 200
#: Up to this many attempts in each run, ``?compare=`` decides the whole comparison (as the
#: compare endpoint); beyond, the page compares what is stored per run (issue 33).
WHOLE_COMPARE_ATTEMPTS = int(LIMITS_BY_NAME["ui_compare_whole_attempts"].default)
SHOWN_REASONS = 2
REASON_CHARS = 160
#: The summary's rates compared side by side when the comparison is not decided whole.
COMPARED_RATES = ("overallPassRate", "contractPassRate", "retrievalPassRate", "hallucinationRate")


def attempts_scope(run_id: str, status: str | None) -> str:
    """What a cursor of a run's attempts is bound to: the run and the status filter (the
    results endpoint's and the run page's, :mod:`goldeval.store.cursors`)."""
    return cursor_scope("attempts", run_id, status)


def attempt_cursor(row: AttemptJson, scope: str) -> str:
    """The cursor after ``row`` (its key: the model column is the variant's name in a variant
    session), bound to ``scope`` (:func:`attempts_scope`)."""
    return encode_cursor(row.case_id, str(row.attempt_index), row.model, scope=scope)


def parse_after(cursor: str | None, scope: str) -> AttemptKey | None:
    """The cursor of a next page of attempts; ValueError when it is not one, or is one of
    another run or status filter than ``scope`` (:func:`attempts_scope`)."""
    if cursor is None:
        return None
    case_id, index, model = decode_cursor(cursor, 3, scope=scope)
    return case_id, cursor_index(index), model


def checked_query(after: str | None, status: str | None, run_id: str) -> AttemptKey | None:
    """The page's ``after`` cursor, both query values checked (422 naming the field)."""
    errors = []
    if status is not None and status not in ATTEMPT_STATUSES:
        errors.append({"field": "status", "message": f"one of {', '.join(ATTEMPT_STATUSES)}"})
    key = None
    try:
        key = parse_after(after, attempts_scope(run_id, status))
    except ValueError as exc:
        errors.append({"field": "after", "message": str(exc)})
    if errors:
        raise validation_problem(errors)
    return key


def unbegun(job: ServiceRun, decision: ExitDecisionDoc) -> RunDocument:
    """The run page's document of a run the plugin never began: nothing graded, the exit
    decision of its pytest process."""
    return typed_run(
        {
            "runId": job.id,
            "status": job.status,
            "datasetVersion": job.dataset_id,
            "cases": [],
            "exitDecision": decision.dump(),
        }
    )


def baseline_row(q: RunQueue, baseline_ref: str, missing: Callable[[str], object]) -> RunRow:
    """The store run of the run page's ``?compare=`` baseline (a service run id or a store
    run id); ``missing`` raises the problem of a baseline the store has no run of (409
    nothing graded yet), else 404."""
    check_run_id(baseline_ref)
    other = q.get(baseline_ref)
    row = q.store.get_run(other.run_key if other is not None else baseline_ref)
    if row is None:
        missing(baseline_ref)
        raise Problem(404, "run-not-found", "Run not found", f"no run {baseline_ref!r}")
    return row


def compared_whole(counts: Mapping[str, int], baseline_counts: Mapping[str, int]) -> bool:
    """Whether the page shows the whole comparison (the compare endpoint's verdict, which
    reads both runs whole): only while both runs are small."""
    most = max(sum(counts.values()), sum(baseline_counts.values()))
    return most <= WHOLE_COMPARE_ATTEMPTS


def stored_document(row: RunRow, counts: Mapping[str, int]) -> dict[str, Any]:
    """The run's document without its cases: the summary it stored when it finished, or what
    the store knows of a run that has not (identity, protocol, configuration). When the store
    holds other attempts than the summary counted (a resume under way), the summary's
    verdicts are about other attempts: left out, with a note (as the store's run views do)."""
    summary = row.summary if isinstance(row.summary, dict) else {}
    recorded = summary.get(RUN_DOCUMENT)
    base: dict[str, Any] = {
        "runId": row.run_id,
        "status": row.status,
        "datasetVersion": row.dataset_id,
        "datasetHash": row.dataset_hash,
        "model": row.model,
        "protocol": row.protocol,
        "configuration": row.configuration,
        "timestamp": row.started_at.isoformat(),
    }
    if not isinstance(recorded, dict):
        return base
    doc = {**base, **recorded, "cases": []}
    total = sum(counts.values())
    if recorded.get("attemptsTotal") != total or row.status == "RUNNING":
        doc["status"] = row.status
        for key in (*VERDICT_KEYS, "metrics"):
            doc.pop(key, None)
        note = withheld_note(
            total, recorded.get("attemptsTotal"), "metrics, gate and exit decision"
        )
        doc["notes"] = [*(doc.get("notes") or []), note]
    return doc


def summary_comparison(
    candidate: RunDocument, baseline: RunDocument, baseline_ref: str, run_ref: str
) -> ComparisonView:
    """A comparison view of the two runs' stored rates, for runs too large to compare whole
    on a page."""
    deltas: list[DeltaRow] = []
    for name in COMPARED_RATES:
        before, now = _rate(baseline, name), _rate(candidate, name)
        if before is None and now is None:
            continue
        delta = now - before if now is not None and before is not None else None
        deltas.append(
            {
                "name": name,
                "baseline": fmt_pct(before),
                "candidate": fmt_pct(now),
                "delta": f"{delta * 100:+.1f} pp" if delta is not None else "n/a",
                "direction": None,
            }
        )
    return {
        "decision": "NOT_DECIDED_HERE",
        "decision_note": (
            f"Runs over {WHOLE_COMPARE_ATTEMPTS} attempts are compared on this page by their "
            "stored metrics and, per page, attempt by attempt; the verdict (per-case classes, "
            f"gate, exit decision) is GET /api/eval/runs/{run_ref}/compare/{baseline_ref} "
            "(goldeval compare's)."
        ),
        "baseline_path": f"run {baseline_ref}",
        "reasons": [],
        "deltas": deltas,
    }


#: The metrics' attribute names by their JSON names (``overallPassRate``).
_METRIC_FIELDS = {(f.alias or name): name for name, f in Metrics.model_fields.items()}


def _rate(document: RunDocument, name: str) -> float | None:
    metrics = document.metrics
    if metrics is None:
        return None
    return rate_of(getattr(metrics, _METRIC_FIELDS[name], None))


def attempts_view(
    store: Store,
    store_run_id: str,
    *,
    run_id: str,
    after: AttemptKey | None,
    status: str | None,
    counts: Mapping[str, int],
    classes: Mapping[str, Any],
    compare: tuple[str, str] | None = None,
    public: Callable[[str], str] = str,
) -> dict[str, Any]:
    """One page of the run's attempts as the template's ``attempts_page`` view (the page of
    service run ``run_id``, its links bound to it and to ``status``).
    ``compare``: (the baseline as asked for, its store run id); ``public``: the texts shown
    without the server's paths (the service's ``public_text``)."""
    page_name = f"{run_id}.html"
    rows = store.attempts_page_json(
        store_run_id, limit=PAGE_ATTEMPTS + 1, status=status, after=after
    )
    shown = rows[:PAGE_ATTEMPTS]
    baseline: dict[AttemptKey, str] = {}
    if compare is not None and shown:
        baseline = store.statuses_of(compare[1], [r.case_id for r in shown])
    query = {"compare": compare[0]} if compare is not None else {}
    if status is not None:
        query["status"] = status
    next_href = None
    if len(rows) > PAGE_ATTEMPTS:
        last = shown[-1]
        cursor = attempt_cursor(last, attempts_scope(run_id, status))
        next_href = _href(page_name, {**query, "after": cursor})
    total = counts.get(status, 0) if status is not None else sum(counts.values())
    headers = ["Case", "Attempt", "Model / variant", "Status"]
    if compare is not None:
        headers.append("Baseline status")
    headers += ["Case vs baseline", "Duration", "Reasons"]
    return {
        "note": (
            f"{total} attempt(s){f' with status {status}' if status else ''}, "
            f"{PAGE_ATTEMPTS} a page in (case, attempt, model) order. The whole run: "
            "GET /api/eval/runs/<id>/results (paged JSON, the same order) or the run's "
            "artifacts (RUN_JSON)."
        ),
        "filters": _filters(page_name, compare, status, counts),
        "headers": headers,
        "compare": compare is not None,
        "rows": [_row(r, classes, baseline, public) for r in shown],
        "next_href": next_href,
        "first_href": _href(page_name, query) if after is not None else None,
    }


def _href(page_name: str, query: Mapping[str, str]) -> str:
    return f"{page_name}?{urlencode(dict(query))}" if query else page_name


def _filters(
    page_name: str, compare: tuple[str, str] | None, status: str | None, counts: Mapping[str, int]
) -> list[dict[str, Any]]:
    base = {"compare": compare[0]} if compare is not None else {}
    out = [
        {
            "label": "All",
            "count": sum(counts.values()),
            "href": _href(page_name, base),
            "current": status is None,
        }
    ]
    out += [
        {
            "label": s,
            "count": counts.get(s, 0),
            "href": _href(page_name, {**base, "status": s}),
            "current": status == s,
        }
        for s in ATTEMPT_STATUSES
    ]
    return out


def _row(
    row: AttemptJson,
    classes: Mapping[str, Any],
    baseline: Mapping[AttemptKey, str],
    public: Callable[[str], str],
) -> dict[str, Any]:
    key = (row.case_id, row.attempt_index, row.model)
    record = json.loads(row.record)
    status = row.status
    reasons = _reasons(record, status)
    duration = record.get("durationMs")
    variant, model = row.variant, row.record_model
    return {
        "case_id": key[0],
        "attempt": key[1],
        "model": f"{variant} ({model})" if variant is not None and model else (variant or model),
        "status": status,
        "baseline": baseline.get(key),
        "cls": classes.get(key[0]),
        "duration": f"{duration:.0f} ms" if isinstance(duration, (int, float)) else None,
        "reasons": [_cut(public(r)) for r in reasons[:SHOWN_REASONS]],
        "more_reasons": max(0, len(reasons) - SHOWN_REASONS),
    }


def _reasons(record: Mapping[str, Any], status: str) -> Sequence[str]:
    """Why one attempt did not pass, as the reports say it (JUnit's failure/error lines)."""
    if status not in ("FAIL", "ERROR", "SKIPPED"):
        return []
    try:
        attempt = Attempt.model_validate({**record, "output": None})
        if status == "SKIPPED":
            return [str(attempt.skip_reason or attempt.error_message or "skipped")]
        case = Case.model_validate({"caseId": str(record.get("caseId")), "status": status})
        case.attempts = [attempt]
        return failure_reasons(case) if status == "FAIL" else error_reasons(case)
    except (ValueError, TypeError, AttributeError):
        # A record of another shape (hand-written, damaged): the page still shows the row.
        return [f"{status} (its reasons cannot be read from the stored record)"]


def _cut(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= REASON_CHARS else line[: REASON_CHARS - 1] + "…"
