"""pytest-html glue (``--html=report.html --self-contained-html``): data only, all escaped.

* ``pytest_html_results_summary`` puts the golden run at the top of the summary: dataset and
  protocol, the metrics with their Wilson intervals, the deltas against the baseline, the
  per-case classes and the gate decision with its rules. The run document is ``state.run``,
  built by the controller's ``tryfirst`` ``pytest_sessionfinish``, before pytest-html's
  ``trylast`` one calls the summary hooks.
* A ``pytest_runtest_makereport`` wrapper appends to ``report.extras`` an expandable section
  per attempt: prompt, answer, what was retrieved, violations, the judge's reasons.

Every value that reaches the page goes through :func:`html.escape`: answers and prompts are
untrusted text. The rendering functions are pure and shared with :mod:`goldeval.reports.site`.
"""

from __future__ import annotations

import html
import json
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from goldeval.core.rates import RATE_NAMES
from goldeval.core.textsafe import safe_text
from goldeval.reports.markdown import RATE_LABELS as REPORT_LABELS

if TYPE_CHECKING:
    from goldeval.pytest_plugin.state import GoldenSession

RATE_LABELS: dict[str, str] = {**REPORT_LABELS, "unstableCaseRate": "Unstable cases"}
MAX_TEXT = 50_000

STYLE = """
.goldeval-summary{margin:0 0 1em 0}
.goldeval-summary table,.goldeval-attempt table{border-collapse:collapse;margin:.3em 0 .8em 0}
.goldeval-summary th,.goldeval-summary td,.goldeval-attempt th,.goldeval-attempt td{
border:1px solid #ccc;padding:2px 8px;text-align:left;vertical-align:top}
.goldeval-summary th,.goldeval-attempt th{background:#f2f2f2}
.goldeval-pass{color:#1a7f37;font-weight:bold}
.goldeval-fail{color:#cf222e;font-weight:bold}
.goldeval-error{color:#9a6700;font-weight:bold}
.goldeval-skipped{color:#6e7781;font-weight:bold}
.goldeval-attempt pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;
padding:6px;max-height:30em;overflow:auto}
.goldeval-attempt summary{cursor:pointer;font-weight:bold}
"""


def esc(value: Any) -> str:
    """Escape any value for HTML text or a quoted attribute; ``None`` reads ``n/a``.

    Control, C1 and bidi characters are escaped visibly first (goldeval.core.textsafe): HTML
    escaping alone leaves a U+202E override free to reorder what the reviewer reads, and a
    copy from the page would carry raw escape sequences into a terminal.
    """
    return html.escape(safe_text("n/a" if value is None else value), quote=True)


def _clip(text: str) -> str:
    if len(text) <= MAX_TEXT:
        return text
    return text[:MAX_TEXT] + f"\n… ({len(text) - MAX_TEXT} more characters not shown)"


def status_class(status: Any) -> str:
    """CSS class for a PASS/FAIL/ERROR/SKIPPED-like word (a fixed set, never user text)."""
    word = str(status).upper()
    if word in (
        "PASS",
        "PASSED",
        "NO_REGRESSION",
        "IMPROVEMENT",
        "UNCHANGED_PASS",
        "RECOVERED",
        "IMPROVED",
        "COMPLETED",
    ):
        return "goldeval-pass"
    if word in (
        "FAIL",
        "FAILED",
        "REGRESSION",
        "NEW_FAILURE",
        "UNCHANGED_FAIL",
        "REGRESSED",
        "COMPARISON_INVALID",
    ):
        return "goldeval-fail"
    if word in ("ERROR", "NEW_ERROR", "UNCHANGED_ERROR", "INTERRUPTED", "INCOMPLETE"):
        return "goldeval-error"
    return "goldeval-skipped"


def badge(status: Any) -> str:
    return f'<span class="{status_class(status)}">{esc(status)}</span>'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], css: str = "") -> str:
    """A table; ``headers`` are escaped here, cells must already be escaped HTML."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    cls = f' class="{esc(css)}"' if css else ""
    return f"<table{cls}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def fmt_pct(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "n/a"
    return f"{value * 100:.1f}%"


def fmt_ci(metric: Mapping[str, Any] | None) -> str:
    ci = (metric or {}).get("ci95")
    if not ci or ci.get("lower") is None or ci.get("upper") is None:
        return "n/a"
    return f"{ci['lower'] * 100:.1f}% – {ci['upper'] * 100:.1f}%"


def rate_of(metric: Mapping[str, Any] | None) -> float | None:
    if not metric:
        return None
    rate = metric.get("rate")
    if isinstance(rate, (int, float)):
        return float(rate)
    total = metric.get("total") or 0
    return (metric.get("hits") or 0) / total if total else None


def protocol_table(run: Mapping[str, Any]) -> str:
    p = run.get("protocol") or {}
    cfg = run.get("configuration") or {}
    rows = [
        ("Run", run.get("runId")),
        ("Status", run.get("status")),
        ("Dataset", p.get("datasetId") or run.get("datasetVersion")),
        ("Dataset hash", p.get("datasetHash") or run.get("datasetHash")),
        ("Pack", p.get("packId") or run.get("packDatasetVersion")),
        ("Pack hash", p.get("packHash") or run.get("packHash")),
        ("Mode", f"{p.get('mode')} ({cfg.get('goldenMode', 'n/a')})"),
        ("Provider / model", f"{cfg.get('provider', 'n/a')} / {p.get('model') or 'n/a'}"),
        ("Attempts per case", p.get("attempts")),
        ("Selected cases", len(p.get("selectedCaseIds") or [])),
        ("Grader config hash", p.get("graderConfigHash")),
    ]
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)
    return f'<table class="goldeval-protocol"><tbody>{body}</tbody></table>'


def metrics_table(run: Mapping[str, Any]) -> str:
    metrics = run.get("metrics") or {}
    names = [*RATE_NAMES, "unstableCaseRate"]
    names += [f"graders.{g}" for g in sorted(metrics.get("graders") or {})]
    rows = []
    for name in names:
        if name.startswith("graders."):
            metric = (metrics.get("graders") or {}).get(name[len("graders.") :])
            label = f"Grader {name[len('graders.') :]}"
        else:
            metric = metrics.get(name)
            label = RATE_LABELS.get(name, name)
        if metric is None:
            continue
        rows.append(
            (
                f"{esc(label)} <small>({esc(name)})</small>",
                esc(fmt_pct(rate_of(metric))),
                f"{esc(metric.get('hits', 0))} / {esc(metric.get('total', 0))}",
                esc(fmt_ci(metric)),
            )
        )
    return table(("Metric", "Rate", "Hits / total", "Wilson 95% CI"), rows, "goldeval-metrics")


def _fmt_delta_value(name: str, value: Any, signed: bool = False) -> str:
    if not isinstance(value, (int, float)):
        return "n/a"
    if name == "latencyAvgMs":
        return f"{value:+.0f} ms" if signed else f"{value:.0f} ms"
    return f"{value * 100:+.1f} pp" if signed else f"{value * 100:.1f}%"


def comparison_html(run: Mapping[str, Any]) -> str:
    cmp = run.get("comparison")
    if not cmp:
        return "<p>No baseline comparison (no baseline found or a baseline capture run).</p>"
    parts = [
        f"<p>Decision: {badge(cmp.get('decision'))}"
        + (f" vs <code>{esc(run.get('baselinePath'))}</code>" if run.get("baselinePath") else "")
        + "</p>"
    ]
    reasons = cmp.get("invalidReasons") or []
    if reasons:
        parts.append("<ul>" + "".join(f"<li>{esc(r)}</li>" for r in reasons) + "</ul>")
    rows = []
    for d in cmp.get("metrics") or []:
        name = str(d.get("name"))
        rows.append(
            (
                esc(name),
                esc(_fmt_delta_value(name, d.get("baseline"))),
                esc(_fmt_delta_value(name, d.get("candidate"))),
                esc(_fmt_delta_value(name, d.get("delta"), signed=True)),
                badge(d.get("direction")),
            )
        )
    if rows:
        parts.append(
            table(
                ("Metric", "Baseline", "Candidate", "Delta", "Direction"), rows, "goldeval-deltas"
            )
        )
    return "".join(parts)


def cases_table(run: Mapping[str, Any]) -> str:
    classes = {
        str(c.get("caseId")): c.get("class")
        for c in (run.get("comparison") or {}).get("cases") or []
    }
    rows = []
    for case in run.get("cases") or []:
        rate = case.get("successRate") or {}
        case_id = str(case.get("caseId"))
        cls = classes.pop(case_id, None)
        rows.append(
            (
                f"<code>{esc(case_id)}</code>",
                badge(case.get("status")),
                f"{esc(rate.get('hits', 0))} / {esc(rate.get('total', 0))}",
                badge(cls) if cls else "n/a",
            )
        )
    for case_id, cls in classes.items():  # in the baseline only (REMOVED)
        rows.append((f"<code>{esc(case_id)}</code>", "n/a", "n/a", badge(cls)))
    return table(("Case", "Status", "Attempts passed", "Class vs baseline"), rows, "goldeval-cases")


def gate_html(run: Mapping[str, Any]) -> str:
    gate = run.get("qualityGate")
    decision = run.get("exitDecision") or {}
    exit_line = ""
    if decision:
        exit_line = (
            f"<p>Exit status <strong>{esc(decision.get('code'))}</strong>: "
            f"{esc(decision.get('reason'))}</p>"
        )
    if not gate:
        return "<p>Gate: not applied.</p>" + exit_line
    rows = [
        (
            f"<code>{esc(r.get('name'))}</code>",
            esc(r.get("kind")),
            esc(r.get("detail")),
            badge("PASS" if r.get("passed") else "FAIL"),
        )
        for r in gate.get("rules") or []
    ]
    warnings = "".join(f"<li>{esc(w)}</li>" for w in gate.get("warnings") or [])
    return (
        f'<p class="goldeval-verdict">Gate verdict: {badge(gate.get("verdict"))}</p>'
        + exit_line
        + table(("Rule", "Kind", "Detail", "Result"), rows, "goldeval-gate")
        + (f"<ul>{warnings}</ul>" if warnings else "")
    )


def render_summary(run: Mapping[str, Any], anchor: str = "goldeval-summary") -> str:
    """The golden run as an HTML fragment for the top of pytest-html's summary."""
    dataset = (run.get("protocol") or {}).get("datasetId") or run.get("datasetVersion")
    gate = run.get("qualityGate") or {}
    model = (run.get("protocol") or {}).get("model")
    title = esc(dataset) + (f" · model {esc(model)}" if model else "")
    return (
        f"<style>{STYLE}</style>"
        f'<div class="goldeval-summary" id="{esc(anchor)}">'
        f"<h2>Golden evaluation: {title}</h2>"
        f"<p>Gate: {badge(gate.get('verdict') or 'not applied')} · "
        f"cases {esc(run.get('casesTotal'))} (pass {esc(run.get('casesPassed'))}, "
        f"fail {esc(run.get('casesFailed'))}, error {esc(run.get('casesError'))}, "
        f"skipped {esc(run.get('casesSkipped'))})</p>"
        "<h3>Dataset and protocol</h3>"
        + protocol_table(run)
        + "<h3>Metrics</h3>"
        + metrics_table(run)
        + "<h3>Baseline comparison</h3>"
        + comparison_html(run)
        + "<h3>Cases</h3>"
        + cases_table(run)
        + "<h3>Quality gate</h3>"
        + gate_html(run)
        + "</div>"
    )


def _items(values: Iterable[Any]) -> str:
    inner = "".join(f"<li>{esc(v)}</li>" for v in values)
    return f"<ul>{inner}</ul>" if inner else "<p>none</p>"


def _codes(values: Iterable[Any]) -> str:
    text = ", ".join(f"<code>{esc(v)}</code>" for v in values)
    return text or "none"


def render_attempt(payload: Mapping[str, Any]) -> str:
    """The expandable per-attempt section added to pytest-html's row (all escaped)."""
    case = payload.get("case") or {}
    attempt = payload.get("attempt") or {}
    status = attempt.get("status")
    is_open = " open" if status not in ("PASS", "SKIPPED") else ""
    parts = [
        f'<details class="goldeval-attempt"{is_open}>',
        f"<summary>golden case <code>{esc(attempt.get('caseId') or case.get('caseId'))}</code>"
        f" attempt {esc(attempt.get('index'))}: {badge(status)}</summary>",
    ]
    facts = [
        ("Kinds", ", ".join(str(k) for k in case.get("kinds") or []) or "none"),
        ("Tags", ", ".join(str(t) for t in case.get("tags") or []) or "none"),
        ("Model", attempt.get("model")),
        ("Duration", f"{attempt.get('durationMs', 0)} ms"),
    ]
    tokens = attempt.get("tokens") or {}
    if tokens.get("totalTokens") is not None:
        facts.append(
            ("Tokens", f"{tokens.get('inputTokens')} in / {tokens.get('outputTokens')} out")
        )
    parts.append(
        "<table><tbody>"
        + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts)
        + "</tbody></table>"
    )
    parts.append(f"<h4>Prompt</h4><pre>{esc(_clip(str(case.get('prompt') or '')))}</pre>")
    output = attempt.get("output")
    parts.append(
        "<h4>Answer</h4>"
        + (f"<pre>{esc(_clip(str(output)))}</pre>" if output is not None else "<p>no answer</p>")
    )
    retrieval = attempt.get("retrieval")
    if retrieval and retrieval.get("applicable", True):
        parts.append(
            "<h4>Retrieved</h4><table><tbody>"
            f"<tr><th>Retrieved</th><td>{_codes(retrieval.get('retrieved') or [])}</td></tr>"
            f"<tr><th>Expected</th><td>{_codes(retrieval.get('expected') or [])}</td></tr>"
            f"<tr><th>Missing</th><td>{_codes(retrieval.get('missing') or [])}</td></tr>"
            f"<tr><th>Unexpected</th><td>{_codes(retrieval.get('unexpected') or [])}</td></tr>"
            f"<tr><th>Result</th><td>{badge('PASS' if retrieval.get('passed') else 'FAIL')}"
            + (" (forbidden chunk retrieved)" if retrieval.get("forbiddenRetrieval") else "")
            + "</td></tr></tbody></table>"
        )
    contract = attempt.get("contract") or {}
    violations = [
        f"[{v.get('category')}/{v.get('severity')}] {v.get('grader')}: {v.get('reason')}"
        for v in contract.get("taxonomy") or []
    ] or list(contract.get("violations") or [])
    for grader in attempt.get("graders") or []:
        violations += [
            f"[{v.get('category')}/{v.get('severity')}] {v.get('grader')}: {v.get('reason')}"
            for v in grader.get("violations") or []
        ]
    parts.append("<h4>Violations</h4>" + _items(violations))
    graders = attempt.get("graders") or []
    if graders:
        rows = [
            (
                esc(g.get("grader")),
                badge("PASS" if g.get("passed") else "FAIL"),
                esc("hard" if g.get("hard", True) else "soft"),
                esc(g.get("score")),
                esc(g.get("threshold")),
            )
            for g in graders
        ]
        parts.append(
            "<h4>Graders</h4>" + table(("Grader", "Result", "Kind", "Score", "Threshold"), rows)
        )
    judge = attempt.get("judge")
    if judge:
        parts.append(
            f"<h4>Judge</h4><p>{badge(judge.get('decision'))} score "
            f"{esc(judge.get('score'))}"
            + (f" — error: {esc(judge.get('error'))}" if judge.get("error") else "")
            + "</p>"
            + _items(judge.get("reasons") or [])
        )
    if attempt.get("errorKind") or (status == "ERROR" and attempt.get("errorMessage")):
        parts.append(
            f"<h4>Error</h4><p><code>{esc(attempt.get('errorKind'))}</code>: "
            f"{esc(attempt.get('errorMessage'))}</p>"
        )
    elif attempt.get("skipReason"):
        parts.append(f"<h4>Skipped</h4><p>{esc(attempt.get('skipReason'))}</p>")
    parts.append("</details>")
    return "".join(parts)


class HtmlGlue:
    """pytest-html hooks; registered only when the ``html`` plugin is present."""

    def __init__(self, config: pytest.Config, state: GoldenSession) -> None:
        from goldeval.pytest_plugin.state import PAYLOAD_ATTR

        self.config = config
        self.state = state
        self.payload_attr = PAYLOAD_ATTR

    def _active(self) -> bool:
        return bool(self.config.getoption("htmlpath", default=None))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        payload = getattr(report, self.payload_attr, None)
        if payload is not None and self._active():
            plugin = self.config.pluginmanager.getplugin("html")
            if plugin is not None:
                from goldeval.pipeline.attempt import case_facts
                from goldeval.pytest_plugin.fixtures import param_of

                param = param_of(item)
                payload = {
                    "case": case_facts(param.case) if param is not None else {},
                    "attempt": json.loads(payload["record"]),
                }
                extras = list(getattr(report, "extras", None) or [])
                extras.append(plugin.extras.html(render_attempt(payload)))
                report.extras = extras  # type: ignore[attr-defined]
        return report

    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: pytest.Session
    ) -> None:
        run = self.state.run
        if run is None:
            return
        # Models side by side (--golden-models): one section per model's run.
        runs = self.state.benchmark or [run]
        prefix[0:0] = [
            render_summary(r, "goldeval-summary" if i == 0 else f"goldeval-summary-{i}")
            for i, r in enumerate(runs)
        ]


def register(config: pytest.Config, state: GoldenSession) -> None:
    """Register the pytest-html glue when pytest-html is installed and enabled."""
    name = "goldeval-html"
    # Only when a report is asked for: a report hook wrapper costs every item of every run.
    if not config.pluginmanager.hasplugin("html") or not config.getoption("htmlpath", None):
        return
    if config.pluginmanager.get_plugin(name) is None:
        config.pluginmanager.register(HtmlGlue(config, state), name)
