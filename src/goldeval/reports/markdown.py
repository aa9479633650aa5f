"""report.md: the reference's eval-report layout (section 8), readable in a CI job summary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from goldeval.core.textsafe import one_line
from goldeval.reports.labels import RATE_LABELS, shown_rates, shows_weighted_score
from goldeval.reports.markdown_text import md_escape
from goldeval.reports.markdown_variants import variant_lines
from goldeval.results.documents import (
    Case,
    Comparison,
    Configuration,
    IntervalDoc,
    Metrics,
    PassAtKDoc,
    RateDoc,
    RunDocument,
    TokensDoc,
)
from goldeval.results.metrics import format_rate
from goldeval.verdict.comparison import comparison_label
from goldeval.verdict.gate_label import gate_label

#: How many case ids a terminal line names before "and N more".
NAMED_CASES = 10


def _ci(ci: IntervalDoc | None) -> str:
    if ci is None:
        return ""
    return f"{ci.lower * 100:.1f}–{ci.upper * 100:.1f}%"


def _rate_ci(rate: RateDoc | None) -> str:
    return _ci(rate.ci95 if rate is not None else None)


def rate_text(rate: RateDoc | None) -> str:
    """``75.0% (3 / 4)``, or ``n/a`` when nothing was counted (results.metrics.format_rate)."""
    if rate is None or not rate.total:
        return "n/a"
    return f"{rate.hits / rate.total * 100:.1f}% ({rate.hits} / {rate.total})"


def _n(count: int | None) -> int:
    return 0 if count is None else count


def render(run: RunDocument) -> str:
    """report.md of a run (its document, typed once by whoever read or built it)."""
    m = run.metrics or Metrics()
    out: list[str] = ["# AI eval report", ""]
    out += _header_lines(run)
    out += _execution_lines(run)
    out += _metric_lines(run, m)
    out += _failure_lines(run)
    out += _stability_lines(run)
    out += _pass_at_k_lines(m.pass_at_k)
    out += variant_lines(run.variant_comparison)
    if run.comparison is not None:
        out += ["", render_comparison(run.comparison)]
    out += _gate_lines(run)
    return "\n".join(out) + "\n"


def _header_lines(run: RunDocument) -> list[str]:
    """The run's identity as bullets, then the notes a reader must see first."""
    cfg = run.configuration or Configuration()
    proto = run.protocol
    bullets = [
        ("Run", run.run_id),
        ("Status", run.status),
        ("Model", run.model or "n/a"),
        ("Judge", run.judge_model or "off"),
        ("Dataset", f"{run.dataset_version} / {run.pack_dataset_version or 'no pack'}"),
        ("Dataset hash", run.dataset_hash),
        ("Pack hash", run.pack_hash or "n/a"),
        ("Experiment", run.experiment_id or "n/a"),
        ("Config fingerprint", run.config_fingerprint),
        ("Commit", run.git_commit),
        ("Mode", cfg.mode),
        ("Provider", cfg.provider),
        ("Attempts per case", proto.attempts if proto else None),
        ("Selected cases", len(proto.selected_case_ids) if proto else 0),
        ("Duration", f"{run.as_written('duration_ms', 0)} ms"),
    ]
    out = [f"- {k}: {md_escape(v)}" for k, v in bullets]
    # Up front, where a job summary is read: what the metrics alone do not say.
    remarks = [*notices(run), *run.notes]
    if remarks:
        out += ["", "## Notes", ""]
        out += [f"- {md_escape(r)}" for r in remarks]
    return out


def _execution_lines(run: RunDocument) -> list[str]:
    executed = _n(run.cases_total) - _n(run.cases_skipped)
    quality = _n(run.attempts_passed) + _n(run.attempts_failed)
    out = ["", "## Execution", "", "| | |", "|---|---|"]
    rows = [
        ("Cases", run.cases_total),
        ("Executed", executed),
        ("Passed", run.cases_passed),
        ("Failed", run.cases_failed),
        ("Skipped", run.cases_skipped),
        ("Error", run.cases_error),
        ("Attempts", run.attempts_total),
        (
            "Attempts passed / failed / skipped / error",
            f"{run.attempts_passed} / {run.attempts_failed} / "
            f"{run.attempts_skipped} / {run.attempts_error}",
        ),
        (
            "Pass rate (of executed quality attempts)",
            format_rate({"hits": _n(run.attempts_passed), "total": quality}),
        ),
        (
            "Coverage (executed / cases)",
            format_rate({"hits": executed, "total": _n(run.cases_total)}),
        ),
    ]
    out += [f"| {k} | {v} |" for k, v in rows]
    return out


def _metric_lines(run: RunDocument, m: Metrics) -> list[str]:
    out = ["", "## Metrics", "", "| Metric | Value | Wilson 95% |", "|---|---|---|"]
    for name in shown_rates(run):
        rate = m.rate(name)
        out.append(f"| {RATE_LABELS[name]} | {rate_text(rate)} | {_rate_ci(rate)} |")
    unstable_label = RATE_LABELS["unstableCaseRate"]
    out.append(f"| {unstable_label} | {rate_text(m.unstable_case_rate)} | |")
    for key, rate in (m.slices or {}).items():
        label = "Slice hallucination (pass rate)" if key == "hallucination" else f"Slice {key}"
        out.append(f"| {md_escape(label)} | {rate_text(rate)} | |")
    for key, rate in (m.graders or {}).items():
        out.append(f"| Grader {md_escape(key)} | {rate_text(rate)} | {_rate_ci(rate)} |")
    for key, soft in (m.soft_scores or {}).items():
        out.append(
            f"| Soft {md_escape(key)} (mean score) | {soft['mean']:.3f} ({soft['samples']}) | |"
        )
    ws = m.weighted_score
    if shows_weighted_score(run):
        out.append(f"| Weighted (secondary) | {'n/a' if ws is None else f'{ws:.3f}'} | |")
        out.append(f"| Weighted formula | {md_escape(m.weighted_score_formula or 'n/a')} | |")
    lat = m.latency or {}
    out.append(
        f"| Latency min/avg/median/p95/max | {lat.get('minMs', 0)} / {lat.get('avgMs', 0)} / "
        f"{lat.get('medianMs', 0)} / {lat.get('p95Ms', 0)} / {lat.get('maxMs', 0)} ms | |"
    )
    out += _live_lines(m, "| {} | {} / {} ms | |")
    tokens = m.tokens
    # An empty ``tokens: {}`` shows no row, as a run without tokens.
    if tokens is not None and tokens.dump():
        note = _estimate_note(tokens)
        out.append(
            f"| Tokens in/out/total | {tokens.as_written('input_tokens', 'n/a')} / "
            f"{tokens.as_written('output_tokens', 'n/a')} / "
            f"{tokens.as_written('total_tokens', 'n/a')} | {note} |"
        )
        if "estimated_cost" in tokens.model_fields_set:
            out.append(f"| Estimated cost | {tokens.estimated_cost:.4f} | {note} |")
    return out


def _failure_lines(run: RunDocument) -> list[str]:
    out = ["", "## Failures / taxonomy", ""]
    failures = [c for c in run.cases if c.status in ("FAIL", "ERROR")]
    if not failures:
        out.append("_None._")
    for c in failures:
        sr = c.success_rate
        out.append(
            f"- **{md_escape(c.case_id)}** {c.status} {sr.hits if sr else 0} / "
            f"{sr.total if sr else 0}: {md_escape(_failure_detail(c))}"
        )
        out += _prompt_lines(c)
    return out


def _failure_detail(c: Case) -> str:
    """What a failed case shows first: its taxonomy, else its error, else the first grader
    violation, else what its retrieval missed."""
    if c.taxonomy:
        t = c.taxonomy[0]
        return f"{t['category']}/{t['severity']}/{t['grader']}: {t['reason']}"
    if c.errors:
        return c.errors[0]
    for a in c.attempts:
        for g in a.graders:
            if not g.get("passed") and g.get("violations"):
                v = g["violations"][0]
                return f"{v['category']}/{v['severity']}/{v['grader']}: {v['reason']}"
    r = c.retrieval
    if r and r.get("applicable"):
        return f"retrieval: missing {r.get('missing')}, unexpected {r.get('unexpected')}"
    return ""


def _stability_lines(run: RunDocument) -> list[str]:
    out = ["", "## Stability", ""]
    multi = [
        (c.case_id, c.success_rate)
        for c in run.cases
        if c.success_rate is not None and c.success_rate.total >= 2
    ]
    if not multi:
        out.append("_(single attempt)_")
    else:
        out += ["| Case | k/N | Unstable |", "|---|---|---|"]
        for case_id, sr in multi:
            unstable = 0 < sr.hits < sr.total
            out.append(
                f"| {md_escape(case_id)} | {sr.hits}/{sr.total} | {'yes' if unstable else 'no'} |"
            )
    return out


def _gate_lines(run: RunDocument) -> list[str]:
    out = ["", "## Quality gate", ""]
    gate = run.quality_gate
    if gate is None:
        out.append("_Not applied._")
    else:
        # The word every surface shows: PASS only for a run that exits 0 (gate_label).
        out.append(f"**{md_escape(gate_label(run))}**")
        out.append("")
        for rule in gate.rules:
            mark = "PASS" if rule.passed else "FAIL"
            out.append(f"- {mark} `{md_escape(rule.name)}` ({rule.kind}): {md_escape(rule.detail)}")
    decision = run.exit_decision
    if decision is not None:
        out += ["", f"Exit status {decision.code}: {md_escape(decision.reason)}"]
    return out


def _pass_at_k_lines(table: PassAtKDoc | None) -> list[str]:
    """``metrics.passAtK`` as a table (runs with more than one attempt per case)."""
    if table is None or not table.by_k:
        return []
    out = [
        "",
        "## Repeated attempts: pass@k and pass^k",
        "",
        "pass@k: at least one of k attempts passes; pass^k: all k pass (means over cases, "
        f"95% case bootstrap, {table.resamples} resamples, seed {table.seed}).",
        "",
        "| k | Cases | pass@k | 95% | pass^k | 95% |",
        "|---|---|---|---|---|---|",
    ]
    for row in table.by_k:
        out.append(
            f"| {row.k} | {row.cases} | {row.pass_at_k * 100:.1f}% | "
            f"{_ci(row.pass_at_k_ci95)} | {row.pass_hat_k * 100:.1f}% | "
            f"{_ci(row.pass_hat_k_ci95)} |"
        )
    return out


#: How much of one rendered message report.md shows.
PROMPT_SHOWN = 600


def _prompt_lines(case: Case) -> list[str]:
    """The messages sent for a failing case that used a template or a conversation (from its
    first failing attempt), one indented line per turn, long turns shortened."""
    for a in case.attempts:
        messages = a.prompt_messages
        if not messages:
            continue
        lines = []
        for turn in messages:
            content = turn.get("content")
            if isinstance(content, list):
                content = " ".join(
                    p.get("text", "") if p.get("type") == "text" else f"[image {p.get('path')}]"
                    for p in content
                )
            text = one_line(str(content or ""))
            if len(text) > PROMPT_SHOWN:
                text = text[:PROMPT_SHOWN] + f"... ({len(text) - PROMPT_SHOWN} more characters)"
            calls = turn.get("tool_calls")
            if calls:
                text += " " + md_escape(
                    "tool calls: " + ", ".join(str(c.get("name")) for c in calls)
                )
            lines.append(f"  - `{md_escape(turn.get('role'))}`: {md_escape(text)}")
        return ["  - messages sent:", *["  " + line for line in lines]]
    return []


def render_comparison(cmp: Comparison) -> str:
    """The Regression section of the run's comparison (``goldeval compare`` types a fresh
    one's dump first)."""
    label, why = comparison_label(cmp)
    out = ["## Regression", "", f"- Decision: **{label}**"]
    if why:
        out.append(f"- {md_escape(why)}")
    for reason in cmp.invalid_reasons:
        out.append(f"- Invalid: {md_escape(reason)}")
    if cmp.decision == "COMPARISON_INVALID":
        return "\n".join(out)
    counts = cmp.counts
    out.append(
        "- Unchanged pass / fail: "
        f"{counts.get('UNCHANGED_PASS', 0)} / {counts.get('UNCHANGED_FAIL', 0)}; "
        f"new failures {counts.get('NEW_FAILURE', 0)}, recovered {counts.get('RECOVERED', 0)}"
    )
    mc = cmp.mcnemar or {}
    p = mc.get("pValue")
    out.append(
        f"- McNemar n01={mc.get('n01', 0)} n10={mc.get('n10', 0)} "
        f"{f'p≈{p:.3f}' if p is not None else mc.get('note', '')} (informational, not a gate)"
    )
    for diff in cmp.configuration_differences:
        out.append(f"- Config difference: {md_escape(diff)}")
    out += ["", "| Metric | Baseline | Candidate | Delta | Direction |", "|---|---|---|---|---|"]
    for d in cmp.metrics:

        def fmt(v: Any, latency: bool = d.get("name") == "latencyAvgMs") -> str:
            if v is None:
                return "n/a"
            return f"{v:.0f} ms" if latency else f"{v * 100:.1f}%"

        delta = d.get("delta")
        if delta is None:
            dtext = "n/a"
        elif d.get("name") == "latencyAvgMs":
            dtext = f"{delta:+.0f} ms"
        else:
            dtext = f"{delta * 100:+.1f}%"
        out.append(
            f"| {one_line(d.get('name'))} | {fmt(d.get('baseline'))} | {fmt(d.get('candidate'))} | "
            f"{dtext} | {d.get('direction')} |"
        )
    sections = [
        ("New failures", "NEW_FAILURE"),
        ("Infrastructure errors (not quality regressions)", "NEW_ERROR"),
        ("Recovered", "RECOVERED"),
        ("Added", "ADDED"),
        ("Removed", "REMOVED"),
        ("Unchanged pass", "UNCHANGED_PASS"),
        ("Unchanged fail", "UNCHANGED_FAIL"),
    ]
    for title, cls in sections:
        ids = [c["caseId"] for c in cmp.cases if c.get("class") == cls]
        out += ["", f"### {title}", ""]
        out.append(", ".join(md_escape(i) for i in ids) if ids else "_None._")
    return "\n".join(out)


def summary_table(run: RunDocument) -> list[str]:
    """Short metrics table for pytest's terminal summary."""
    m = run.metrics or Metrics()
    lines = []
    for name in shown_rates(run):
        lines.append(f"  {RATE_LABELS[name]:<26} {rate_text(m.rate(name))}")
    for key, rate in (m.graders or {}).items():
        lines.append(f"  {'grader ' + one_line(key):<26} {rate_text(rate)}")
    unstable = m.unstable_case_rate
    if unstable is not None and unstable.total:
        lines.append(f"  {RATE_LABELS['unstableCaseRate']:<26} {rate_text(unstable)}")
    lat = m.latency or {}
    lines.append(f"  {'Latency avg / p95':<26} {lat.get('avgMs', 0)} / {lat.get('p95Ms', 0)} ms")
    lines += _live_lines(m, "  {:<26} {} / {} ms")
    return lines


def _estimate_note(tokens: TokensDoc) -> str:
    """What the token figures are when some of them are estimates (no usage reported)."""
    if tokens.estimated is not True:
        return ""
    n = tokens.estimated_attempts
    which = f"{n} attempt{'' if n == 1 else 's'}" if n is not None else "some attempts"
    return f"estimated for {which}: no usage reported, counted as characters / 4"


def _live_lines(m: Metrics, form: str) -> list[str]:
    """Queue wait (before sending, apart from latency) and time to first token, when recorded."""
    out = []
    for stats, label in (
        (m.queue_wait, "Queue wait avg / p95"),
        (m.time_to_first_token, "TTFT avg / p95"),
    ):
        if stats:
            out.append(form.format(label, stats.get("avgMs", 0), stats.get("p95Ms", 0)))
    return out


def name_cases(ids: Sequence[Any], count: int | None = None, limit: int = NAMED_CASES) -> str:
    """``a, b, c`` for up to ``limit`` ids, then ``and N more`` (``count``: the full number,
    when ``ids`` holds only the first few)."""
    total = len(ids) if count is None else max(count, len(ids))
    shown = [one_line(i) for i in list(ids)[:limit]]
    more = total - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


#: Case classes named in the terminal under the baseline line, in this order.
NAMED_CLASSES = (
    ("new failures", "NEW_FAILURE"),
    ("new infrastructure errors (not quality regressions)", "NEW_ERROR"),
    ("recovered", "RECOVERED"),
)


def comparison_case_lines(cmp: Comparison) -> list[str]:
    """``new failures (3): a, b, c`` and the like, for every class with cases (none when the
    comparison is invalid: it has no case classes)."""
    if cmp.decision == "COMPARISON_INVALID":
        return []
    out = []
    for label, cls in NAMED_CLASSES:
        ids = [c.get("caseId") for c in cmp.cases if c.get("class") == cls]
        if ids:
            out.append(f"{label} ({len(ids)}): {name_cases(ids)}")
    return out


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def notices(run: RunDocument) -> list[str]:
    """What a reader must not miss besides the metrics: retries and judge outcomes (PENDING,
    judge errors), one line each, for the terminal and report.md (counts from run.metrics)."""
    m = run.metrics or Metrics()
    out: list[str] = []
    retries = m.retries or {}
    if retries.get("attempts"):
        out.append(
            f"retries: {_plural(retries['attempts'], 'attempt')} needed more than one "
            f"provider try ({_plural(retries.get('extraTries', 0), 'retry', 'retries')}): "
            f"{name_cases(retries.get('caseIds') or [], retries.get('cases'))}"
        )
    judge = m.judge
    if judge:
        line = (
            f"judge: {judge.get('accept', 0)} ACCEPT, {judge.get('reject', 0)} REJECT, "
            f"{judge.get('pending', 0)} PENDING, {_plural(judge.get('errors', 0), 'error')}"
        )
        if judge.get("pending") or judge.get("errors"):
            line += " (PENDING and errors are not in judgeAcceptRate)"
        out.append(line)
        if judge.get("pending"):
            ids = name_cases(judge.get("pendingCaseIds") or [], judge.get("pendingCases"))
            out.append(f"judge PENDING (no usable decision): {ids}")
        if judge.get("errors"):
            ids = name_cases(judge.get("errorCaseIds") or [], judge.get("errorCases"))
            out.append(f"judge errors (judge call failed; the hard verdict stands): {ids}")
    elif run.judge_errors:
        out.append(f"judge errors: {run.judge_errors} (see run.json)")
    if run.judge_self_preference and not any("self-preference" in n for n in run.notes):
        out.append(f"judge model {run.judge_model} is the generator model: self-preference risk")
    return [one_line(line) for line in out]
