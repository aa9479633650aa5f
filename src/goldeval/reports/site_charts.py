"""The history site's trend charts (:mod:`goldeval.reports.site`): one SVG line per comparable
protocol, so a change of selection, attempts, model or data is never drawn as a trend, with
each line's Wilson band and its runs that exited 65 drawn hollow.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from goldeval.core.rates import LOWER_IS_BETTER
from goldeval.reports.html import fmt_ci, fmt_pct, rate_of
from goldeval.reports.labels import chart_label
from goldeval.results.documents import RateDoc, RunDocument
from goldeval.verdict.comparison import LIVE_ONLY_KEYS, PROTOCOL_KEYS, normal_mode
from goldeval.verdict.exit_codes import COMPARISON_INVALID
from goldeval.verdict.gate_label import NOT_COMPARABLE

#: Colours of the second and later protocol lines in a chart (the first keeps the metric's).
SERIES_COLOURS = ("#8250df", "#1a7f37", "#bc4c00", "#57606a", "#bf3989", "#0550ae")


def run_model(run: RunDocument) -> str | None:
    return (
        (run.protocol.model if run.protocol else None)
        or run.model
        or (run.configuration.model if run.configuration else None)
    )


def not_comparable(run: RunDocument) -> bool:
    """The run exited 65: its baseline comparison was invalid, so its gate verdict says
    nothing about a regression (it is neither PASS nor FAIL)."""
    return run.exit_decision is not None and run.exit_decision.code == COMPARISON_INVALID


def protocol_view(run: RunDocument) -> dict[str, Any]:
    """What two runs must share to be comparable (as in :mod:`goldeval.verdict.comparison`): every
    protocol key, ``selectedCaseIds`` as a set, provider/model/judge only in live mode. A run
    without a protocol object: dataset version and hash, mode, model and repetitions."""
    # The protocol as JSON, key by key (as verdict.protocol_check compares it): a key the
    # run left out is not the same line as a key written empty.
    protocol = run.protocol.dump() if run.protocol is not None else None
    configuration = run.configuration
    # verdict.comparison.run_mode's rule.
    mode = normal_mode(protocol.get("mode")) if protocol is not None else None
    if mode is None and configuration is not None:
        mode = normal_mode(configuration.mode)
    if protocol is None:
        return {
            "datasetVersion": run.dataset_version,
            "datasetHash": run.dataset_hash,
            "mode": mode,
            "model": run_model(run) if mode == "LIVE" else None,
            "repetitions": configuration.repetitions if configuration is not None else None,
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


def protocol_key(run: RunDocument) -> str:
    """A short stable id of the run's comparable protocol (one trend line per id)."""
    text = json.dumps(protocol_view(run), sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def protocol_label(run: RunDocument) -> str:
    view = protocol_view(run)
    ids = view.get("selectedCaseIds")
    cases = f"{len(ids)} cases" if isinstance(ids, list) else "cases n/a"
    data = str(view.get("datasetHash") or "n/a")[:8]
    model = f"model {view['model']}" if view.get("model") else "any model (not live)"
    return (
        f"{view.get('mode') or 'n/a'} · {model} · {view.get('attempts') or 1} attempt(s) · "
        f"{cases} · data {data}"
    )


def protocol_legend(runs: Sequence[RunDocument]) -> list[dict[str, Any]]:
    """One legend entry per comparable protocol, in order of first appearance."""
    keys = [protocol_key(r) for r in runs]
    legend = []
    for number, key in enumerate(dict.fromkeys(keys)):
        group = [r for r, k in zip(runs, keys, strict=True) if k == key]
        legend.append(
            {
                "key": key,
                "colour": _series_colour("", number),
                "label": protocol_label(group[0]),
                "runs": len(group),
            }
        )
    return legend


def trend_view(
    metric: str, runs: Sequence[RunDocument], width: int = 380, height: int = 190
) -> dict[str, Any]:
    """An SVG line chart of one rate over runs (oldest left), with its Wilson band: one line
    per comparable protocol (``templates/trend.svg.j2`` draws it)."""
    left, right, top, bottom = 42, 12, 24, 30
    plot_w, plot_h = width - left - right, height - top - bottom
    n = len(runs)

    def x(i: int) -> float:
        return left + (plot_w / 2 if n <= 1 else plot_w * i / (n - 1))

    def y(v: float) -> float:
        return top + plot_h * (1 - max(0.0, min(1.0, v)))

    ticks = [
        {"y": f"{y(t):.1f}", "text_y": f"{y(t) + 4:.1f}", "label": f"{t * 100:.0f}%"}
        for t in (0.0, 0.25, 0.5, 0.75, 1.0)
    ]
    points: list[Point | None] = []
    for i, run in enumerate(runs):
        m = run.metrics.rate(metric) if run.metrics is not None else None
        value = rate_of(m)
        points.append(None if value is None or m is None else (x(i), value, m, run))
    # One line per comparable protocol: a line joins only runs that could be compared with
    # each other, so a change of selection, attempts, model or data is never drawn as a trend.
    keys = [protocol_key(run) for run in runs]
    series = []
    for number, key in enumerate(dict.fromkeys(keys)):
        mine = [p if k == key else None for p, k in zip(points, keys, strict=True)]
        series.append(
            {"key": key, "colour": _series_colour(metric, number), "segments": _segments(mine, y)}
        )
    no_data = None
    if not any(points):
        no_data = {"x": f"{left + plot_w / 2:.1f}", "y": f"{top + plot_h / 2:.1f}"}
    return {
        "metric": metric,
        "label": chart_label(metric),
        "width": width,
        "height": height,
        "left": left,
        "plot_right": left + plot_w,
        "tick_x": left - 4,
        "label_y": height - 8,
        "ticks": ticks,
        "series": series,
        "no_data": no_data,
        "first": str(runs[0].run_id) if n else None,
        "last": str(runs[-1].run_id) if n > 1 else None,
    }


#: A chart point: x, value, the metric's rate object, the run.
Point = tuple[float, float, RateDoc, RunDocument]


def _series_colour(metric: str, number: int) -> str:
    if number == 0:
        return "#cf222e" if metric in LOWER_IS_BETTER else "#0969da"
    return SERIES_COLOURS[(number - 1) % len(SERIES_COLOURS)]


def _segments(points: Sequence[Point | None], y: Callable[[float], float]) -> list[dict[str, Any]]:
    """One protocol's line, broken where a run has no value: per segment its Wilson band
    (a bar for a single point), its polyline and its points; a run that exited 65 is drawn
    hollow and titled "not comparable"."""
    segments: list[list[Point]] = [[]]
    for p in points:
        if p is None:
            if segments[-1]:
                segments.append([])
        else:
            segments[-1].append(p)
    out: list[dict[str, Any]] = []
    for seg in segments:
        band_ci = [(px, m.ci95) for px, _, m, _ in seg if m.ci95 is not None]
        band: dict[str, Any] | None = None
        # A band only where every point of the segment has its interval.
        if band_ci and len(band_ci) == len(seg):
            if len(band_ci) == 1:
                px, ci = band_ci[0]
                band = {
                    "line": True,
                    "x": f"{px:.1f}",
                    "upper": f"{y(ci.upper):.1f}",
                    "lower": f"{y(ci.lower):.1f}",
                }
            else:
                upper = [f"{px:.1f},{y(ci.upper):.1f}" for px, ci in band_ci]
                lower = [f"{px:.1f},{y(ci.lower):.1f}" for px, ci in reversed(band_ci)]
                band = {"line": False, "points": " ".join(upper + lower)}
        line = " ".join(f"{px:.1f},{y(v):.1f}" for px, v, _, _ in seg) if len(seg) > 1 else None
        dots = []
        for px, v, m, run in seg:
            tip = f"{run.run_id}: {fmt_pct(v)} ({m.hits} / {m.total}), Wilson 95% {fmt_ci(m)}"
            hollow = not_comparable(run)
            if hollow:
                tip += f"; {NOT_COMPARABLE} with its baseline (exit 65)"
            dots.append({"x": f"{px:.1f}", "y": f"{y(v):.1f}", "tip": tip, "hollow": hollow})
        out.append({"band": band, "line": line, "points": dots})
    return out
