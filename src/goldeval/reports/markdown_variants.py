"""report.md's section on two variants of one session (issue 35): ``variantComparison``."""

from __future__ import annotations

from goldeval.reports.markdown_text import md_escape
from goldeval.results.documents import VariantComparisonDoc, VariantCostDoc


def _pct(value: float | None, sign: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value * 100:+.1f}%" if sign else f"{value * 100:.1f}%"


def variant_lines(cmp: VariantComparisonDoc | None) -> list[str]:
    """``variantComparison``: two variants of the session on the cases both graded; the
    decision and its reason are the verdict's, as the session recorded them."""
    if cmp is None:
        return []
    control, candidate = md_escape(cmp.control), md_escape(cmp.candidate)
    ci = cmp.ci95
    test = cmp.mcnemar
    p_value = test.p_value
    mdd = cmp.minimum_detectable_difference
    out = [
        "",
        f"## Variants: {candidate} vs {control}",
        "",
        f"**{md_escape(cmp.decision)}**: {md_escape(cmp.reason)}",
        "",
        "| Variant | Model | Pass rate (paired cases) |",
        "|---|---|---|",
        f"| {control} (control) | {md_escape(cmp.control_model)} | {_pct(cmp.control_pass_rate)} |",
        f"| {candidate} (candidate) | {md_escape(cmp.candidate_model)} | "
        f"{_pct(cmp.candidate_pass_rate)} |",
        "",
        f"- Paired cases: {cmp.cases} (not paired: {cmp.unpaired})",
        f"- Difference (candidate − control): {_pct(cmp.difference, True)}, 95% CI "
        f"{_pct(ci.lower if ci else None, True)} to {_pct(ci.upper if ci else None, True)} "
        f"({md_escape((ci.method if ci else None) or 'n/a')}, clustered by case, "
        f"{cmp.resamples} resamples, seed {cmp.seed})",
        f"- Non-inferiority margin: {_pct(cmp.margin)}",
        f"- Exact McNemar ({md_escape(test.rule)} of attempts per case): "
        f"{test.control_only} cases pass only for the control, "
        f"{test.candidate_only} only for the candidate, p = "
        + (f"{p_value:.4g}" if p_value is not None else "n/a (no discordant case)"),
        "- Smallest difference these cases detect at 80% power (measured discordance): "
        + (_pct(mdd) if mdd is not None else "n/a"),
    ]
    for ids, label in (
        (cmp.flipped_worse, "Flipped to FAIL"),
        (cmp.flipped_better, "Flipped to PASS"),
    ):
        if ids:
            out.append(f"- {label}: " + ", ".join(md_escape(i) for i in ids))
    costs = cmp.costs
    if costs is not None and (costs.control is not None or costs.candidate is not None):
        out += [
            "",
            "Whole runs (every case, not only the paired ones):",
            "",
            "| Variant | Latency median | p95 | Tokens | Estimated cost |",
            "|---|---|---|---|---|",
        ]
        for c, name in ((costs.control, control), (costs.candidate, candidate)):
            c = c or VariantCostDoc()
            cost = c.estimated_cost
            out.append(
                f"| {name} | {_na(c.median_ms, ' ms')} | {_na(c.p95_ms, ' ms')} | "
                f"{_na(c.total_tokens)} | " + (f"{cost:.4f} |" if cost is not None else "n/a |")
            )
    return out


def _na(value: int | float | None, unit: str = "") -> str:
    return f"{value}{unit}" if value is not None else "n/a"
