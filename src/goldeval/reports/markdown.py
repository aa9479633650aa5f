"""report.md: the reference's eval-report layout (section 8), readable in a CI job summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from goldeval.core.textsafe import one_line
from goldeval.reports.labels import RATE_LABELS, shown_rates, shows_weighted_score
from goldeval.reports.markdown_text import md_escape
from goldeval.reports.markdown_variants import variant_lines
from goldeval.results.metrics import format_rate, rate_value
from goldeval.verdict.comparison import comparison_label

#: How many case ids a terminal line names before "and N more".
NAMED_CASES = 10


def _ci(metric: Mapping[str, Any] | None) -> str:
    ci = (metric or {}).get("ci95")
    if not ci:
        return ""
    return f"{ci['lower'] * 100:.1f}–{ci['upper'] * 100:.1f}%"


def render(run: Mapping[str, Any]) -> str:
    m = run.get("metrics", {})
    out: list[str] = ["# AI eval report", ""]
    out += _header_lines(run)
    out += _execution_lines(run)
    out += _metric_lines(run, m)
    out += _failure_lines(run)
    out += _stability_lines(run)
    out += _pass_at_k_lines(m.get("passAtK"))
    out += variant_lines(run.get("variantComparison"))
    comparison = run.get("comparison")
    if comparison:
        out += ["", render_comparison(comparison)]
    out += _gate_lines(run)
    return "\n".join(out) + "\n"


def _header_lines(run: Mapping[str, Any]) -> list[str]:
    """The run's identity as bullets, then the notes a reader must see first."""
    cfg = run.get("configuration", {})
    proto = run.get("protocol", {})
    bullets = [
        ("Run", run.get("runId")),
        ("Status", run.get("status")),
        ("Model", run.get("model") or "n/a"),
        ("Judge", run.get("judgeModel") or "off"),
        ("Dataset", f"{run.get('datasetVersion')} / {run.get('packDatasetVersion') or 'no pack'}"),
        ("Dataset hash", run.get("datasetHash")),
        ("Pack hash", run.get("packHash") or "n/a"),
        ("Experiment", run.get("experimentId") or "n/a"),
        ("Config fingerprint", run.get("configFingerprint")),
        ("Commit", run.get("gitCommit")),
        ("Mode", cfg.get("mode")),
        ("Provider", cfg.get("provider")),
        ("Attempts per case", proto.get("attempts")),
        ("Selected cases", len(proto.get("selectedCaseIds") or [])),
        ("Duration", f"{run.get('durationMs', 0)} ms"),
    ]
    out = [f"- {k}: {md_escape(v)}" for k, v in bullets]
    # Up front, where a job summary is read: what the metrics alone do not say.
    remarks = [*notices(run), *(str(n) for n in run.get("notes") or [])]
    if remarks:
        out += ["", "## Notes", ""]
        out += [f"- {md_escape(r)}" for r in remarks]
    return out


def _execution_lines(run: Mapping[str, Any]) -> list[str]:
    executed = run.get("casesTotal", 0) - run.get("casesSkipped", 0)
    quality = run.get("attemptsPassed", 0) + run.get("attemptsFailed", 0)
    out = ["", "## Execution", "", "| | |", "|---|---|"]
    rows = [
        ("Cases", run.get("casesTotal")),
        ("Executed", executed),
        ("Passed", run.get("casesPassed")),
        ("Failed", run.get("casesFailed")),
        ("Skipped", run.get("casesSkipped")),
        ("Error", run.get("casesError")),
        ("Attempts", run.get("attemptsTotal")),
        (
            "Attempts passed / failed / skipped / error",
            f"{run.get('attemptsPassed')} / {run.get('attemptsFailed')} / "
            f"{run.get('attemptsSkipped')} / {run.get('attemptsError')}",
        ),
        (
            "Pass rate (of executed quality attempts)",
            format_rate({"hits": run.get("attemptsPassed", 0), "total": quality}),
        ),
        (
            "Coverage (executed / cases)",
            format_rate({"hits": executed, "total": run.get("casesTotal", 0)}),
        ),
    ]
    out += [f"| {k} | {v} |" for k, v in rows]
    return out


def _metric_lines(run: Mapping[str, Any], m: Mapping[str, Any]) -> list[str]:
    out = ["", "## Metrics", "", "| Metric | Value | Wilson 95% |", "|---|---|---|"]
    for name in shown_rates(run):
        out.append(f"| {RATE_LABELS[name]} | {format_rate(m.get(name))} | {_ci(m.get(name))} |")
    unstable_label = RATE_LABELS["unstableCaseRate"]
    out.append(f"| {unstable_label} | {format_rate(m.get('unstableCaseRate'))} | |")
    for key, rate in (m.get("slices") or {}).items():
        label = "Slice hallucination (pass rate)" if key == "hallucination" else f"Slice {key}"
        out.append(f"| {md_escape(label)} | {format_rate(rate)} | |")
    for key, rate in (m.get("graders") or {}).items():
        out.append(f"| Grader {md_escape(key)} | {format_rate(rate)} | {_ci(rate)} |")
    for key, soft in (m.get("softScores") or {}).items():
        out.append(
            f"| Soft {md_escape(key)} (mean score) | {soft['mean']:.3f} ({soft['samples']}) | |"
        )
    ws = m.get("weightedScore")
    if shows_weighted_score(run):
        out.append(f"| Weighted (secondary) | {'n/a' if ws is None else f'{ws:.3f}'} | |")
        out.append(f"| Weighted formula | {md_escape(m.get('weightedScoreFormula') or 'n/a')} | |")
    lat = m.get("latency") or {}
    out.append(
        f"| Latency min/avg/median/p95/max | {lat.get('minMs', 0)} / {lat.get('avgMs', 0)} / "
        f"{lat.get('medianMs', 0)} / {lat.get('p95Ms', 0)} / {lat.get('maxMs', 0)} ms | |"
    )
    out += _live_lines(m, "| {} | {} / {} ms | |")
    tokens = m.get("tokens") or {}
    if tokens:
        note = _estimate_note(tokens)
        out.append(
            f"| Tokens in/out/total | {tokens.get('inputTokens', 'n/a')} / "
            f"{tokens.get('outputTokens', 'n/a')} / {tokens.get('totalTokens', 'n/a')} | {note} |"
        )
        if "estimatedCost" in tokens:
            out.append(f"| Estimated cost | {tokens['estimatedCost']:.4f} | {note} |")
    return out


def _failure_lines(run: Mapping[str, Any]) -> list[str]:
    out = ["", "## Failures / taxonomy", ""]
    failures = [c for c in run.get("cases", []) if c.get("status") in ("FAIL", "ERROR")]
    if not failures:
        out.append("_None._")
    for c in failures:
        sr = c.get("successRate") or {}
        out.append(
            f"- **{md_escape(c['caseId'])}** {c['status']} {sr.get('hits', 0)} / "
            f"{sr.get('total', 0)}: {md_escape(_failure_detail(c))}"
        )
        out += _prompt_lines(c)
    return out


def _failure_detail(c: Mapping[str, Any]) -> str:
    """What a failed case shows first: its taxonomy, else its error, else the first grader
    violation, else what its retrieval missed."""
    if c.get("taxonomy"):
        t = c["taxonomy"][0]
        return f"{t['category']}/{t['severity']}/{t['grader']}: {t['reason']}"
    if c.get("errors"):
        return str(c["errors"][0])
    for a in c.get("attempts", []):
        for g in a.get("graders", []):
            if not g.get("passed") and g.get("violations"):
                v = g["violations"][0]
                return f"{v['category']}/{v['severity']}/{v['grader']}: {v['reason']}"
    if (c.get("retrieval") or {}).get("applicable"):
        r = c["retrieval"]
        return f"retrieval: missing {r.get('missing')}, unexpected {r.get('unexpected')}"
    return ""


def _stability_lines(run: Mapping[str, Any]) -> list[str]:
    out = ["", "## Stability", ""]
    multi = [c for c in run.get("cases", []) if (c.get("successRate") or {}).get("total", 0) >= 2]
    if not multi:
        out.append("_(single attempt)_")
    else:
        out += ["| Case | k/N | Unstable |", "|---|---|---|"]
        for c in multi:
            sr = c["successRate"]
            unstable = 0 < sr["hits"] < sr["total"]
            out.append(
                f"| {md_escape(c['caseId'])} | {sr['hits']}/{sr['total']} | "
                f"{'yes' if unstable else 'no'} |"
            )
    return out


def _gate_lines(run: Mapping[str, Any]) -> list[str]:
    out = ["", "## Quality gate", ""]
    gate = run.get("qualityGate")
    if not gate:
        out.append("_Not applied._")
    else:
        out.append(f"**{gate.get('verdict')}**")
        out.append("")
        for rule in gate.get("rules", []):
            mark = "PASS" if rule.get("passed") else "FAIL"
            out.append(
                f"- {mark} `{md_escape(rule.get('name'))}` ({rule.get('kind')}): "
                f"{md_escape(rule.get('detail'))}"
            )
    decision = run.get("exitDecision")
    if decision:
        out += ["", f"Exit status {decision.get('code')}: {md_escape(decision.get('reason'))}"]
    return out


def _pass_at_k_lines(table: Mapping[str, Any] | None) -> list[str]:
    """``metrics.passAtK`` as a table (runs with more than one attempt per case)."""
    if not table or not table.get("byK"):
        return []
    out = [
        "",
        "## Repeated attempts: pass@k and pass^k",
        "",
        "pass@k: at least one of k attempts passes; pass^k: all k pass (means over cases, "
        f"95% case bootstrap, {table.get('resamples')} resamples, seed {table.get('seed')}).",
        "",
        "| k | Cases | pass@k | 95% | pass^k | 95% |",
        "|---|---|---|---|---|---|",
    ]
    for row in table["byK"]:
        out.append(
            f"| {row['k']} | {row['cases']} | {row['passAtK'] * 100:.1f}% | "
            f"{_ci({'ci95': row.get('passAtKCi95')})} | {row['passHatK'] * 100:.1f}% | "
            f"{_ci({'ci95': row.get('passHatKCi95')})} |"
        )
    return out


#: How much of one rendered message report.md shows.
PROMPT_SHOWN = 600


def _prompt_lines(case: Mapping[str, Any]) -> list[str]:
    """The messages sent for a failing case that used a template or a conversation (from its
    first failing attempt), one indented line per turn, long turns shortened."""
    for a in case.get("attempts") or ():
        messages = a.get("promptMessages")
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


def render_comparison(cmp: Mapping[str, Any]) -> str:
    label, why = comparison_label(cmp)
    out = ["## Regression", "", f"- Decision: **{label}**"]
    if why:
        out.append(f"- {md_escape(why)}")
    for reason in cmp.get("invalidReasons") or []:
        out.append(f"- Invalid: {md_escape(reason)}")
    if cmp.get("decision") == "COMPARISON_INVALID":
        return "\n".join(out)
    counts = cmp.get("counts") or {}
    out.append(
        "- Unchanged pass / fail: "
        f"{counts.get('UNCHANGED_PASS', 0)} / {counts.get('UNCHANGED_FAIL', 0)}; "
        f"new failures {counts.get('NEW_FAILURE', 0)}, recovered {counts.get('RECOVERED', 0)}"
    )
    mc = cmp.get("mcnemar") or {}
    p = mc.get("pValue")
    out.append(
        f"- McNemar n01={mc.get('n01', 0)} n10={mc.get('n10', 0)} "
        f"{f'p≈{p:.3f}' if p is not None else mc.get('note', '')} (informational, not a gate)"
    )
    for diff in cmp.get("configurationDifferences") or []:
        out.append(f"- Config difference: {md_escape(diff)}")
    out += ["", "| Metric | Baseline | Candidate | Delta | Direction |", "|---|---|---|---|---|"]
    for d in cmp.get("metrics") or []:

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
        ids = [c["caseId"] for c in cmp.get("cases") or [] if c.get("class") == cls]
        out += ["", f"### {title}", ""]
        out.append(", ".join(md_escape(i) for i in ids) if ids else "_None._")
    return "\n".join(out)


def summary_table(run: Mapping[str, Any]) -> list[str]:
    """Short metrics table for pytest's terminal summary."""
    m = run.get("metrics", {})
    lines = []
    for name in shown_rates(run):
        lines.append(f"  {RATE_LABELS[name]:<26} {format_rate(m.get(name))}")
    for key, rate in (m.get("graders") or {}).items():
        lines.append(f"  {'grader ' + one_line(key):<26} {format_rate(rate)}")
    unstable = m.get("unstableCaseRate")
    if rate_value(unstable) is not None:
        lines.append(f"  {RATE_LABELS['unstableCaseRate']:<26} {format_rate(unstable)}")
    lat = m.get("latency") or {}
    lines.append(f"  {'Latency avg / p95':<26} {lat.get('avgMs', 0)} / {lat.get('p95Ms', 0)} ms")
    lines += _live_lines(m, "  {:<26} {} / {} ms")
    return lines


def _estimate_note(tokens: dict[str, Any]) -> str:
    """What the token figures are when some of them are estimates (no usage reported)."""
    if tokens.get("estimated") is not True:
        return ""
    n = tokens.get("estimatedAttempts")
    which = f"{n} attempt{'' if n == 1 else 's'}" if isinstance(n, int) else "some attempts"
    return f"estimated for {which}: no usage reported, counted as characters / 4"


def _live_lines(m: Mapping[str, Any], form: str) -> list[str]:
    """Queue wait (before sending, apart from latency) and time to first token, when recorded."""
    out = []
    for key, label in (
        ("queueWait", "Queue wait avg / p95"),
        ("timeToFirstToken", "TTFT avg / p95"),
    ):
        stats = m.get(key)
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


def comparison_case_lines(cmp: Mapping[str, Any]) -> list[str]:
    """``new failures (3): a, b, c`` and the like, for every class with cases (none when the
    comparison is invalid: it has no case classes)."""
    if cmp.get("decision") == "COMPARISON_INVALID":
        return []
    out = []
    for label, cls in NAMED_CLASSES:
        ids = [c.get("caseId") for c in cmp.get("cases") or [] if c.get("class") == cls]
        if ids:
            out.append(f"{label} ({len(ids)}): {name_cases(ids)}")
    return out


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def notices(run: Mapping[str, Any]) -> list[str]:
    """What a reader must not miss besides the metrics: retries and judge outcomes (PENDING,
    judge errors), one line each, for the terminal and report.md (counts from run.metrics)."""
    m = run.get("metrics") or {}
    out: list[str] = []
    retries = m.get("retries") or {}
    if retries.get("attempts"):
        out.append(
            f"retries: {_plural(retries['attempts'], 'attempt')} needed more than one "
            f"provider try ({_plural(retries.get('extraTries', 0), 'retry', 'retries')}): "
            f"{name_cases(retries.get('caseIds') or [], retries.get('cases'))}"
        )
    judge = m.get("judge")
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
    elif run.get("judgeErrors"):
        out.append(f"judge errors: {run['judgeErrors']} (see run.json)")
    notes = [str(n) for n in run.get("notes") or []]
    if run.get("judgeSelfPreference") and not any("self-preference" in n for n in notes):
        out.append(
            f"judge model {run.get('judgeModel')} is the generator model: self-preference risk"
        )
    return [one_line(line) for line in out]
