"""The static history site, built from real pytester runs and opened in headless Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from goldeval.reports.site import build_site, flips, is_flaky, load_runs, main_site
from goldeval.results.documents import Case, typed_run
from tests.helpers import RunFiles
from tests.reports.conftest import Browser, DomIndex

FAILING_CASE = "api-login-wrong-password-401"
PROMPT_CASE = "e2e-login-happy-alice"
PAYLOAD = "<script>document.title='PWNED'</script> <img src=x onerror=\"document.title='PWNED'\">"
TRENDS = {"overallPassRate", "contractPassRate", "retrievalPassRate", "hallucinationRate"}


def _three_runs(pytester: pytest.Pytester, project: Path, run_files: RunFiles) -> list[str]:
    """PASS, FAIL (one case, under -n 2), PASS again: that case flips twice."""
    rows = next((project / "golden" / "generation").glob("*.jsonl"))
    lines = []
    for line in rows.read_text(encoding="utf-8").splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            if row["id"] == PROMPT_CASE:
                row["prompt"] = f"{PAYLOAD} {row['prompt']}"
            line = json.dumps(row, ensure_ascii=False)
        lines.append(line)
    rows.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fixture = project / "golden" / "generation" / "fixtures" / f"{FAILING_CASE}.out.md"
    good = fixture.read_text(encoding="utf-8")
    ids = []
    for broken, args in ((False, []), (True, ["-n", "2"]), (False, [])):
        fixture.write_text("just some text\n" if broken else good, encoding="utf-8")
        result = pytester.runpytest("--golden=generation-v1", "--golden-no-gate", *args)
        result.assert_outcomes(passed=9 if broken else 10, failed=1 if broken else 0)
        ids.append(run_files.latest()["runId"])
    assert len(set(ids)) == 3
    return ids


def _links(page: Path) -> list[str]:
    dom = DomIndex(page.read_text(encoding="utf-8"))
    return [str(a["href"]) for t, a in dom.elements if t == "a" and a.get("href")]


@pytest.mark.e2e  # three whole sessions and Chromium: 18 s serially, the fast tier's slowest
def test_site_from_runs(
    pytester: pytest.Pytester,
    golden_project: Path,
    run_files: RunFiles,
    browser: Browser,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ids = _three_runs(pytester, golden_project, run_files)
    broken = run_files.runs / "0000-broken"
    broken.mkdir()
    (broken / "run.json").write_text("{not json", encoding="utf-8")
    site = pytester.path / "site"

    code = main_site(["--out", str(site), "--runs", str(run_files.runs)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "0000-broken" in captured.err and "unreadable" in captured.err
    assert "3 runs" in captured.out

    index = site / "index.html"
    assert index.is_file()
    for run_id in ids:
        assert (site / "runs" / f"{run_id}.html").is_file()
    pages = [index, *sorted((site / "runs").glob("*.html"))]
    assert len(pages) == 4
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "<script" not in text.lower()  # no JS at all, no payload
        assert not re.search(r"""(src|href)=["']?(https?:|//|/)""", text), page
        for href in _links(page):
            parts = urlsplit(href)
            assert not parts.scheme and not parts.netloc and not href.startswith("/"), href
            assert (page.parent / unquote(parts.path)).is_file(), f"{page}: dead link {href}"

    html = index.read_text(encoding="utf-8")
    dom = DomIndex(html)
    charts = [a for t, a in dom.elements if t == "svg" and a.get("class") == "trend"]
    assert {a.get("data-metric") for a in charts} == TRENDS
    assert html.count("<polyline") >= 3  # the hallucination rate is defined too
    # newest run first in the run list
    listed = [href for href in _links(index) if href.startswith("runs/")]
    assert listed[:3] == [f"runs/{i}.html" for i in reversed(ids)]
    # per-case history: the case that failed once and recovered is flagged, no other
    flaky_rows = [
        a.get("data-case")
        for t, a in dom.elements
        if t == "tr" and "flaky-case" in (a.get("class") or "")
    ]
    assert flaky_rows == [FAILING_CASE]
    row = html.split(f'data-case="{FAILING_CASE}"', 1)[1].split("</tr>", 1)[0]
    assert "flaky" in row and row.count("FAIL") == 1 and row.count("PASS") == 2

    detail = (site / "runs" / f"{ids[1]}.html").read_text(encoding="utf-8")
    assert "../index.html" in detail and "missing status 401" in detail
    # autoescape (markupsafe) writes a quote as &#39;
    assert "&lt;script&gt;document.title=&#39;PWNED&#39;&lt;/script&gt;" in detail

    loaded = browser.dump_dom(index)
    assert loaded.console == [], "console messages:\n" + "\n".join(loaded.console)
    assert DomIndex(loaded.dom).title == "Golden evaluation history"
    assert "flaky-case" in loaded.dom and 'data-metric="overallPassRate"' in loaded.dom
    run_page = browser.dump_dom(site / "runs" / f"{ids[1]}.html")
    assert run_page.console == []
    assert DomIndex(run_page.dom).title == f"Run {ids[1]}"
    assert not DomIndex(run_page.dom).with_attr("onerror")
    png = pytester.path / "site.png"
    shot = browser.screenshot(index, png, size="1280,1600")
    assert shot.console == []
    assert png.read_bytes().startswith(b"\x89PNG") and png.stat().st_size > 10_000


def test_main_site_without_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main_site(["--out", str(tmp_path / "site"), "--runs", str(tmp_path / "none")]) == 4
    assert "no readable run.json" in capsys.readouterr().err
    assert not (tmp_path / "site").exists()


def test_load_runs_skips_unreadable(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "run.json").write_text('{"runId": "a", "cases": []}', encoding="utf-8")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "run.json").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "run.json").write_text("[1, 2]", encoding="utf-8")
    (tmp_path / "LATEST").write_text("a\n", encoding="utf-8")
    warnings: list[str] = []
    runs = load_runs(tmp_path, warnings)
    assert [r.run_id for r in runs] == ["a"]
    assert len(warnings) == 2 and all("skipped" in w for w in warnings)
    assert load_runs(tmp_path) == runs  # the warning list is optional


def _cell(status: str, hits: int = 1, total: int = 1) -> Case:
    return Case.model_validate(
        {"caseId": "c", "status": status, "successRate": {"hits": hits, "total": total}}
    )


def test_flaky_means_back_and_forth() -> None:
    assert flips([_cell("PASS"), _cell("FAIL")]) == 1
    assert not is_flaky([_cell("PASS"), _cell("FAIL"), _cell("FAIL")])  # a regression
    assert is_flaky([_cell("PASS"), _cell("FAIL"), None, _cell("PASS")])
    assert flips([_cell("PASS"), _cell("ERROR"), _cell("SKIPPED"), _cell("PASS")]) == 0
    assert is_flaky([_cell("PASS", 2, 3)])  # attempts disagree within one run


def test_build_site_escapes_and_names_pages_safely(tmp_path: Path) -> None:
    runs: list[dict[str, Any]] = [
        {
            "runId": "../evil<1>",
            "timestamp": "2026-01-01T00:00:00Z",
            "protocol": {"datasetId": "<b>ds</b>", "mode": "FIXTURE", "attempts": 1},
            "metrics": {
                "overallPassRate": {
                    "hits": 1,
                    "total": 2,
                    "rate": 0.5,
                    "ci95": {"lower": 0.1, "upper": 0.9, "method": "wilson"},
                }
            },
            "cases": [
                {
                    "caseId": "<i>c</i>",
                    "status": "FAIL",
                    "successRate": {"hits": 0, "total": 1},
                    "metadata": {"prompt": PAYLOAD},
                    "attempts": [],
                }
            ],
        },
        {
            "runId": "../evil<1>",
            "timestamp": "2026-01-02T00:00:00Z",
            "protocol": {"datasetId": "<b>ds</b>", "mode": "FIXTURE", "attempts": 1},
            "cases": [],
        },
    ]
    index = build_site(tmp_path / "out", [typed_run(r) for r in runs])
    pages = sorted(p.name for p in (tmp_path / "out" / "runs").iterdir())
    assert pages == ["evil_1-2.html", "evil_1.html"]
    assert not (tmp_path / "evil_1.html").exists()
    text = index.read_text(encoding="utf-8")
    assert "<b>ds</b>" not in text and "&lt;b&gt;ds&lt;/b&gt;" in text
    assert "<i>c</i>" not in text
    detail = (tmp_path / "out" / "runs" / "evil_1.html").read_text(encoding="utf-8")
    dom = DomIndex(detail)
    assert not {t for t, _ in dom.elements} & {"script", "img"}
