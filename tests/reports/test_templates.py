"""The report templates (goldeval.reports.templating) and the layout of reports/.

No browser and no pytest run here: pure rendering of small run documents.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import jinja2
import pytest

from goldeval.core.rates import GRADER_PREFIX, RATE_NAMES
from goldeval.reports import html as report_html
from goldeval.reports import site as report_site
from goldeval.reports.labels import RATE_LABELS, chart_label
from goldeval.reports.templating import ENV, esc, render, status_class
from goldeval.results.documents import RunDocument, typed_run

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "src" / "goldeval" / "reports"
TEMPLATES = REPORTS / "templates"
HOSTILE = "<script>alert(1)</script>\"' onmouseover=x \u202e\x1b[2J"


def _metric(hits: int, total: int) -> dict[str, Any]:
    return {
        "hits": hits,
        "total": total,
        "rate": hits / total,
        "ci95": {"lower": 0.1, "upper": 0.9, "method": "wilson"},
    }


def _run(case_id: str = "c1", run_id: str = "r1") -> RunDocument:
    metrics: dict[str, Any] = {name: _metric(1, 2) for name in RATE_NAMES}
    metrics["unstableCaseRate"] = _metric(0, 1)
    metrics["graders"] = {"json_schema": _metric(1, 1)}
    return typed_run(
        {
            "runId": run_id,
            "timestamp": "2026-01-01T00:00:00Z",
            "status": "COMPLETED",
            "protocol": {
                "datasetId": "d1",
                "datasetHash": "h" * 64,
                "attempts": 2,
                "mode": "FIXTURE",
                "selectedCaseIds": [case_id],
            },
            "metrics": metrics,
            "cases": [
                {
                    "caseId": case_id,
                    "status": "FAIL",
                    "kinds": ["GENERATION"],
                    "successRate": {"hits": 1, "total": 2},
                    "metadata": {"prompt": "p"},
                    "attempts": [
                        {
                            "index": 1,
                            "status": "FAIL",
                            "graders": [
                                {
                                    "grader": "contains",
                                    "passed": False,
                                    "violations": [
                                        {
                                            "category": "c",
                                            "severity": "s",
                                            "grader": "contains",
                                            "reason": "line one\nline two",
                                        }
                                    ],
                                }
                            ],
                        }
                    ],
                }
            ],
            "comparison": {
                "decision": "REGRESSION",
                "metrics": [
                    {
                        "name": "overallPassRate",
                        "baseline": 1.0,
                        "candidate": 0.5,
                        "delta": -0.5,
                        "direction": "REGRESSED",
                    }
                ],
                "cases": [{"caseId": case_id, "class": "NEW_FAILURE"}],
            },
            "qualityGate": {
                "passed": False,
                "verdict": "FAIL",
                "rules": [
                    {
                        "name": "overallPassRate",
                        "kind": "absolute",
                        "passed": False,
                        "detail": "0.500 < 1.000",
                    }
                ],
            },
            "exitDecision": {"code": 1, "reason": "gate failed"},
        }
    )


class _Elements(HTMLParser):
    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


# -- layout ---------------------------------------------------------------------------------


def test_reports_import_no_pytest() -> None:
    """reports/ renders and writes; the hooks that call it live in pytest_plugin/."""
    for path in REPORTS.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                top = name.split(".")[0]
                assert top not in ("pytest", "_pytest"), f"{path.name} imports {name}"
                assert not name.startswith("goldeval.pytest_plugin"), f"{path.name}: {name}"
    code = (
        "import sys, goldeval.reports.html, goldeval.reports.site, goldeval.reports.junit, "
        "goldeval.reports.markdown; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pytest', '_pytest')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_templates_ship_in_the_wheel() -> None:
    """Every file of reports/templates matches a package-data pattern of pyproject.toml."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = project["tool"]["setuptools"]["package-data"]["goldeval"]
    files = [p.relative_to(ROOT / "src" / "goldeval").as_posix() for p in TEMPLATES.iterdir()]
    assert files
    for name in files:
        assert any(fnmatch.fnmatch(name, pat) for pat in patterns), f"{name} not package data"
    assert set(ENV.list_templates()) == {p.name for p in TEMPLATES.iterdir()}


# -- labels and rate names ------------------------------------------------------------------


def test_every_rate_has_a_label_and_rows_follow_core_rates() -> None:
    assert set(RATE_NAMES) <= set(RATE_LABELS)
    rows = report_html.metric_rows(_run())
    names = [row["name"] for row in rows]
    assert names == [*RATE_NAMES, "unstableCaseRate", f"{GRADER_PREFIX}json_schema"]
    assert rows[0]["label"] == RATE_LABELS[RATE_NAMES[0]]
    assert chart_label("hallucinationRate").endswith("(lower is better)")
    assert chart_label("overallPassRate") == "Overall pass rate"


def test_grader_metric_is_named_as_the_gate_names_it() -> None:
    """A grader's row reads grader.<name>, the name a gate threshold and a delta use."""
    summary = report_html.render_summary(_run())
    assert f"<small>({GRADER_PREFIX}json_schema)</small>" in summary
    assert "graders.json_schema" not in summary


# -- escaping and the template rules --------------------------------------------------------


def test_autoescape_in_text_and_attributes() -> None:
    run = _run(case_id=HOSTILE, run_id=HOSTILE)
    pages = [
        report_html.render_summary(run, anchor=HOSTILE),
        report_site.render_run(run),
        report_site.render_index([run], {id(run): "r1"}),
        report_html.render_attempt(
            {
                "case": {"caseId": HOSTILE, "prompt": HOSTILE, "kinds": [HOSTILE]},
                "attempt": {
                    "status": HOSTILE,
                    "output": HOSTILE,
                    "judge": {"decision": HOSTILE, "reasons": [HOSTILE]},
                },
            }
        ),
    ]
    for page in pages:
        tags = _Elements(page).tags
        assert not [t for t, _ in tags if t == "script"]
        assert not [a for _, a in tags if "onmouseover" in a]
        assert "\u202e" not in page and "\x1b" not in page
        assert "\\u202e" in page and "&lt;script&gt;" in page
    # the history cell's data-case attribute holds the raw id, quotes and all, as one value
    index = pages[2]
    cases = [a["data-case"] for t, a in _Elements(index).tags if t == "tr" and "data-case" in a]
    assert cases == [HOSTILE.replace("\u202e", "\\u202e").replace("\x1b", "\\x1b")]


def test_esc_matches_the_templates() -> None:
    assert esc(None) == "n/a"
    assert esc("<a href='x'>") == "&lt;a href=&#39;x&#39;&gt;"
    assert render("_parts.html.j2") == ""  # macros only
    template = ENV.from_string("{{ v }}")
    for value in (None, 3, HOSTILE, "a\r\nb"):
        assert template.render(v=value) == esc(value)


def test_line_breaks_of_a_template_do_not_reach_the_page() -> None:
    """Templates are written one element per line; the fragment has no stray whitespace
    (a line break only inside <pre> and <style>, where it belongs)."""
    summary = report_html.render_summary(_run())
    outside = re.sub(r"<style>.*?</style>", "", summary, flags=re.S)
    assert "\n" not in outside and "  " not in outside
    assert "<h2>Golden evaluation: d1</h2><p>Gate: " in summary
    attempt = report_html.render_attempt(
        {"case": {"prompt": "one\ntwo"}, "attempt": {"status": "PASS", "output": "a\n  b"}}
    )
    assert "<pre>one\ntwo</pre>" in attempt and "<pre>a\n  b</pre>" in attempt
    assert not re.sub(r"<pre>.*?</pre>", "", attempt, flags=re.S).count("\n")
    page = report_site.render_run(_run())
    assert page.startswith('<!DOCTYPE html>\n<html lang="en"><head>')
    assert page.endswith("</body></html>\n")
    # the stylesheet is included as written
    assert (TEMPLATES / "goldeval.css").read_text(encoding="utf-8") in page


def test_strict_undefined_catches_a_missing_view_field() -> None:
    with pytest.raises(jinja2.UndefinedError):
        render("attempt.html.j2")


def test_html_shows_provider_tries_queue_wait_and_run_retries() -> None:
    from goldeval.reports.html import render_attempt, render_summary

    attempt = render_attempt(
        {
            "case": {"caseId": "c-1", "prompt": "p"},
            "attempt": {
                "caseId": "c-1",
                "index": 1,
                "status": "PASS",
                "tries": 3,
                "queueMs": 120,
                "ttftMs": 45,
                "durationMs": 900,
            },
        }
    )
    assert "Provider tries" in attempt and ">3<" in attempt
    assert "120 ms" in attempt and "45 ms" in attempt
    run = {
        "protocol": {"datasetId": "demo-v1", "mode": "FIXTURE", "attempts": 1},
        "metrics": {"retries": {"attempts": 2, "extraTries": 5, "caseIds": ["c-1"]}},
        "cases": [],
    }
    summary = render_summary(typed_run(run))
    assert "Retries" in summary and "2 attempt(s) needed more than one provider try" in summary
    assert "5 extra tries" in summary
    assert "Retries" not in render_summary(typed_run({**run, "metrics": {}}))


def test_html_attempt_shows_the_messages_sent_escaped() -> None:
    from goldeval.reports.html import render_attempt

    html = render_attempt(
        {
            "case": {"caseId": "c-1", "prompt": "raw prompt"},
            "attempt": {
                "caseId": "c-1",
                "index": 1,
                "status": "FAIL",
                "promptMessages": [
                    {"role": "system", "content": "You are <b>helpful</b>"},
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "hi"},
                            {"type": "image", "path": "img/a.png"},
                        ],
                    },
                ],
            },
        }
    )
    assert "[system] You are &lt;b&gt;helpful&lt;/b&gt;" in html
    assert "[user] hi [image img/a.png]" in html
    assert "raw prompt" not in html


def test_only_verdict_words_are_green() -> None:
    """A run's status (COMPLETED, RUNNING, QUEUED) says it ended or moves, not that it
    passed: a COMPLETED run whose gate failed must not wear the pass colour."""
    for word in ("COMPLETED", "RUNNING", "QUEUED", "CANCELLED", "n/a"):
        assert status_class(word) != "goldeval-pass", word
    for word in ("PASS", "NO_REGRESSION", "NON_INFERIOR"):
        assert status_class(word) == "goldeval-pass", word
    assert status_class("INCOMPLETE") == "goldeval-error"
