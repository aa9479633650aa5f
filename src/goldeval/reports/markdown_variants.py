"""report.md's section on two variants of one session (issue 35): ``variantComparison``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from goldeval.reports.markdown_text import md_escape


def _pct(value: Any, sign: bool = False) -> str:
    if not isinstance(value, (int, float)):
        return "n/a"
    return f"{value * 100:+.1f}%" if sign else f"{value * 100:.1f}%"


def variant_lines(cmp: Mapping[str, Any] | None) -> list[str]:
    """``variantComparison``: two variants of the session on the cases both graded; the
    decision and its reason are the verdict's, as the session recorded them."""
    if not cmp:
        return []
    control, candidate = md_escape(cmp.get("control")), md_escape(cmp.get("candidate"))
    ci = cmp.get("ci95") or {}
    test = cmp.get("mcnemar") or {}
    p_value = test.get("pValue")
    mdd = cmp.get("minimumDetectableDifference")
    out = [
        "",
        f"## Variants: {candidate} vs {control}",
        "",
        f"**{md_escape(cmp.get('decision'))}**: {md_escape(cmp.get('reason'))}",
        "",
        "| Variant | Model | Pass rate (paired cases) |",
        "|---|---|---|",
        f"| {control} (control) | {md_escape(cmp.get('controlModel'))} | "
        f"{_pct(cmp.get('controlPassRate'))} |",
        f"| {candidate} (candidate) | {md_escape(cmp.get('candidateModel'))} | "
        f"{_pct(cmp.get('candidatePassRate'))} |",
        "",
        f"- Paired cases: {cmp.get('cases')} (not paired: {cmp.get('unpaired', 0)})",
        f"- Difference (candidate − control): {_pct(cmp.get('difference'), True)}, 95% CI "
        f"{_pct(ci.get('lower'), True)} to {_pct(ci.get('upper'), True)} "
        f"({md_escape(ci.get('method') or 'n/a')}, clustered by case, "
        f"{cmp.get('resamples')} resamples, seed {cmp.get('seed')})",
        f"- Non-inferiority margin: {_pct(cmp.get('margin'))}",
        f"- Exact McNemar ({md_escape(test.get('rule'))} of attempts per case): "
        f"{test.get('controlOnly')} cases pass only for the control, "
        f"{test.get('candidateOnly')} only for the candidate, p = "
        + (f"{p_value:.4g}" if isinstance(p_value, (int, float)) else "n/a (no discordant case)"),
        "- Smallest difference these cases detect at 80% power (measured discordance): "
        + (_pct(mdd) if isinstance(mdd, (int, float)) else "n/a"),
    ]
    for key, label in (("flippedWorse", "Flipped to FAIL"), ("flippedBetter", "Flipped to PASS")):
        ids = cmp.get(key) or []
        if ids:
            out.append(f"- {label}: " + ", ".join(md_escape(i) for i in ids))
    costs = cmp.get("costs") or {}
    if costs:
        out += [
            "",
            "Whole runs (every case, not only the paired ones):",
            "",
            "| Variant | Latency median | p95 | Tokens | Estimated cost |",
            "|---|---|---|---|---|",
        ]
        for side, name in (("control", control), ("candidate", candidate)):
            c = costs.get(side) or {}
            cost = c.get("estimatedCost")
            out.append(
                f"| {name} | {_na(c.get('medianMs'), ' ms')} | {_na(c.get('p95Ms'), ' ms')} | "
                f"{_na(c.get('totalTokens'))} | "
                + (f"{cost:.4f} |" if isinstance(cost, (int, float)) else "n/a |")
            )
    return out


def _na(value: Any, unit: str = "") -> str:
    return f"{value}{unit}" if isinstance(value, (int, float)) else "n/a"
