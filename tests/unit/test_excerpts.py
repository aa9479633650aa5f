"""Untrusted text is shown escaped everywhere (goldeval.core.textsafe), and the notices of a run.

Issue 16: an answer holding ANSI/OSC escape sequences, C1 controls, ``\\r`` overwrites or bidi
overrides must not reach a terminal, report.md, JUnit, HTML or the site raw. Issue 15: retries,
judge PENDING/errors and new failures / recovered cases are named where people read.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goldeval.core.errors import ProviderError
from goldeval.core.models import AttemptRecord, GraderOutcome, Status, Violation
from goldeval.core.textsafe import is_safe, one_line, safe_text
from goldeval.pipeline.attempt import failure_message
from goldeval.reports import html as html_glue
from goldeval.reports import markdown as report_md
from goldeval.reports.junit import dashboard_xml
from goldeval.results.documents import Comparison, typed_run
from goldeval.results.metrics import compute_metrics

CLEAR = "\x1b[2J"
OSC8 = "\x1b]8;;http://evil\x07click me\x1b]8;;\x07"
C1_CSI = "\x9b31m"
OVERWRITE = "all good\rFAKE PASS"
BIDI = "invoice_\u202etxt.exe"
HOSTILE = f"ok {CLEAR} {OSC8} {C1_CSI} {OVERWRITE} {BIDI} \x00\x07\x08\x7f\u2066x\u2069 end"
#: Characters that must never be shown raw.
RAW = ("\x1b", "\x07", "\x9b", "\r", "\u202e", "\x00", "\x08", "\x7f", "\u2066", "\u2069")


def assert_clean(text: str) -> None:
    found = [repr(ch) for ch in RAW if ch in text]
    assert not found, f"raw control characters {found} in {text[:300]!r}"


# --------------------------------------------------------------------------- the sanitiser


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (CLEAR, "\\x1b[2J"),
        (OSC8, "\\x1b]8;;http://evil\\x07click me\\x1b]8;;\\x07"),
        (C1_CSI, "\\x9b31m"),
        (OVERWRITE, "all good\\rFAKE PASS"),
        (BIDI, "invoice_\\u202etxt.exe"),
        ("a\x00b\x7fc\x85d", "a\\x00b\\x7fc\\x85d"),
        ("\u200e\u200f\u061c\u2028\u2029", "\\u200e\\u200f\\u061c\\u2028\\u2029"),
        ("lone \ud83d surrogate", "lone \\ud83d surrogate"),
    ],
    ids=[
        "csi-clear",
        "osc8-link",
        "c1-csi",
        "cr-overwrite",
        "bidi-override",
        "c0-del-c1",
        "marks-separators",
        "lone-surrogate",
    ],
)
def test_each_dangerous_sequence_is_escaped_visibly(raw: str, shown: str) -> None:
    assert safe_text(raw) == shown
    assert one_line(raw) == shown
    safe_text(raw).encode("utf-8")  # always writable


def test_ordinary_text_is_kept_whole() -> None:
    text = "Отказ.\n\tкод: `x | y` 👩\u200d💻 café ✓ 中文"
    assert safe_text(text) is text  # no copy for the usual case
    assert safe_text("a\r\nb") == "a\nb"  # a Windows line end is not an overwrite
    assert one_line("a\n\n\tb\n") == "a b"
    assert safe_text(None) == "None" and safe_text(12) == "12"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_property_nothing_unsafe_survives(text: str) -> None:
    shown = safe_text(text)
    assert is_safe(shown)
    assert safe_text(shown) == shown  # idempotent: escaping twice changes nothing
    shown.encode("utf-8")
    line = one_line(text)
    assert "\n" not in line and "\t" not in line and is_safe(line)


# --------------------------------------------------------------------------- every view


def _record() -> AttemptRecord:
    return AttemptRecord(
        case_id="c1",
        index=1,
        status=Status.FAIL,
        graders=[
            GraderOutcome(
                grader="quote",
                passed=False,
                violations=[
                    Violation(
                        case_id="c1",
                        category="CONTENT",
                        severity="HIGH",
                        grader="quote",
                        reason=f"answer was: {HOSTILE}\nsecond line",
                    )
                ],
            )
        ],
        output=HOSTILE,
    )


def _run() -> dict[str, Any]:
    record = _record().dump()
    error = {
        "caseId": "c2",
        "index": 1,
        "status": "ERROR",
        "errorKind": "PROVIDER_ERROR",
        "errorMessage": f"app raised: {HOSTILE}",
    }
    skipped = {"caseId": "c3", "index": 1, "status": "SKIPPED", "skipReason": HOSTILE}
    cases = [
        {
            "caseId": "c1",
            "status": "FAIL",
            "kinds": ["GENERATION"],
            "attempts": [record],
            "successRate": {"hits": 0, "total": 1},
        },
        {
            "caseId": "c2",
            "status": "ERROR",
            "kinds": ["GENERATION"],
            "attempts": [error],
            "errors": [f"PROVIDER_ERROR: app raised: {HOSTILE}"],
            "successRate": {"hits": 0, "total": 0},
        },
        {
            "caseId": "c3",
            "status": "SKIPPED",
            "kinds": ["GENERATION"],
            "attempts": [skipped],
            "successRate": {"hits": 0, "total": 0},
        },
    ]
    return {
        "runId": "r1",
        "datasetVersion": "d1",
        "status": "COMPLETED",
        "protocol": {"datasetId": "d1", "mode": "FIXTURE", "attempts": 1},
        "configuration": {"mode": "fixture"},
        "casesTotal": 3,
        "casesPassed": 0,
        "casesFailed": 1,
        "casesSkipped": 1,
        "casesError": 1,
        "attemptsTotal": 3,
        "attemptsPassed": 0,
        "attemptsFailed": 1,
        "attemptsSkipped": 1,
        "attemptsError": 1,
        "metrics": compute_metrics(cases),
        "cases": cases,
        "notes": [f"a note quoting {HOSTILE}"],
        "comparison": {"decision": "COMPARISON_INVALID", "invalidReasons": [HOSTILE]},
        "qualityGate": {
            "passed": False,
            "verdict": "FAIL",
            "rules": [
                {"name": "overallPassRate", "kind": "threshold", "passed": False, "detail": HOSTILE}
            ],
        },
        "exitDecision": {"code": 1, "reason": f"gate failed: {HOSTILE}"},
    }


def test_failure_message_printed_by_pytest_is_escaped() -> None:
    text = failure_message(_record())
    assert_clean(text)
    assert "\\x1b[2J" in text and "\\u202e" in text
    # one line per violation: an embedded newline cannot fake another violation line
    assert len(text.splitlines()) == 2


def test_provider_error_messages_are_escaped() -> None:
    exc = ProviderError("HTTP_ERROR", f"500 from server: {HOSTILE}\nbody continues")
    assert_clean(exc.message)
    assert_clean(str(exc))
    assert "body continues" in exc.message and "\n" in exc.message  # newlines kept


def test_report_md_is_escaped() -> None:
    text = report_md.render(typed_run(_run()))
    assert_clean(text)
    assert "\\\\x1b\\[2J" in text  # visible (Markdown-escaped) in the job summary
    assert "## Notes" in text


def test_html_and_site_escape_is_sanitised() -> None:
    run = _run()
    summary = html_glue.render_summary(typed_run(run))
    attempt = html_glue.render_attempt(
        {"case": {"caseId": "c1", "prompt": HOSTILE}, "attempt": _record().dump()}
    )
    for text in (summary, attempt, html_glue.esc(HOSTILE)):
        assert_clean(text)
    assert "\\x1b[2J" in attempt


def test_dashboard_junit_is_escaped() -> None:
    xml = dashboard_xml([typed_run(_run())])
    ET.fromstring(xml.encode("utf-8"))
    assert_clean(xml)
    assert "\\x1b[2J" in xml


def test_terminal_lines_from_report_md_are_escaped() -> None:
    run = _run()
    run["metrics"]["graders"] = {f"evil{CLEAR}": {"hits": 0, "total": 1, "rate": 0.0}}
    doc = typed_run(run)
    for line in report_md.summary_table(doc) + report_md.notices(doc):
        assert_clean(line)


# --------------------------------------------------------------------------- notices


def _attempt(case_id: str, status: str = "PASS", **extra: Any) -> dict[str, Any]:
    return {"caseId": case_id, "index": 1, "status": status, **extra}


def test_metrics_count_retries_and_judge_outcomes() -> None:
    cases = []
    for n in range(14):
        cid = f"case-{n:02d}"
        attempts = [
            _attempt(
                cid,
                tries=3 if n < 12 else 1,
                judge={"decision": "PENDING"} if n < 11 else {"decision": "ACCEPT"},
            ),
            _attempt(
                cid,
                tries=2,
                judge={"decision": "PENDING", "error": "JUDGE_ERROR: x"}
                if n == 13
                else {"decision": "REJECT"},
            ),
        ]
        cases.append(
            {
                "caseId": cid,
                "status": "PASS",
                "kinds": [],
                "attempts": attempts,
                "successRate": {"hits": 2, "total": 2},
            }
        )
    m = compute_metrics(cases)
    assert m["retries"]["attempts"] == 12 + 14
    assert m["retries"]["extraTries"] == 12 * 2 + 14
    assert m["retries"]["cases"] == 14 and len(m["retries"]["caseIds"]) == 10
    judge = m["judge"]
    assert (judge["accept"], judge["reject"], judge["pending"], judge["errors"]) == (3, 13, 11, 1)
    assert judge["pendingCases"] == 11 and judge["pendingCaseIds"][0] == "case-00"
    assert judge["errorCases"] == 1 and judge["errorCaseIds"] == ["case-13"]
    # PENDING and judge errors stay out of the accept rate
    assert m["judgeAcceptRate"]["total"] == 16
    lines = report_md.notices(typed_run({"metrics": m}))
    assert lines[0].startswith("retries: 26 attempts needed more than one provider try")
    assert lines[0].endswith("case-09 and 4 more")
    assert lines[1] == (
        "judge: 3 ACCEPT, 13 REJECT, 11 PENDING, 1 error "
        "(PENDING and errors are not in judgeAcceptRate)"
    )
    assert lines[2].endswith("case-09 and 1 more")
    assert lines[3] == "judge errors (judge call failed; the hard verdict stands): case-13"


def test_no_notices_for_a_plain_run() -> None:
    cases = [
        {
            "caseId": "a",
            "status": "PASS",
            "kinds": [],
            "attempts": [_attempt("a", tries=1)],
            "successRate": {"hits": 1, "total": 1},
        }
    ]
    m = compute_metrics(cases)
    assert "retries" not in m and "judge" not in m
    assert report_md.notices(typed_run({"metrics": m})) == []
    assert "## Notes" not in report_md.render(typed_run({"metrics": m, "cases": cases}))


def test_self_preference_is_a_notice_even_without_its_note() -> None:
    run = {"metrics": {}, "judgeSelfPreference": True, "judgeModel": "m1", "notes": []}
    assert report_md.notices(typed_run(run)) == [
        "judge model m1 is the generator model: self-preference risk"
    ]
    run["notes"] = ["judge model m1 is the generator model: self-preference risk"]
    assert report_md.notices(typed_run(run)) == []  # the note says it already: not twice


def test_comparison_case_lines_name_ten_then_count() -> None:
    cases = [{"caseId": f"n{i:02d}", "class": "NEW_FAILURE"} for i in range(12)]
    cases += [
        {"caseId": "r1", "class": "RECOVERED"},
        {"caseId": "e1", "class": "NEW_ERROR"},
        {"caseId": f"evil{CLEAR}", "class": "RECOVERED"},
    ]
    lines = report_md.comparison_case_lines(
        Comparison.model_validate({"decision": "REGRESSION", "cases": cases})
    )
    assert lines[0] == (
        "new failures (12): n00, n01, n02, n03, n04, n05, n06, n07, n08, n09 and 2 more"
    )
    assert lines[1] == "new infrastructure errors (not quality regressions) (1): e1"
    assert lines[2] == "recovered (2): r1, evil\\x1b[2J"
    invalid = Comparison.model_validate({"decision": "COMPARISON_INVALID"})
    assert report_md.comparison_case_lines(invalid) == []
    assert report_md.name_cases(["a", "b"], count=5) == "a, b and 3 more"


def test_metrics_stay_json_plain() -> None:
    cases = [
        {
            "caseId": "a",
            "status": "PASS",
            "kinds": [],
            "attempts": [_attempt("a", tries=2, judge={"decision": "ACCEPT"})],
            "successRate": {"hits": 1, "total": 1},
        }
    ]
    m = compute_metrics(cases)
    assert json.loads(json.dumps(m)) == m
