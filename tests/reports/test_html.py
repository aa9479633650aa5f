"""pytest-html integration, rendered in a real headless Chromium (see conftest.Browser)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from goldeval.reports.html import fmt_ci, render_attempt, render_summary
from goldeval.results.documents import RateDoc, typed_run
from tests.helpers import SERIAL_ONLY, RunFiles
from tests.reports.conftest import Browser, DomIndex

FAILING_CASE = "api-login-wrong-password-401"
PROMPT_CASE = "e2e-login-happy-alice"
SCRIPT_PAYLOAD = "<script>document.title='PWNED'</script>"
IMG_PAYLOAD = "<img src=x onerror=\"document.title='PWNED'\">"
LOUD_PAYLOAD = "<script>console.log('XSS-RAN')</script><svg onload=\"console.log('XSS-RAN')\">"
PAYLOAD = f"{SCRIPT_PAYLOAD} {IMG_PAYLOAD} {LOUD_PAYLOAD}"


def _fixture(project: Path, case_id: str) -> Path:
    return project / "golden" / "generation" / "fixtures" / f"{case_id}.out.md"


def _attempt_sections(dom: DomIndex) -> list[dict[str, str | None]]:
    return [
        a
        for t, a in dom.elements
        if t == "details" and "goldeval-attempt" in (a.get("class") or "")
    ]


def _assert_no_injection(dom: DomIndex, console: list[str]) -> None:
    assert "PWNED" not in dom.title
    assert not [s for s in dom.scripts if "PWNED" in s or "XSS-RAN" in s]
    assert not dom.with_attr("onerror") and not dom.with_attr("onload")
    assert not [line for line in console if "XSS-RAN" in line]


def test_report_summary_and_extras_in_chromium(
    pytester: pytest.Pytester,
    golden_project: Path,
    run_files: RunFiles,
    plugin_args: list[str],
    browser: Browser,
) -> None:
    saved = pytester.runpytest("--golden=generation-v1", "--golden-save-baseline=b.json")
    assert saved.ret == 0, saved.stdout.str()
    _fixture(golden_project, FAILING_CASE).write_text("just some text\n", encoding="utf-8")
    result = pytester.runpytest(
        "--golden=generation-v1",
        "--golden-baseline=b.json",
        "--html=report.html",
        "--self-contained-html",
        *plugin_args,
    )
    result.assert_outcomes(passed=9, failed=1)
    run = run_files.latest()
    assert run["comparison"]["decision"] == "REGRESSION"
    report = golden_project / "report.html"

    page = browser.dump_dom(report)
    assert page.console == [], "console messages:\n" + "\n".join(page.console)
    dom = DomIndex(page.dom)
    ids = {a.get("id") for _, a in dom.elements}
    assert "goldeval-summary" in ids
    text = page.dom
    # dataset and protocol
    assert run["protocol"]["datasetHash"] in text and "DETERMINISTIC (fixture)" in text
    # metrics with Wilson intervals
    overall = RateDoc.model_validate(run["metrics"]["overallPassRate"])
    assert "goldeval-metrics" in text and "90.0%" in text and fmt_ci(overall) in text
    # baseline deltas and per-case classes
    assert "goldeval-deltas" in text and "-10.0 pp" in text and "REGRESSED" in text
    assert "NEW_FAILURE" in text and "UNCHANGED_PASS" in text
    # gate decision and rules
    assert 'class="goldeval-verdict"' in text
    assert "overallPassRate" in text and "0.900 &lt; 1.000" in text
    verdict = text.split('class="goldeval-verdict"', 1)[1][:200]
    assert run["qualityGate"]["verdict"] == "FAIL" and "FAIL" in verdict
    # the summary comes first, above pytest-html's own counts
    assert text.index("goldeval-summary") < text.index("run-count")
    # one expandable section per attempt; the failing one holds what a reviewer needs
    sections = _attempt_sections(dom)
    assert len(sections) == 10
    failing = text.split(f"golden case <code>{FAILING_CASE}</code>", 1)[1].split("</details>")[0]
    assert "just some text" in failing
    assert "api-auth-negative" in failing  # retrieved chunk
    assert "missing status 401" in failing  # a violation
    assert "Покрой REST API логина" in failing  # the prompt

    png = pytester.path / "report.png"
    shot = browser.screenshot(report, png)
    assert shot.console == []
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000


def _inject_prompt(project: Path, case_id: str, payload: str) -> None:
    rows = next((project / "golden" / "generation").glob("*.jsonl"))
    lines = []
    for line in rows.read_text(encoding="utf-8").splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            if row["id"] == case_id:
                row["prompt"] = f"{payload} {row['prompt']}"
                line = json.dumps(row, ensure_ascii=False)
        lines.append(line)
    rows.write_text("\n".join(lines) + "\n", encoding="utf-8")


@SERIAL_ONLY
def test_report_escapes_answers_and_prompts(
    pytester: pytest.Pytester,
    golden_project: Path,
    plugin_args: list[str],
    browser: Browser,
) -> None:
    _fixture(golden_project, FAILING_CASE).write_text(f"RAG: {PAYLOAD}\n", encoding="utf-8")
    _inject_prompt(golden_project, PROMPT_CASE, PAYLOAD)
    result = pytester.runpytest(
        "--golden=generation-v1",
        "--golden-no-gate",
        "--html=report.html",
        "--self-contained-html",
        *plugin_args,
    )
    assert (golden_project / "report.html").is_file(), result.stdout.str()

    page = browser.dump_dom(golden_project / "report.html")
    dom = DomIndex(page.dom)
    _assert_no_injection(dom, page.console)
    assert page.console == [], "console messages:\n" + "\n".join(page.console)
    assert dom.title == "report.html"
    # the payload is there, as text: once in the answer, once in the prompt at least
    escaped_script = "&lt;script&gt;document.title='PWNED'&lt;/script&gt;"
    escaped_img = "&lt;img src=x onerror=\"document.title='PWNED'\"&gt;"
    assert page.dom.count(escaped_script) >= 2
    assert page.dom.count(escaped_img) >= 2
    prompt_section = page.dom.split(f"golden case <code>{PROMPT_CASE}</code>", 1)[1]
    assert escaped_script in prompt_section.split("</details>")[0]
    shot = browser.screenshot(golden_project / "report.html", pytester.path / "xss.png")
    assert not [line for line in shot.console if "XSS-RAN" in line]


def _poison(value: Any, payload: str) -> Any:
    if isinstance(value, str):
        return f"{payload}{value}"
    if isinstance(value, dict):
        return {k: _poison(v, payload) for k, v in value.items()}
    if isinstance(value, list):
        return [_poison(v, payload) for v in value]
    return value


def test_every_rendered_value_is_escaped(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    _fixture(golden_project, FAILING_CASE).write_text("just some text\n", encoding="utf-8")
    pytester.runpytest("--golden=generation-v1")
    latest = run_files.latest()
    run = _poison(latest, PAYLOAD)
    run["status"] = latest["status"]  # a closed set of words: another one is refused on load
    fragments = [render_summary(typed_run(run))]
    for case in run["cases"]:
        for attempt in case["attempts"]:
            attempt = {
                **attempt,
                "output": PAYLOAD,
                "judge": {"decision": PAYLOAD, "score": PAYLOAD, "reasons": [PAYLOAD]},
                "errorKind": PAYLOAD,
                "errorMessage": PAYLOAD,
            }
            fragments.append(
                render_attempt(
                    {
                        "case": {
                            "caseId": PAYLOAD,
                            "prompt": PAYLOAD,
                            "kinds": [PAYLOAD],
                            "tags": [PAYLOAD],
                        },
                        "attempt": attempt,
                    }
                )
            )
    for fragment in fragments:
        dom = DomIndex(fragment)
        tags = {t for t, _ in dom.elements}
        assert not tags & {"script", "img", "svg"}, fragment[:500]
        assert not dom.with_attr("onerror") and not dom.with_attr("onload")


@SERIAL_ONLY
def test_without_pytest_html(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    result = pytester.runpytest("--golden=generation-v1", "-p", "no:html", *plugin_args)
    result.assert_outcomes(passed=10)
    assert not list(golden_project.glob("*.html"))


def test_no_extras_without_html_option(pytester: pytest.Pytester, golden_project: Path) -> None:
    pytester.makeconftest(
        "import pytest\n"
        "SEEN = []\n"
        "@pytest.hookimpl(trylast=True)\n"
        "def pytest_runtest_logreport(report):\n"
        "    if getattr(report, 'goldeval', None) is not None:\n"
        "        SEEN.append(len(getattr(report, 'extras', [])))\n"
        "def pytest_sessionfinish(session):\n"
        "    print('EXTRAS', sum(SEEN), len(SEEN))\n"
    )
    result = pytester.runpytest("--golden=generation-v1", "-s")
    result.stdout.fnmatch_lines(["*EXTRAS 0 10*"])
