"""The pass@k curve of a variant session (issue 35): k on the x axis, one colour per variant,
pass@k solid with its 95% band, pass^k dashed (``templates/passk.svg.j2`` draws it, inline in
the HTML pages and as ``pass-at-k.svg`` beside report.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from goldeval.reports.templating import render
from goldeval.results.documents import PassAtKCurveDoc

#: One colour per variant (the site's trend colours), repeated past the eighth.
_COLOURS = ("#0969da", "#cf222e", "#8250df", "#1a7f37", "#bc4c00", "#57606a", "#bf3989", "#0550ae")
#: Width of one legend entry; the legend wraps onto more rows below the plot.
_LEGEND_W = 110


def pass_at_k_chart(
    curves: Sequence[PassAtKCurveDoc] | None, width: int = 420, height: int = 230
) -> dict[str, Any] | None:
    """The chart's view: axes, and per variant its pass@k line, band and points and its
    pass^k line. None when no variant has a curve."""
    if not curves:
        return None
    left, right, top = 42, 12, 24
    columns = max(1, (width - left - right) // _LEGEND_W)
    legend_rows = -(-len(curves) // columns)
    bottom = 32 + 14 * legend_rows
    height += 14 * (legend_rows - 1)
    plot_w, plot_h = width - left - right, height - top - bottom
    most = max((row.k for curve in curves for row in curve.by_k), default=1)

    def x(k: int) -> float:
        return left + (plot_w / 2 if most <= 1 else plot_w * (k - 1) / (most - 1))

    def y(v: float) -> float:
        return top + plot_h * (1 - max(0.0, min(1.0, v)))

    series = []
    for number, curve in enumerate(curves):
        rows = sorted(curve.by_k, key=lambda r: r.k)
        banded = [(r.k, ci) for r in rows if (ci := r.pass_at_k_ci95) is not None]
        band = None
        if len(banded) == len(rows) and len(rows) > 1:  # a band only where every k has one
            upper = [f"{x(k):.1f},{y(ci.upper):.1f}" for k, ci in banded]
            lower = [f"{x(k):.1f},{y(ci.lower):.1f}" for k, ci in reversed(banded)]
            band = " ".join(upper + lower)
        series.append(
            {
                "variant": curve.variant,
                "colour": _COLOURS[number % len(_COLOURS)],
                "band": band,
                "at_k": " ".join(f"{x(r.k):.1f},{y(r.pass_at_k):.1f}" for r in rows),
                "hat_k": " ".join(f"{x(r.k):.1f},{y(r.pass_hat_k):.1f}" for r in rows),
                "points": [
                    {
                        "x": f"{x(r.k):.1f}",
                        "y": f"{y(r.pass_at_k):.1f}",
                        "tip": f"{curve.variant}: pass@{r.k} {r.pass_at_k * 100:.1f}%, "
                        f"pass^{r.k} {r.pass_hat_k * 100:.1f}% ({r.cases} cases)",
                    }
                    for r in rows
                ],
                "legend_x": left + _LEGEND_W * (number % columns),
                "legend_y": top + plot_h + 30 + 14 * (number // columns),
            }
        )
    return {
        "width": width,
        "height": height,
        "left": left,
        "plot_right": left + plot_w,
        "tick_x": left - 4,
        "axis_y": f"{top + plot_h + 14:.1f}",
        "ticks": [
            {"y": f"{y(t):.1f}", "text_y": f"{y(t) + 4:.1f}", "label": f"{t * 100:.0f}%"}
            for t in (0.0, 0.25, 0.5, 0.75, 1.0)
        ],
        "ks": [{"x": f"{x(k):.1f}", "label": f"k={k}"} for k in range(1, most + 1)],
        "series": series,
    }


def pass_at_k_svg(curves: Sequence[PassAtKCurveDoc] | None) -> str | None:
    """The chart as a standalone SVG file (``pass-at-k.svg`` of a run folder)."""
    chart = pass_at_k_chart(curves)
    return None if chart is None else render("passk_file.svg.j2", chart=chart)
