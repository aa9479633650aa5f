"""report.md's section on two variants of one session (issue 35): ``variantComparison``."""

from __future__ import annotations

from goldeval.reports.markdown_text import md_escape
from goldeval.results.documents import (
    DiffSegmentDoc,
    MatrixCellDoc,
    PairedFigureDoc,
    ParetoDoc,
    PassAtKCurveDoc,
    SideBySideDoc,
    VariantComparisonDoc,
    VariantCostDoc,
    VariantMatrixDoc,
    VariantPairDoc,
    VariantPairsDoc,
)
from goldeval.verdict.variants import decide_variants

#: ``pairedCosts`` figures as report.md names them, with their unit and number format.
_PAIRED_LABELS = {
    "latencyMs": ("Latency per attempt", " ms", "{:.1f}"),
    "totalTokens": ("Tokens per attempt", "", "{:.1f}"),
    "estimatedCost": ("Estimated cost per attempt", "", "{:.6f}"),
}


def _pct(value: float | None, sign: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value * 100:+.1f}%" if sign else f"{value * 100:.1f}%"


def variant_lines(cmp: VariantComparisonDoc | None) -> list[str]:
    """``variantComparison``: two variants of the session on the cases both graded; the
    decision and its reason are the verdict's, decided again from the figures (a stored
    label is never shown as it is)."""
    if cmp is None:
        return []
    verdict = decide_variants(cmp)
    control, candidate = md_escape(cmp.control), md_escape(cmp.candidate)
    ci = cmp.ci95
    test = cmp.mcnemar
    p_value = test.p_value
    mdd = cmp.minimum_detectable_difference
    out = [
        "",
        f"## Variants: {candidate} vs {control}",
        "",
        f"**{md_escape(verdict.decision.value)}**: {md_escape(verdict.reason)}",
        "",
        "| Variant | Model | Pass rate (paired cases) |",
        "|---|---|---|",
        f"| {control} (control) | {_model(cmp.control_model)} | {_pct(cmp.control_pass_rate)} |",
        f"| {candidate} (candidate) | {_model(cmp.candidate_model)} | "
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
    return (
        out
        + _paired_cost_lines(cmp)
        + _pareto_lines(cmp.pareto)
        + _pass_at_k_lines(cmp.pass_at_k)
        + _pair_lines(cmp.pairs)
        + _matrix_lines(cmp.matrix)
        + _answer_lines(cmp.answers)
    )


#: Characters of an answer excerpt a matrix cell of report.md shows.
_CELL_EXCERPT = 60


def _answer_lines(answers: list[SideBySideDoc] | None) -> list[str]:
    """``answers``: each flipped case's two answer excerpts and the word diff between them."""
    if not answers:
        return []
    out = [
        "",
        "Answers side by side (flipped cases; the beginning of each side's first answer; in "
        "the word diff ~~struck~~ is the control's only, **bold** the candidate's only):",
    ]
    for answer in answers:
        flipped = "flipped to FAIL" if answer.direction == "worse" else "flipped to PASS"
        cut = " (excerpts cut: the diff covers the beginning)" if answer.truncated else ""
        out += [
            "",
            f"**{md_escape(answer.case_id)}** ({flipped}){cut}",
            "",
            f"- control: {_excerpt(answer.control)}",
            f"- candidate: {_excerpt(answer.candidate)}",
        ]
        if answer.diff:
            out.append("- word diff: " + "".join(_segment(seg) for seg in answer.diff))
    return out


def _excerpt(text: str | None) -> str:
    return md_escape(text) if text is not None else "no answer kept"


def _segment(segment: DiffSegmentDoc) -> str:
    """One diff segment, its text escaped (``~`` too: an answer cannot strike through)."""
    text = md_escape(segment.text)
    if not text.strip():
        return " " if segment.text else ""
    if segment.op == "-":
        return f"~~{text.strip()}~~ "
    if segment.op == "+":
        return f"**{text.strip()}** "
    return text if text.endswith(" ") else text + " "


#: The non-inferiority statistic of a pair that does not gate, in words that are no verdict.
MARGIN_WORDS = {
    "PASS": "within the margin",
    "FAIL": "worse beyond the margin",
    "UNDERPOWERED": "cannot tell",
}


def pair_cells(pair: VariantPairDoc) -> list[str]:
    """One row of the pairs table as report.md and the HTML pages show it (unescaped)."""
    ci = pair.ci95
    adjusted = pair.adjusted_p_value
    return [
        f"{pair.candidate} vs {pair.control}" + (" (gated)" if pair.gated else ""),
        str(pair.cases),
        _pct(pair.difference, True),
        f"{_pct(ci.lower, True)} to {_pct(ci.upper, True)}" if ci else "n/a",
        f"{pair.control_only} / {pair.candidate_only}",
        f"{pair.p_value:.4g}" if pair.p_value is not None else "n/a",
        f"{adjusted:.4g}" if adjusted is not None else "n/a",
        MARGIN_WORDS.get(pair.non_inferiority, pair.non_inferiority),
    ]


PAIR_HEAD = (
    "Pair",
    "Cases",
    "Difference",
    "95% CI",
    "Pass only control / candidate",
    "McNemar p",
    "Holm p",
    "At the margin",
)


def _pass_at_k_lines(curves: list[PassAtKCurveDoc] | None) -> list[str]:
    """``passAtK``: every variant's pass@k and pass^k by k, and the chart beside report.md."""
    if not curves:
        return []
    ks = sorted({row.k for curve in curves for row in curve.by_k})
    out = [
        "",
        "pass@k / pass^k by variant (the chance that at least one of k attempts passes / that "
        "all k pass; unbiased estimator over each variant's cases):",
        "",
        "![pass@k by variant](pass-at-k.svg)",
        "",
        "| Variant | " + " | ".join(f"k={k}" for k in ks) + " |",
        "|---" * (len(ks) + 1) + "|",
    ]
    for curve in curves:
        by_k = {row.k: row for row in curve.by_k}
        cells = [
            f"{_pct(by_k[k].pass_at_k)} / {_pct(by_k[k].pass_hat_k)}" if k in by_k else "n/a"
            for k in ks
        ]
        out.append(f"| {md_escape(curve.variant)} | " + " | ".join(cells) + " |")
    return out


def _pair_lines(pairs: VariantPairsDoc | None) -> list[str]:
    """``pairs``: each variant against the control, or all pairs (reported, not gated)."""
    if pairs is None or not pairs.rows:
        return []
    which = "every pair" if pairs.mode == "all" else "each variant against the control"
    out = [
        "",
        f"Pairs ({which}; candidate − control on the cases both graded, exact McNemar "
        f"p-values adjusted over the {len(pairs.rows)} pairs by Holm's method; margin "
        f"{_pct(pairs.margin)}; reported, only the gated pair decides the exit status):",
        "",
        "| " + " | ".join(PAIR_HEAD) + " |",
        "|---" * len(PAIR_HEAD) + "|",
    ]
    for pair in pairs.rows:
        out.append("| " + " | ".join(md_escape(c) for c in pair_cells(pair)) + " |")
    return out


def _paired_cost_lines(cmp: VariantComparisonDoc) -> list[str]:
    """``pairedCosts``: each figure's per-case mean for both sides and the difference with its
    interval (reported, not gated)."""
    figures = cmp.paired_costs or {}
    if not any(figures.values()):
        return []
    out = [
        "",
        "Paired cost and latency (mean per case over its graded attempts, on the paired cases "
        "both measured; reported, not gated):",
        "",
        "| Figure | Cases | Control | Candidate | Difference | 95% CI | Relative |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, (label, unit, fmt) in _PAIRED_LABELS.items():
        f: PairedFigureDoc | None = figures.get(key)
        if f is None:
            out.append(f"| {label} | 0 | n/a | n/a | n/a | n/a | n/a |")
            continue
        num = fmt.format
        ci = f"{num(f.ci95.lower)} to {num(f.ci95.upper)}{unit}" if f.ci95 else "n/a"
        relative = f"{f.relative * 100:+.1f}%" if f.relative is not None else "n/a"
        out.append(
            f"| {label} | {f.cases} | {num(f.control)}{unit} | {num(f.candidate)}{unit} | "
            f"{'+' if f.difference >= 0 else ''}{num(f.difference)}{unit} | {ci} | {relative} |"
        )
    return out


def _pareto_lines(pareto: ParetoDoc | None) -> list[str]:
    """``pareto``: the session's variants, pass rate vs cost vs p95 latency."""
    if pareto is None or not pareto.rows:
        return []
    basis = "estimated cost" if pareto.cost_basis == "estimatedCost" else "tokens"
    out = [
        "",
        f"Pareto table (pass rate higher, {basis} and p95 latency lower; a variant is on the "
        "front when no other is at least as good on all three and better on one; an unknown "
        "figure compares with nothing):",
        "",
        f"| Variant | Model | Pass rate | {basis.capitalize()} | p95 | On the front |",
        "|---|---|---|---|---|---|",
    ]
    for row in pareto.rows:
        front = (
            "yes"
            if row.front
            else "no (dominated by " + ", ".join(md_escape(v) for v in row.dominated_by) + ")"
        )
        out.append(
            f"| {md_escape(row.variant)} | {_model(row.model)} | {_pct(row.pass_rate)} | "
            f"{_na(row.cost)} | {_na(row.p95_ms, ' ms')} | {front} |"
        )
    return out


#: One letter per attempt status in the matrix (the legend is printed above the table).
_STATUS_LETTER = {"PASS": "P", "FAIL": "F", "ERROR": "E", "SKIPPED": "S"}


def matrix_cell_text(cell: MatrixCellDoc) -> str:
    """One matrix cell as report.md and the HTML pages show it: ``P F · 12 ms · 300 tok``."""
    if not cell.statuses:
        return "not run"
    letters = " ".join(_STATUS_LETTER.get(s, "?") for s in cell.statuses)
    latency = f"{cell.latency_ms:.0f} ms" if cell.latency_ms is not None else "n/a"
    tokens = f"{cell.total_tokens:.0f} tok" if cell.total_tokens is not None else "n/a"
    return f"{letters} · {latency} · {tokens}"


def _cell_with_excerpt(cell: MatrixCellDoc) -> str:
    text = md_escape(matrix_cell_text(cell))
    if not cell.excerpt:
        return text
    cut = cell.excerpt[:_CELL_EXCERPT] + ("…" if len(cell.excerpt) > _CELL_EXCERPT else "")
    return f"{text} · “{md_escape(cut)}”"


def _matrix_lines(matrix: VariantMatrixDoc | None) -> list[str]:
    """``matrix``: one row per case, one column per variant."""
    if matrix is None or not matrix.rows:
        return []
    out = [
        "",
        "Rows × variants (flipped cases first, then cases not passed everywhere; each cell: "
        "the attempts in order, P pass, F fail, E error, S skipped, then the mean latency and "
        "tokens of the graded attempts):",
        "",
        "| Case | " + " | ".join(md_escape(v) for v in matrix.variants) + " |",
        "|---" * (len(matrix.variants) + 1) + "|",
    ]
    for row in matrix.rows:
        cells = [_cell_with_excerpt(cell) for cell in row.cells]
        out.append(f"| {md_escape(row.case_id)} | " + " | ".join(cells) + " |")
    if matrix.more:
        out.append("")
        out.append(f"... and {matrix.more} more cases, not shown (run.json lists every case).")
    return out


def _na(value: int | float | None, unit: str = "") -> str:
    return f"{value}{unit}" if value is not None else "n/a"


def _model(model: str | None) -> str:
    """A variant's model; a fixture-mode run asks none (its answers are recorded)."""
    return md_escape(model) if model else "recorded answers"
