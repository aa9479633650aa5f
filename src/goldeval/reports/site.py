"""A static history site of golden runs: ``goldeval site --out DIR [--runs .goldeval/runs]``.

Reads every ``<runs>/*/run.json`` and writes plain HTML that works from ``file://``:

* ``index.html``: the run list (newest first), then per dataset inline SVG trend charts of
  overallPassRate, contractPassRate, retrievalPassRate and hallucinationRate (with their
  Wilson 95% band), and the per-case history (case × run) with flaky cases flagged;
* ``runs/<runId>.html``: one detail page per run (protocol, metrics, comparison, cases, gate).

The pages are Jinja2 templates (``templates/index.html.j2``, ``run.html.j2``, ``trend.svg.j2``
in the frame ``site_page.html.j2``) fed with plain views built here; the run page shares its
tables with the pytest-html summary (``_parts.html.j2``). No JavaScript and no external
assets; a Content-Security-Policy forbids scripts outright, and every value read from a run
is escaped by the templates' autoescape (:mod:`goldeval.reports.templating`). Links are
relative.

A case is *flaky* when its verdict (PASS/FAIL; ERROR and SKIPPED are not verdicts) flips
back and forth across runs (two flips or more), or when its attempts disagree within one run;
a single flip is shown as *changed* (a regression or a recovery, not noise).
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from goldeval.core.errors import BaselineError, GoldevalError
from goldeval.core.limits import loads_json
from goldeval.core.safe_files import read_regular_file
from goldeval.core.textsafe import one_line
from goldeval.reports.html import (
    ComparisonView,
    comparison_classes,
    comparison_view,
    fmt_pct,
    gate_view,
    metric_rows,
    protocol_rows,
    rate_of,
    variant_view,
)
from goldeval.reports.junit import error_reasons, failure_reasons
from goldeval.reports.site_charts import (
    not_comparable,
    protocol_legend,
    run_model,
    trend_view,
)
from goldeval.reports.templating import render
from goldeval.results.documents import Case, RunDocument
from goldeval.results.run_folder import atomic_write
from goldeval.verdict.baseline import check_shape
from goldeval.verdict.exit_codes import OK, USAGE
from goldeval.verdict.gate_label import NOT_COMPARABLE, gate_label

TREND_METRICS = ("overallPassRate", "contractPassRate", "retrievalPassRate", "hallucinationRate")
VERDICTS = ("PASS", "FAIL")
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
#: How many failure reasons a case row of a run page lists before "+N more".
SHOWN_REASONS = 5
#: How much of a case's prompt a run page shows.
SHOWN_PROMPT = 300


# -- loading --------------------------------------------------------------------------------


def load_runs(runs_root: Path, warnings: list[str] | None = None) -> list[RunDocument]:
    """Every readable ``<runs_root>/*/run.json``, typed; unreadable or malformed ones are skipped.

    A message per skipped file is appended to ``warnings`` when a list is given. One damaged
    run (``cases: 5``, ``protocol: "x"``) must not take the whole history site down with it.
    """
    runs: list[RunDocument] = []
    root = Path(runs_root)
    if not root.is_dir():
        if warnings is not None:
            warnings.append(f"{root}: not a folder")
        return runs
    for path in sorted(root.glob("*/run.json")):
        try:
            doc = loads_json(read_regular_file(path).decode("utf-8"), what="run.json")
        except (OSError, UnicodeDecodeError, ValueError, GoldevalError) as exc:
            if warnings is not None:
                warnings.append(f"{path}: skipped, unreadable ({exc})")
            continue
        if not isinstance(doc, dict):
            if warnings is not None:
                warnings.append(f"{path}: skipped, not a run document")
            continue
        try:
            run = check_shape(doc, path)
        except BaselineError as exc:
            if warnings is not None:
                warnings.append(f"skipped, malformed run document: {exc}")
            continue
        if "run_id" not in run.model_fields_set:
            run.run_id = path.parent.name
        problem = _render_problem(run)
        if problem is not None:
            if warnings is not None:
                warnings.append(f"{path}: skipped, cannot be rendered ({problem})")
            continue
        runs.append(run)
    return runs


def _render_problem(run: RunDocument) -> str | None:
    """Why the run's pages cannot be rendered (a shape the checks above let through), else None.

    Rendering one run alone is cheap next to the site itself, and it keeps a surprise in one
    file from aborting every other run's page.
    """
    try:
        render_run(run)
        render_index([run], _page_names([run]))
    except (TypeError, AttributeError, ValueError, KeyError, IndexError) as exc:
        return f"{type(exc).__name__}: {str(exc)[:120]}"
    return None


# -- small helpers --------------------------------------------------------------------------


def _sort_key(run: RunDocument) -> tuple[str, str]:
    return run.timestamp or "", run.run_id or ""


def _dataset(run: RunDocument) -> str:
    return (run.protocol.dataset_id if run.protocol else None) or run.dataset_version or "unknown"


def _mode(run: RunDocument) -> str:
    return (
        (run.configuration.golden_mode if run.configuration else None)
        or (run.protocol.mode if run.protocol else None)
        or "n/a"
    )


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "run"


def _page_names(runs: Sequence[RunDocument]) -> dict[int, str]:
    """A unique, file-system-safe page name per run (keyed by ``id(run)``)."""
    names: dict[int, str] = {}
    used: set[str] = set()
    for run in runs:
        base = _slug(str(run.run_id))
        name, n = base, 1
        while name.lower() in used:
            n += 1
            name = f"{base}-{n}"
        used.add(name.lower())
        names[id(run)] = name
    return names


def _run_href(name: str) -> str:
    """The index's relative link to a run page (escaped by the template)."""
    return "/".join(quote(p) for p in ("runs", name)) + ".html"


# -- per-case history -----------------------------------------------------------------------


def case_history(runs: Sequence[RunDocument]) -> dict[str, list[Case | None]]:
    """caseId → its case record in each run (oldest first; ``None`` where absent)."""
    order: list[str] = []
    by_case: dict[str, list[Case | None]] = {}
    for i, run in enumerate(runs):
        for case in run.cases:
            case_id = case.case_id
            if case_id not in by_case:
                order.append(case_id)
                by_case[case_id] = [None] * len(runs)
            by_case[case_id][i] = case
    return {c: by_case[c] for c in sorted(order)}


def flips(cells: Sequence[Case | None]) -> int:
    """How often the PASS/FAIL verdict changed between consecutive runs that had one."""
    verdicts = [c.status for c in cells if c is not None and c.status in VERDICTS]
    return sum(1 for a, b in itertools.pairwise(verdicts) if a != b)


def unstable_within_run(cells: Sequence[Case | None]) -> bool:
    for c in cells:
        rate = c.success_rate if c is not None else None
        if rate is not None and 0 < rate.hits < rate.total:
            return True
    return False


def is_flaky(cells: Sequence[Case | None]) -> bool:
    return flips(cells) >= 2 or unstable_within_run(cells)


def history_view(runs: Sequence[RunDocument], names: Mapping[int, str]) -> dict[str, Any]:
    """The case × run table: a column per run (oldest first), a row per case with its flags."""
    columns = [{"run_id": run.run_id, "href": _run_href(names[id(run)])} for run in runs]
    rows = []
    for case_id, cells in case_history(runs).items():
        shown: list[dict[str, Any] | None] = []
        for c in cells:
            if c is None:
                shown.append(None)
                continue
            rate = c.success_rate
            tip = f"{rate.hits if rate else 0} / {rate.total if rate else 0} attempts passed"
            shown.append({"tip": tip, "status": c.status})
        rows.append(
            {"case_id": case_id, "flips": flips(cells), "flaky": is_flaky(cells), "cells": shown}
        )
    return {"columns": columns, "rows": rows}


# -- pages ----------------------------------------------------------------------------------


def _run_row(run: RunDocument, names: Mapping[int, str]) -> dict[str, Any]:
    metric = run.metrics.overall_pass_rate if run.metrics else None
    gate = gate_label(run)
    return {
        "href": _run_href(names[id(run)]),
        "run_id": run.run_id,
        "timestamp": run.timestamp,
        "dataset": _dataset(run),
        "mode": _mode(run),
        "model": run_model(run),
        "status": run.status,
        "overall": fmt_pct(rate_of(metric)),
        "hits": metric.hits if metric else 0,
        "total": metric.total if metric else 0,
        "gate": gate,
    }


def render_index(runs: Sequence[RunDocument], names: Mapping[int, str]) -> str:
    """The index page; ``names``: each run's page name, keyed by ``id(run)``."""
    newest = sorted(runs, key=_sort_key, reverse=True)
    datasets = []
    for ds in sorted({_dataset(r) for r in runs}):
        chrono = sorted((r for r in runs if _dataset(r) == ds), key=_sort_key)
        datasets.append(
            {
                "name": ds,
                "slug": _slug(ds),
                "protocols": protocol_legend(chrono),
                "charts": [trend_view(m, chrono) for m in TREND_METRICS],
                "history": history_view(chrono, names),
            }
        )
    return render(
        "index.html.j2",
        csp=CSP,
        title="Golden evaluation history",
        not_comparable=NOT_COMPARABLE,
        runs=[_run_row(r, names) for r in newest],
        datasets=datasets,
    )


def _case_row(case: Case, cls: Any) -> dict[str, Any]:
    rate = case.success_rate
    status = case.status
    reasons: list[str] = []
    if status == "FAIL":
        reasons = failure_reasons(case)
    elif status == "ERROR":
        reasons = error_reasons(case)
    prompt = str(case.metadata.get("prompt") or "")
    return {
        "case_id": case.case_id,
        "status": status,
        "hits": rate.hits if rate else 0,
        "total": rate.total if rate else 0,
        "cls": cls,
        "kinds": ", ".join(case.kinds),
        "reasons": reasons[:SHOWN_REASONS],
        "more_reasons": max(0, len(reasons) - SHOWN_REASONS),
        "prompt": prompt[:SHOWN_PROMPT] + ("…" if len(prompt) > SHOWN_PROMPT else ""),
    }


def render_run(
    run: RunDocument,
    *,
    attempts: Mapping[str, Any] | None = None,
    comparison: ComparisonView | None = None,
) -> str:
    """A run's page (the service types a stored document before it renders it). The
    service's bounded page passes one page of the run's ``attempts`` (shown instead of the
    cases) and may pass its own ``comparison`` view (:func:`comparison_view`'s shape)."""
    classes = comparison_classes(run)
    return render(
        "run.html.j2",
        csp=CSP,
        title=f"Run {run.run_id}",
        run_id=run.run_id,
        status=run.status,
        dataset=_dataset(run),
        timestamp=run.timestamp,
        protocol=protocol_rows(run),
        metrics=metric_rows(run),
        comparison=comparison if comparison is not None else comparison_view(run),
        variants=variant_view(run),
        not_comparable=(
            {
                "label": NOT_COMPARABLE,
                "reason": run.exit_decision.reason if run.exit_decision else None,
            }
            if not_comparable(run)
            else None
        ),
        gate=gate_view(run),
        cases=[_case_row(case, classes.get(case.case_id)) for case in run.cases],
        attempts=attempts,
    )


def build_site(out_dir: Path, runs: Sequence[RunDocument]) -> Path:
    """Write the static site for ``runs`` into ``out_dir``; returns the index page's path."""
    out = Path(out_dir)
    names = _page_names(sorted(runs, key=_sort_key))
    for run in runs:
        atomic_write(out / "runs" / f"{names[id(run)]}.html", render_run(run))
    index = out / "index.html"
    atomic_write(index, render_index(runs, names))
    return index


# -- command line ---------------------------------------------------------------------------


def main_site(argv: Sequence[str] | None = None) -> int:
    """``goldeval site --out DIR [--runs .goldeval/runs]``: 0 on success, 4 (usage) without
    runs."""
    parser = argparse.ArgumentParser(
        prog="goldeval site", description="Build a static HTML history of golden runs."
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="folder to write the site to")
    parser.add_argument(
        "--runs",
        default=".goldeval/runs",
        metavar="DIR",
        help="runs folder holding <runId>/run.json (default .goldeval/runs)",
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    warnings: list[str] = []
    runs = load_runs(Path(args.runs), warnings)
    for warning in warnings:
        print(f"goldeval site: warning: {one_line(warning)}", file=sys.stderr)
    if not runs:
        print(f"goldeval site: no readable run.json under {args.runs}", file=sys.stderr)
        return USAGE  # nothing to render: a wrong --runs or no run yet, not a failed gate
    index = build_site(Path(args.out), runs)
    print(f"goldeval site: {len(runs)} run{'s' if len(runs) != 1 else ''} → {index}")
    return OK
