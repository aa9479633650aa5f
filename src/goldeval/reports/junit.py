"""JUnit XML for dashboards (``--golden-junit=PATH``): one testcase per case and per gate rule.

pytest's own ``--junitxml`` has one testcase per *attempt* (one test item each). CI dashboards
(Jenkins, GitLab, Azure) read better with one testcase per *case* and one per *gate rule*,
which is what :func:`write_dashboard_junit` writes, with the ``junit-xml`` library:

* suite ``goldeval.<datasetId>``;
* per case: classname ``golden.<datasetId>``, name = case id, ``k of n attempts passed`` in
  ``system-out``; FAIL → ``<failure>`` listing the violations, ERROR → ``<error>`` with the
  error kinds and messages, SKIPPED → ``<skipped>``;
* per gate rule: classname ``golden.<datasetId>.gate``, name such as
  ``overallPassRate >= 1.000`` (stable whether the rule passed or not), ``<failure>`` when
  the rule failed; plus a ``comparison`` testcase that fails on ``COMPARISON_INVALID``.

Pure functions over the typed run document (:class:`goldeval.results.documents.RunDocument`).
The pytest glue (writing the file at the end of the session, the ``golden.*`` properties of
pytest's own ``--junitxml`` behind the ``golden_junit_properties`` ini switch) lives in
:mod:`goldeval.pytest_plugin.junit`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from junit_xml import TestCase, TestSuite, to_xml_report_string  # type: ignore[import-untyped]

from goldeval.core.textsafe import one_line
from goldeval.results.documents import (
    Case,
    Comparison,
    GateRuleDoc,
    RunDocument,
    VariantComparisonDoc,
)
from goldeval.results.run_folder import atomic_write
from goldeval.verdict.comparison import comparison_label
from goldeval.verdict.exit_codes import INFRA, OK
from goldeval.verdict.gate import MAXIMUM_METRICS
from goldeval.verdict.gate_label import gate_label
from goldeval.verdict.variants import decide_variants

_ABSOLUTE_DETAIL = re.compile(r"^\s*(-?[0-9.]+)\s*(>=|<=|<|>)\s*(-?[0-9.]+)\s*$")
#: A failed absolute rule's detail shows the broken comparison; the testcase name shows the rule.
_RULE_OPERATOR = {"<": ">=", ">": "<=", ">=": ">=", "<=": "<="}


def _first_line(text: Any) -> str:
    for line in str(text).splitlines():
        if line.strip():
            return one_line(line)
    return ""


def _dedupe(lines: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for raw in lines:
        # Every reason line is an excerpt of untrusted text (answers, provider errors,
        # retrieved chunk ids): escaped once here for both the message and the text.
        line = one_line(raw)
        if line and line not in seen:
            seen.add(line)
            out.append(line)
    return out


def _violation_line(v: Mapping[str, Any]) -> str:
    return (
        f"[{v.get('category')}/{v.get('severity')}] {v.get('grader')}: "
        f"{_first_line(v.get('reason', ''))}"
    )


def failure_reasons(case: Case) -> list[str]:
    """One line per distinct reason a case failed: violations and taxonomy first."""
    lines: list[str] = [_violation_line(v) for v in case.taxonomy]
    for attempt in case.attempts:
        if attempt.status != "FAIL":
            continue
        contract = attempt.contract or {}
        taxonomy = contract.get("taxonomy") or []
        lines += [_violation_line(v) for v in taxonomy]
        if not taxonomy:
            lines += [_first_line(v) for v in contract.get("violations") or []]
        for grader in attempt.graders:
            if grader.get("passed") or not grader.get("hard", True):
                continue
            found = [_violation_line(v) for v in grader.get("violations") or []]
            if not found:
                score, threshold = grader.get("score"), grader.get("threshold")
                found = [f"{grader.get('grader')}: failed (score {score}, threshold {threshold})"]
            lines += found
        retrieval = attempt.retrieval or {}
        if retrieval.get("applicable") and not retrieval.get("passed"):
            line = (
                f"retrieval: missing {retrieval.get('missing') or []}, "
                f"unexpected {retrieval.get('unexpected') or []}"
            )
            if retrieval.get("forbiddenRetrieval"):
                line += ", forbidden chunk retrieved"
            lines.append(line)
    return _dedupe(lines) or ["failed (no violation recorded)"]


def error_reasons(case: Case) -> list[str]:
    """The error kinds and messages of a case's ERROR attempts."""
    lines = [_first_line(e) for e in case.errors]
    for attempt in case.attempts:
        if attempt.status == "ERROR":
            lines.append(
                f"{attempt.error_kind or 'ERROR'}: {_first_line(attempt.error_message or '')}"
            )
    return _dedupe(lines) or ["ERROR (no message recorded)"]


def _skip_reasons(case: Case) -> list[str]:
    lines = [
        str(a.skip_reason or a.error_message or "") for a in case.attempts if a.status == "SKIPPED"
    ]
    return _dedupe(lines) or ["skipped"]


def _attempt_counts(case: Case) -> tuple[int, int]:
    rate = case.success_rate
    if rate is not None:
        return rate.hits, rate.total
    return sum(1 for a in case.attempts if a.status == "PASS"), len(case.attempts)


def _message(head: str, lines: Sequence[str]) -> str:
    more = f" (+{len(lines) - 1} more)" if len(lines) > 1 else ""
    return f"{head}: {lines[0]}{more}"


def rule_test_name(rule: GateRuleDoc) -> str:
    """``overallPassRate >= 1.000`` for threshold rules, else the rule's own name."""
    name = rule.name
    match = _ABSOLUTE_DETAIL.match(rule.detail)
    if match:
        return f"{name} {_RULE_OPERATOR[match.group(2)]} {match.group(3)}"
    threshold = rule.threshold
    if rule.kind == "absolute" and threshold is not None:
        operator = "<=" if name in MAXIMUM_METRICS else ">="
        return f"{name} {operator} {threshold:.3f}"
    return name


def _seconds(ms: Any) -> Decimal | None:
    # Decimal keeps the suite's summed time to three decimals (SUREFIRE_TIME in the schema).
    try:
        value = Decimal(int(ms)) / Decimal(1000)
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None


def _suite(run: RunDocument, suffix: str = "") -> Any:
    protocol = run.protocol
    dataset = str((protocol.dataset_id if protocol else None) or run.dataset_version or "dataset")
    classname = f"golden.{dataset}{suffix}"
    cases = [_case_test(case, classname) for case in run.cases]
    gate_class = f"{classname}.gate"
    gate = run.quality_gate
    cases += [_rule_test(rule, gate_class) for rule in (gate.rules if gate else [])]
    comparison = run.comparison
    cases.append(_comparison_test(run, comparison, gate_class))
    cases.append(_decision_test(run, gate_class))
    properties = {
        "golden.runId": run.run_id,
        "golden.status": run.status,
        "golden.datasetHash": (protocol.dataset_hash if protocol else None) or run.dataset_hash,
        "golden.packHash": (protocol.pack_hash if protocol else None) or run.pack_hash,
        "golden.mode": protocol.mode if protocol else None,
        "golden.attempts": protocol.attempts if protocol else None,
        "golden.model": (protocol.model if protocol else None) or run.model,
        "golden.verdict": gate_label(run),
        "golden.comparison": comparison_label(comparison)[0] if comparison else None,
        "golden.exitCode": run.exit_decision.code if run.exit_decision else None,
    }
    return TestSuite(
        f"goldeval.{dataset}{suffix}",
        cases,
        timestamp=run.timestamp,
        id=run.run_id,
        properties={k: str(v) for k, v in properties.items() if v is not None},
    )


def _case_test(case: Case, classname: str) -> Any:
    """One testcase per case: failed, errored or skipped with the reasons, as the case ended."""
    hits, total = _attempt_counts(case)
    status = case.status
    out = [f"{hits} of {total} attempts passed", f"status: {status}"]
    if case.kinds:
        out.append("kinds: " + ", ".join(case.kinds))
    tc = TestCase(
        case.case_id,
        classname=classname,
        elapsed_sec=_seconds(case.duration_ms),
        stdout="\n".join(out),
    )
    if status == "FAIL":
        reasons = failure_reasons(case)
        tc.add_failure_info(
            message=_message(f"{hits} of {total} attempts passed", reasons),
            output="\n".join(reasons),
            failure_type="golden.FAIL",
        )
    elif status == "ERROR":
        reasons = error_reasons(case)
        kind = reasons[0].split(":", 1)[0] if ":" in reasons[0] else "ERROR"
        tc.add_error_info(
            message=_message("infrastructure error", reasons),
            output="\n".join(reasons),
            error_type=f"golden.{kind}",
        )
    elif status == "SKIPPED":
        reasons = _skip_reasons(case)
        tc.add_skipped_info(message=reasons[0], output="\n".join(reasons))
    return tc


def _rule_test(rule: GateRuleDoc, gate_class: str) -> Any:
    """One testcase per gate rule, failed when the rule failed."""
    detail = one_line(rule.detail)
    tc = TestCase(rule_test_name(rule), classname=gate_class, stdout=f"{rule.kind}: {detail}")
    if not rule.passed:
        tc.add_failure_info(
            message=f"{rule.name}: {detail}",
            output=detail,
            failure_type=f"golden.gate.{rule.kind}",
        )
    return tc


def _comparison_test(run: RunDocument, comparison: Comparison | None, gate_class: str) -> Any:
    """The comparison as a testcase: skipped without a baseline, failed when invalid."""
    tc = TestCase("comparison", classname=gate_class)
    if comparison is None:
        tc.add_skipped_info(message="no baseline to compare with")
        return tc
    decision = comparison.decision
    label, why = comparison_label(comparison)
    baseline = run.baseline_path or comparison.baseline_run_id or "baseline"
    tc.stdout = f"{label} vs {one_line(baseline)}" + (f": {why}" if why else "")
    if decision == "COMPARISON_INVALID":
        reasons = _dedupe(comparison.invalid_reasons) or [decision]
        tc.add_failure_info(
            message=_message("comparison invalid", reasons),
            output="\n".join(reasons),
            failure_type="golden.comparison",
        )
    return tc


def _decision_test(run: RunDocument, gate_class: str) -> Any:
    """The run's exit decision as a testcase, so a dashboard that counts failures is never
    green for a run the verdict did not pass: a run stopped early (-x, a plugin's stop) had
    no failing case or rule and showed ``failures="0" errors="0"`` while it exited 1. An
    infrastructure decision (75) is an error, any other non-zero one a failure."""
    tc = TestCase("exit decision", classname=gate_class)
    decision = run.exit_decision
    if decision is None:
        tc.add_skipped_info(message="no exit decision recorded")
        return tc
    line = f"exit {decision.code}: {one_line(decision.reason)}"
    tc.stdout = line
    if decision.code == INFRA:
        tc.add_error_info(message=line, error_type="golden.exit")
    elif decision.code != OK:
        tc.add_failure_info(message=line, failure_type="golden.exit")
    return tc


def dashboard_xml(runs: Sequence[RunDocument]) -> str:
    """The dashboard document for one run (or one suite per model for side-by-side runs)."""
    several = len(runs) > 1
    suites = [
        _suite(
            run,
            f".{run.variant or (run.protocol.model if run.protocol else None) or i}"
            if several
            else "",
        )
        for i, run in enumerate(runs, start=1)
    ]
    pair = next((r.variant_comparison for r in runs if r.variant_comparison is not None), None)
    if pair is not None:
        protocol = runs[0].protocol
        dataset = str(
            (protocol.dataset_id if protocol else None) or runs[0].dataset_version or "dataset"
        )
        suites.append(TestSuite(f"goldeval.{dataset}.variants", [_pair_test(pair, dataset)]))
    return str(to_xml_report_string(suites, prettyprint=True, encoding="utf-8"))


def _pair_test(pair: VariantComparisonDoc, dataset: str) -> Any:
    """The variant comparison's verdict as one testcase (issue 35): failed unless the verdict
    (goldeval.verdict.variants, recorded with the run) said NON_INFERIOR; INCONCLUSIVE is a
    failure too, never a pass."""
    name = f"{pair.candidate} vs {pair.control}"
    verdict = decide_variants(pair)  # decided again from the figures, as a regate does
    decision = verdict.decision.value
    reason = one_line(verdict.reason)
    tc = TestCase(name, classname=f"golden.{dataset}.variants", stdout=reason)
    if not verdict.passed:
        tc.add_failure_info(
            message=reason, output=reason, failure_type=f"golden.variants.{decision}"
        )
    return tc


def write_dashboard_junit(run: RunDocument, path: Path) -> None:
    """Write the dashboard JUnit XML of a finished run (the run.json document) to ``path``."""
    write_dashboard_junit_runs([run], path)


def write_dashboard_junit_runs(runs: Sequence[RunDocument], path: Path) -> None:
    """Write the dashboard JUnit XML of several runs (one suite per model or variant, plus
    one for the variant comparison's verdict) to ``path``."""
    atomic_write(Path(path), dashboard_xml(runs))
