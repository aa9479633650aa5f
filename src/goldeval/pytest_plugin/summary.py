"""The goldeval block of pytest's terminal summary, read from the finished run."""

from __future__ import annotations

from typing import Any

from goldeval.core.textsafe import one_line
from goldeval.pytest_plugin.state import GoldenSession
from goldeval.reports import markdown as report_md
from goldeval.reports.markdown_variants import pair_cells
from goldeval.results.documents import RunDocument, VariantComparisonDoc, typed_run
from goldeval.verdict.comparison import comparison_label


def print_summary(state: GoldenSession, tr: Any) -> None:
    """The goldeval block of pytest's terminal summary.

    Every value that can hold untrusted text (reasons, notes, paths, case lists) goes through
    goldeval.core.textsafe: an answer's escape sequences must not reach the reader's terminal.
    """

    run = state.run
    if run is None:
        if state.unrecorded_decision is not None:
            code, reason = state.unrecorded_decision
            line = f"goldeval decision: exit {code} — {reason} (nothing graded, nothing recorded)"
            tr.write_line(one_line(line), red=True, bold=True)
        return
    tr.write_sep(
        "=",
        one_line(
            f"goldeval: {run.get('datasetVersion')} "
            f"({run.get('configuration', {}).get('goldenMode')})"
        ),
    )
    tr.write_line(
        f"  cases {run['casesTotal']} (pass {run['casesPassed']}, fail {run['casesFailed']}, "
        f"skipped {run['casesSkipped']}, error {run['casesError']}); "
        f"attempts {run['attemptsTotal']}"
    )
    doc = typed_run(run)
    for line in report_md.summary_table(doc):
        tr.write_line(line)
    benchmark = getattr(state, "benchmark", None) or []
    if not benchmark:  # side by side: each run's own baseline line below
        for line in _baseline_lines(doc, run, "  "):
            tr.write_line(line)
    for run_doc in benchmark:
        bench = typed_run(run_doc)
        # A fixture-mode run asks no model: its answers are the recorded ones.
        who = f"model {bench.model}" if bench.model else "recorded answers"
        if bench.variant:
            who = f"variant {bench.variant} ({who})"
        tr.write_line(f"  {one_line(who)}:")
        for line in report_md.summary_table(bench):
            tr.write_line("  " + line)
        for line in _baseline_lines(bench, run_doc, "    "):  # a variant's own baseline
            tr.write_line(line)
    for line in _variant_lines(doc.variant_comparison):
        tr.write_line(line)
    recorded = getattr(state, "recorded", None)
    if recorded:
        for kind in ("new", "changed"):
            if recorded[kind]:
                tr.write_line(
                    f"  fixtures {kind}: {report_md.name_cases(recorded[kind], limit=10**9)}"
                    " — read them before committing"
                )
        if recorded["kept"]:
            tr.write_line(
                f"  fixtures differing but kept (pass --golden-overwrite-fixtures): "
                f"{report_md.name_cases(recorded['kept'], limit=10**9)}"
            )
    run_dir = getattr(state, "run_dir", None)
    if run_dir is not None:
        tr.write_line(f"  artifacts: {one_line(run_dir)}")
    for notice in report_md.notices(doc):
        tr.write_line(f"  {notice}")
    for note in run.get("notes") or []:
        tr.write_line(f"  note: {one_line(note)}")
    decision = run.get("exitDecision") or {}
    session = state.unrecorded_decision
    if session is not None:  # this session selected nothing: the run's decision is its own
        tr.write_line(one_line(f"  the run's own decision: exit {decision.get('code')}"))
        code, reason = session
        tr.write_line(one_line(f"goldeval decision: exit {code} — {reason}"), red=True, bold=True)
        return
    line = one_line(f"goldeval decision: exit {decision.get('code')} — {decision.get('reason')}")
    ok = decision.get("code") == 0
    tr.write_line(line, green=ok, red=not ok, bold=True)


def _variant_lines(variants: VariantComparisonDoc | None) -> list[str]:
    """The gated pair's decision, then (three variants or more) one line per pair, which is
    reported only."""
    if variants is None or not variants.reason:
        return []
    lines = [f"  variants: {one_line(variants.reason)}"]
    pairs = variants.pairs
    for pair in pairs.rows if pairs is not None and len(pairs.rows) > 1 else ():
        lines.append(f"    pair {one_line(' | '.join(pair_cells(pair)))}")
    return lines


def _baseline_lines(doc: RunDocument, run: Any, indent: str) -> list[str]:
    """The run's comparison with its baseline: label, why, invalid reasons, changed cases."""
    cmp = doc.comparison
    if cmp is None:
        return []
    baseline = run.get("baselinePath")
    label, why = comparison_label(cmp)
    lines = [
        f"{indent}baseline: {one_line(label)}"
        + (f" vs {one_line(baseline)}" if baseline else "")
        + ("" if run.get("qualityGate") else " (no gate applied)")
    ]
    lines += [f"{indent}  {one_line(text)}" for text in ([why] if why else [])]
    lines += [f"{indent}  {one_line(reason)}" for reason in cmp.invalid_reasons]
    lines += [f"{indent}  {line}" for line in report_md.comparison_case_lines(cmp)]
    return lines
