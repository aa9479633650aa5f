"""A static history site of golden runs: ``goldeval site --out DIR [--runs .goldeval/runs]``.

Reads every ``<runs>/*/run.json`` and writes plain HTML that works from ``file://``:

* ``index.html``: the run list (newest first), then per dataset inline SVG trend charts of
  overallPassRate, contractPassRate, retrievalPassRate and hallucinationRate (with their
  Wilson 95% band), and the per-case history (case × run) with flaky cases flagged;
* ``runs/<runId>.html``: one detail page per run (protocol, metrics, comparison, cases, gate).

No JavaScript and no external assets; a Content-Security-Policy forbids scripts outright, and
every value read from a run goes through :func:`html.escape`. Links are relative.

A case is *flaky* when its verdict (PASS/FAIL; ERROR and SKIPPED are not verdicts) flips
back and forth across runs (two flips or more), or when its attempts disagree within one run;
a single flip is shown as *changed* (a regression or a recovery, not noise).
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from goldeval.core.textsafe import one_line
from goldeval.reports.html import (
    STYLE,
    badge,
    comparison_html,
    esc,
    fmt_ci,
    fmt_pct,
    gate_html,
    metrics_table,
    protocol_table,
    rate_of,
    table,
)

TREND_METRICS = ("overallPassRate", "contractPassRate", "retrievalPassRate", "hallucinationRate")
TREND_LABELS = {
    "overallPassRate": "Overall pass rate",
    "contractPassRate": "Contract pass rate",
    "retrievalPassRate": "Retrieval pass rate",
    "hallucinationRate": "Hallucination rate (lower is better)",
}
VERDICTS = ("PASS", "FAIL")
#: How the site shows a run that exited 65 (its comparison was invalid), instead of a verdict.
NOT_COMPARABLE = "not comparable"
#: Colours of the second and later protocol lines in a chart (the first keeps the metric's).
SERIES_COLOURS = ("#8250df", "#1a7f37", "#bc4c00", "#57606a", "#bf3989", "#0550ae")
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
SITE_STYLE = """
body{font-family:Helvetica,Arial,sans-serif;font-size:14px;margin:1.5em;color:#24292f}
a{color:#0969da}
table{border-collapse:collapse;margin:.3em 0 1em 0}
th,td{border:1px solid #ccc;padding:2px 8px;text-align:left;vertical-align:top}
th{background:#f2f2f2}
.charts{display:flex;flex-wrap:wrap;gap:12px}
.history td.cell{text-align:center;font-size:12px}
.flaky{background:#fff8c5;color:#9a6700;font-weight:bold;padding:0 4px}
.changed{background:#ddf4ff;color:#0969da;padding:0 4px}
small{color:#57606a}
"""


# -- loading --------------------------------------------------------------------------------


def load_runs(runs_root: Path, warnings: list[str] | None = None) -> list[dict[str, Any]]:
    """Every readable ``<runs_root>/*/run.json``; unreadable or malformed ones are skipped.

    A message per skipped file is appended to ``warnings`` when a list is given. One damaged
    run (``cases: 5``, ``protocol: "x"``) must not take the whole history site down with it.
    """
    from goldeval.core.errors import BaselineError
    from goldeval.verdict.baseline import check_shape

    runs: list[dict[str, Any]] = []
    root = Path(runs_root)
    if not root.is_dir():
        if warnings is not None:
            warnings.append(f"{root}: not a folder")
        return runs
    for path in sorted(root.glob("*/run.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            if warnings is not None:
                warnings.append(f"{path}: skipped, unreadable ({exc})")
            continue
        if not isinstance(doc, dict):
            if warnings is not None:
                warnings.append(f"{path}: skipped, not a run document")
            continue
        try:
            check_shape(doc, path)
        except BaselineError as exc:
            if warnings is not None:
                warnings.append(f"skipped, malformed run document: {exc}")
            continue
        doc.setdefault("runId", path.parent.name)
        problem = _render_problem(doc)
        if problem is not None:
            if warnings is not None:
                warnings.append(f"{path}: skipped, cannot be rendered ({problem})")
            continue
        runs.append(doc)
    return runs


def _render_problem(run: dict[str, Any]) -> str | None:
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


def _sort_key(run: Mapping[str, Any]) -> tuple[str, str]:
    return str(run.get("timestamp") or ""), str(run.get("runId") or "")


def _dataset(run: Mapping[str, Any]) -> str:
    return str(
        (run.get("protocol") or {}).get("datasetId") or run.get("datasetVersion") or "unknown"
    )


def _model(run: Mapping[str, Any]) -> Any:
    return (
        (run.get("protocol") or {}).get("model")
        or run.get("model")
        or (run.get("configuration") or {}).get("model")
    )


def _mode(run: Mapping[str, Any]) -> str:
    cfg = run.get("configuration") or {}
    return str(cfg.get("goldenMode") or (run.get("protocol") or {}).get("mode") or "n/a")


def not_comparable(run: Mapping[str, Any]) -> bool:
    """The run exited 65: its baseline comparison was invalid, so its gate verdict says
    nothing about a regression (it is neither PASS nor FAIL)."""
    decision = run.get("exitDecision")
    return isinstance(decision, Mapping) and decision.get("code") == 65


def protocol_view(run: Mapping[str, Any]) -> dict[str, Any]:
    """What two runs must share to be comparable (as in :mod:`goldeval.verdict.comparison`): every
    protocol key, ``selectedCaseIds`` as a set, provider/model/judge only in live mode. A run
    without a protocol object: dataset version and hash, mode, model and repetitions."""
    from goldeval.verdict.comparison import LIVE_ONLY_KEYS, PROTOCOL_KEYS, run_mode

    protocol = run.get("protocol")
    mode = run_mode(run)
    if not isinstance(protocol, Mapping):
        cfg = run.get("configuration") or {}
        return {
            "datasetVersion": run.get("datasetVersion"),
            "datasetHash": run.get("datasetHash"),
            "mode": mode,
            "model": _model(run) if mode == "LIVE" else None,
            "repetitions": cfg.get("repetitions") if isinstance(cfg, Mapping) else None,
        }
    view: dict[str, Any] = {}
    for key in PROTOCOL_KEYS:
        if key in LIVE_ONLY_KEYS and mode != "LIVE":
            continue
        if key == "judgeModel" and protocol.get("judgeEnabled") is not True:
            continue
        value = protocol.get(key)
        if key == "selectedCaseIds" and isinstance(value, list):
            value = sorted({str(v) for v in value})
        view[key] = mode if key == "mode" else value
    return view


def protocol_key(run: Mapping[str, Any]) -> str:
    """A short stable id of the run's comparable protocol (one trend line per id)."""
    import hashlib

    text = json.dumps(protocol_view(run), sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def protocol_label(run: Mapping[str, Any]) -> str:
    view = protocol_view(run)
    ids = view.get("selectedCaseIds")
    cases = f"{len(ids)} cases" if isinstance(ids, list) else "cases n/a"
    data = str(view.get("datasetHash") or "n/a")[:8]
    model = f"model {view['model']}" if view.get("model") else "any model (not live)"
    return (
        f"{view.get('mode') or 'n/a'} · {model} · {view.get('attempts') or 1} attempt(s) · "
        f"{cases} · data {data}"
    )


def protocol_legend(runs: Sequence[Mapping[str, Any]]) -> str:
    keys = [protocol_key(r) for r in runs]
    items = []
    for number, key in enumerate(dict.fromkeys(keys)):
        group = [r for r, k in zip(runs, keys, strict=True) if k == key]
        items.append(
            f'<li data-protocol="{esc(key)}"><span style="color:{_series_colour("", number)}">'
            f"■</span> <code>{esc(key)}</code> {esc(protocol_label(group[0]))} "
            f"<small>({len(group)} run{'s' if len(group) != 1 else ''})</small></li>"
        )
    return f'<ul class="protocols">{"".join(items)}</ul>'


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "run"


def _page_names(runs: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """A unique, file-system-safe page name per run (keyed by ``id(run)``)."""
    names: dict[int, str] = {}
    used: set[str] = set()
    for run in runs:
        base = _slug(str(run.get("runId")))
        name, n = base, 1
        while name.lower() in used:
            n += 1
            name = f"{base}-{n}"
        used.add(name.lower())
        names[id(run)] = name
    return names


def _href(*parts: str) -> str:
    return esc("/".join(quote(p) for p in parts))


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{SITE_STYLE}{STYLE}</style></head>"
        f"<body>{body}</body></html>\n"
    )


# -- charts ---------------------------------------------------------------------------------


def trend_svg(
    metric: str, runs: Sequence[Mapping[str, Any]], width: int = 380, height: int = 190
) -> str:
    """An inline SVG line chart of one rate over runs (oldest left), with its Wilson band:
    one line (a ``<g class="series" data-protocol=KEY>``) per comparable protocol."""
    left, right, top, bottom = 42, 12, 24, 30
    plot_w, plot_h = width - left - right, height - top - bottom
    n = len(runs)

    def x(i: int) -> float:
        return left + (plot_w / 2 if n <= 1 else plot_w * i / (n - 1))

    def y(v: float) -> float:
        return top + plot_h * (1 - max(0.0, min(1.0, v)))

    label = TREND_LABELS.get(metric, metric)
    out = [
        f'<svg class="trend" data-metric="{esc(metric)}" xmlns="http://www.w3.org/2000/svg" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{esc(label)}">',
        f"<title>{esc(label)}</title>",
        f'<text x="{left}" y="15" font-size="12" font-weight="bold">{esc(label)}</text>',
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        ty = y(tick)
        out.append(
            f'<line x1="{left}" y1="{ty:.1f}" x2="{left + plot_w}" y2="{ty:.1f}" '
            'stroke="#d0d7de" stroke-width="1"/>'
        )
        out.append(
            f'<text x="{left - 4}" y="{ty + 4:.1f}" font-size="10" text-anchor="end">'
            f"{tick * 100:.0f}%</text>"
        )
    points: list[Point | None] = []
    for i, run in enumerate(runs):
        m = (run.get("metrics") or {}).get(metric)
        value = rate_of(m)
        points.append(None if value is None or m is None else (x(i), value, m, run))
    # One line per comparable protocol: a line joins only runs that could be compared with
    # each other, so a change of selection, attempts, model or data is never drawn as a trend.
    keys = [protocol_key(run) for run in runs]
    for number, key in enumerate(dict.fromkeys(keys)):
        colour = _series_colour(metric, number)
        mine = [p if k == key else None for p, k in zip(points, keys, strict=True)]
        out.append(f'<g class="series" data-protocol="{esc(key)}">')
        out.extend(_series(mine, y, colour))
        out.append("</g>")
    if not any(points):
        out.append(
            f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h / 2:.1f}" font-size="11" '
            'text-anchor="middle" fill="#57606a">no data (n/a in every run)</text>'
        )
    if n:
        first, last = str(runs[0].get("runId")), str(runs[-1].get("runId"))
        out.append(f'<text x="{left}" y="{height - 8}" font-size="10">{esc(first)}</text>')
        if n > 1:
            out.append(
                f'<text x="{left + plot_w}" y="{height - 8}" font-size="10" '
                f'text-anchor="end">{esc(last)}</text>'
            )
    out.append("</svg>")
    return "".join(out)


#: A chart point: x, value, the metric's rate object, the run.
Point = tuple[float, float, Mapping[str, Any], Mapping[str, Any]]


def _series_colour(metric: str, number: int) -> str:
    if number == 0:
        return "#cf222e" if metric == "hallucinationRate" else "#0969da"
    return SERIES_COLOURS[(number - 1) % len(SERIES_COLOURS)]


def _series(points: Sequence[Point | None], y: Callable[[float], float], colour: str) -> list[str]:
    """One protocol's line: Wilson band, polyline (broken where a run has no value) and
    points; a run that exited 65 is drawn hollow and titled "not comparable"."""
    out: list[str] = []
    segments: list[list[Point]] = [[]]
    for p in points:
        if p is None:
            if segments[-1]:
                segments.append([])
        else:
            segments[-1].append(p)
    for seg in segments:
        band = [(px, (m.get("ci95") or {})) for px, _, m, _ in seg]
        if band and all(
            ci.get("lower") is not None and ci.get("upper") is not None for _, ci in band
        ):
            upper = [f"{px:.1f},{y(ci['upper']):.1f}" for px, ci in band]
            lower = [f"{px:.1f},{y(ci['lower']):.1f}" for px, ci in reversed(band)]
            if len(band) == 1:
                px = band[0][0]
                ci = band[0][1]
                out.append(
                    f'<line x1="{px:.1f}" y1="{y(ci["upper"]):.1f}" x2="{px:.1f}" '
                    f'y2="{y(ci["lower"]):.1f}" stroke="{colour}" stroke-opacity="0.3" '
                    'stroke-width="8"/>'
                )
            else:
                out.append(
                    f'<polygon class="ci" points="{" ".join(upper + lower)}" '
                    f'fill="{colour}" fill-opacity="0.12" stroke="none"/>'
                )
        if len(seg) > 1:
            line = " ".join(f"{px:.1f},{y(v):.1f}" for px, v, _, _ in seg)
            out.append(
                f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="2"/>'
            )
        for px, v, m, run in seg:
            tip = (
                f"{run.get('runId')}: {fmt_pct(v)} ({m.get('hits', 0)} / {m.get('total', 0)})"
                f", Wilson 95% {fmt_ci(m)}"
            )
            if not_comparable(run):
                tip += f"; {NOT_COMPARABLE} with its baseline (exit 65)"
                out.append(
                    f'<circle class="not-comparable" cx="{px:.1f}" cy="{y(v):.1f}" r="3.5" '
                    f'fill="#ffffff" stroke="{colour}" stroke-width="2">'
                    f"<title>{esc(tip)}</title></circle>"
                )
                continue
            out.append(
                f'<circle cx="{px:.1f}" cy="{y(v):.1f}" r="3.5" fill="{colour}">'
                f"<title>{esc(tip)}</title></circle>"
            )
    return out


# -- per-case history -----------------------------------------------------------------------


def case_history(runs: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any] | None]]:
    """caseId → its case record in each run (oldest first; ``None`` where absent)."""
    order: list[str] = []
    by_case: dict[str, list[Mapping[str, Any] | None]] = {}
    for i, run in enumerate(runs):
        for case in run.get("cases") or []:
            case_id = str(case.get("caseId"))
            if case_id not in by_case:
                order.append(case_id)
                by_case[case_id] = [None] * len(runs)
            by_case[case_id][i] = case
    return {c: by_case[c] for c in sorted(order)}


def flips(cells: Sequence[Mapping[str, Any] | None]) -> int:
    """How often the PASS/FAIL verdict changed between consecutive runs that had one."""
    verdicts = [str(c.get("status")) for c in cells if c and c.get("status") in VERDICTS]
    return sum(1 for a, b in itertools.pairwise(verdicts) if a != b)


def unstable_within_run(cells: Sequence[Mapping[str, Any] | None]) -> bool:
    for c in cells:
        rate = (c or {}).get("successRate") or {}
        if 0 < int(rate.get("hits") or 0) < int(rate.get("total") or 0):
            return True
    return False


def is_flaky(cells: Sequence[Mapping[str, Any] | None]) -> bool:
    return flips(cells) >= 2 or unstable_within_run(cells)


def history_table(runs: Sequence[Mapping[str, Any]], names: Mapping[int, str]) -> str:
    head = ["<th>Case</th>", "<th>Flags</th>"]
    for i, run in enumerate(runs, start=1):
        head.append(
            f'<th title="{esc(run.get("runId"))}"><a href="{_href("runs", names[id(run)])}'
            f'.html">#{i}</a></th>'
        )
    rows = []
    for case_id, cells in case_history(runs).items():
        n = flips(cells)
        flags = []
        if is_flaky(cells):
            flags.append(f'<span class="flaky" title="{n} flips">flaky</span>')
        elif n == 1:
            flags.append('<span class="changed" title="1 flip">changed</span>')
        tds = [f"<td><code>{esc(case_id)}</code></td>", f"<td>{' '.join(flags)}</td>"]
        for c in cells:
            if c is None:
                tds.append('<td class="cell">—</td>')
                continue
            rate = c.get("successRate") or {}
            tip = f"{rate.get('hits', 0)} / {rate.get('total', 0)} attempts passed"
            tds.append(f'<td class="cell" title="{esc(tip)}">{badge(c.get("status"))}</td>')
        flaky_attr = ' class="flaky-case"' if is_flaky(cells) else ""
        rows.append(f'<tr data-case="{esc(case_id)}"{flaky_attr}>{"".join(tds)}</tr>')
    return (
        f'<table class="history"><thead><tr>{"".join(head)}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


# -- pages ----------------------------------------------------------------------------------


def _run_row(run: Mapping[str, Any], names: Mapping[int, str]) -> list[str]:
    metric = (run.get("metrics") or {}).get("overallPassRate")
    gate = (run.get("qualityGate") or {}).get("verdict") or "not applied"
    if not_comparable(run):
        gate = NOT_COMPARABLE
    return [
        f'<a href="{_href("runs", names[id(run)])}.html">{esc(run.get("runId"))}</a>',
        esc(run.get("timestamp")),
        esc(_dataset(run)),
        esc(_mode(run)),
        esc(_model(run)),
        badge(run.get("status")),
        f"{esc(fmt_pct(rate_of(metric)))} <small>({esc((metric or {}).get('hits', 0))} / "
        f"{esc((metric or {}).get('total', 0))})</small>",
        badge(gate),
    ]


def render_index(runs: Sequence[Mapping[str, Any]], names: Mapping[int, str]) -> str:
    newest = sorted(runs, key=_sort_key, reverse=True)
    body = [
        "<h1>Golden evaluation history</h1>",
        f"<p>{len(runs)} run{'s' if len(runs) != 1 else ''}.</p>",
        "<h2>Runs</h2>",
        table(
            ("Run", "Time", "Dataset", "Mode", "Model", "Status", "Overall", "Gate"),
            [_run_row(r, names) for r in newest],
            "runs",
        ),
    ]
    datasets = sorted({_dataset(r) for r in runs})
    for ds in datasets:
        chrono = sorted((r for r in runs if _dataset(r) == ds), key=_sort_key)
        body.append(f'<section class="dataset" id="dataset-{esc(_slug(ds))}">')
        body.append(f"<h2>Dataset <code>{esc(ds)}</code></h2>")
        body.append(
            "<h3>Trends</h3><p><small>One line per comparable protocol (dataset hash, "
            "selection, attempts, mode, and model when live); a hollow point: "
            f"{NOT_COMPARABLE} with its baseline (exit 65).</small></p>"
            + protocol_legend(chrono)
            + '<div class="charts">'
            + "".join(trend_svg(m, chrono) for m in TREND_METRICS)
            + "</div>"
        )
        body.append(
            '<h3>Per-case history</h3><p><small>Runs oldest first; <span class="flaky">'
            "flaky</span>: the verdict flipped back and forth across runs, or attempts "
            'disagreed within a run; <span class="changed">changed</span>: one flip.'
            "</small></p>"
        )
        body.append(history_table(chrono, names))
        body.append("</section>")
    return _page("Golden evaluation history", "".join(body))


def _case_reason(case: Mapping[str, Any]) -> str:
    from goldeval.reports.junit import error_reasons, failure_reasons

    status = case.get("status")
    if status == "FAIL":
        reasons = failure_reasons(case)
    elif status == "ERROR":
        reasons = error_reasons(case)
    else:
        return ""
    return "<br>".join(esc(r) for r in reasons[:5]) + (
        f"<br><small>+{len(reasons) - 5} more</small>" if len(reasons) > 5 else ""
    )


def render_run(run: Mapping[str, Any]) -> str:
    classes = {
        str(c.get("caseId")): c.get("class")
        for c in (run.get("comparison") or {}).get("cases") or []
    }
    rows = []
    for case in run.get("cases") or []:
        rate = case.get("successRate") or {}
        case_id = str(case.get("caseId"))
        prompt = str((case.get("metadata") or {}).get("prompt") or "")
        cls = classes.get(case_id)
        rows.append(
            (
                f"<code>{esc(case_id)}</code>",
                badge(case.get("status")),
                f"{esc(rate.get('hits', 0))} / {esc(rate.get('total', 0))}",
                badge(cls) if cls else "n/a",
                esc(", ".join(str(k) for k in case.get("kinds") or [])),
                _case_reason(case),
                esc(prompt[:300] + ("…" if len(prompt) > 300 else "")),
            )
        )
    body = (
        '<p><a href="../index.html">← all runs</a></p>'
        f"<h1>Run <code>{esc(run.get('runId'))}</code></h1>"
        f"<p>{badge(run.get('status'))} · dataset <code>{esc(_dataset(run))}</code> · "
        f"{esc(run.get('timestamp'))}</p>"
        "<h2>Dataset and protocol</h2>"
        + protocol_table(run)
        + "<h2>Metrics</h2>"
        + metrics_table(run)
        + "<h2>Baseline comparison</h2>"
        + comparison_html(run)
        + "<h2>Quality gate</h2>"
        + (
            f'<p><span class="skip">{esc(NOT_COMPARABLE)}</span>: exit 65, '
            f"{esc((run.get('exitDecision') or {}).get('reason'))}</p>"
            if not_comparable(run)
            else ""
        )
        + gate_html(run)
        + "<h2>Cases</h2>"
        + table(
            (
                "Case",
                "Status",
                "Attempts passed",
                "Class vs baseline",
                "Kinds",
                "Reasons",
                "Prompt",
            ),
            rows,
            "cases",
        )
    )
    return _page(f"Run {run.get('runId')}", body)


def build_site(out_dir: Path, runs: list[dict[str, Any]]) -> Path:
    """Write the static site for ``runs`` into ``out_dir``; returns the index page's path."""
    from goldeval.results.run_folder import atomic_write

    out = Path(out_dir)
    names = _page_names(sorted(runs, key=_sort_key))
    for run in runs:
        atomic_write(out / "runs" / f"{names[id(run)]}.html", render_run(run))
    index = out / "index.html"
    atomic_write(index, render_index(runs, names))
    return index


# -- command line ---------------------------------------------------------------------------


def main_site(argv: Sequence[str] | None = None) -> int:
    """``goldeval site --out DIR [--runs .goldeval/runs]``: 0 on success, 1 without runs."""
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
        return 1
    index = build_site(Path(args.out), runs)
    print(f"goldeval site: {len(runs)} run{'s' if len(runs) != 1 else ''} → {index}")
    return 0
