"""The history site draws one trend line per comparable protocol and shows exit-65 runs as
"not comparable", never as a gate FAIL (docs/reports.md)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from goldeval.reports.site import main_site
from goldeval.reports.site_charts import protocol_key
from goldeval.results.documents import RunDocument, typed_run
from tests.helpers import RunFiles


def _series(svg: str) -> dict[str, str]:
    """data-protocol → the SVG markup of that protocol's line."""
    return dict(re.findall(r'<g class="series" data-protocol="([0-9a-f]+)">(.*?)</g>', svg))


def _chart(index: str, metric: str) -> str:
    match = re.search(rf'<svg class="trend" data-metric="{metric}".*?</svg>', index, re.S)
    assert match, metric
    return match.group(0)


def test_two_protocols_two_lines_and_exit_65_not_comparable(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    ids: dict[str, list[str]] = {"whole": [], "subset": []}
    for _ in range(2):
        whole = pytester.runpytest("--golden=generation-v1")
        assert whole.ret == 0, whole.stdout.str()
        ids["whole"].append(run_files.latest()["runId"])
    # Another selection: another protocol, and not comparable with the baseline (exit 65
    # after the run: with a run key the selection is only known once the run is merged).
    for key in ("sub-1", "sub-2"):
        subset = pytester.runpytest(
            "--golden=generation-v1", "-k", "api", f"--golden-run-key={key}"
        )
        assert subset.ret == 65, subset.stdout.str()
        ids["subset"].append(run_files.latest()["runId"])
    site = pytester.path / "site"
    assert main_site(["--out", str(site), "--runs", str(run_files.runs)]) == 0
    index = (site / "index.html").read_text(encoding="utf-8")

    for metric in ("overallPassRate", "contractPassRate"):
        series = _series(_chart(index, metric))
        assert len(series) == 2, series.keys()
        for group in ids.values():
            (line,) = [s for s in series.values() if all(i in s for i in group)]
            # Each line joins its own two runs only.
            polylines = re.findall(r'<polyline points="([^"]+)"', line)
            assert len(polylines) == 1 and len(polylines[0].split()) == 2
            others = [i for g in ids.values() if g is not group for i in g]
            assert not any(i in line for i in others)
        (subset_line,) = [s for s in series.values() if ids["subset"][0] in s]
        assert subset_line.count('class="not-comparable"') == 2
        assert "not comparable with its baseline (exit 65)" in subset_line
        (whole_line,) = [s for s in series.values() if ids["whole"][0] in s]
        assert "not-comparable" not in whole_line

    # The legend names both protocols, with their runs counted.
    legend = re.findall(r'<li data-protocol="([0-9a-f]+)">', index)
    assert len(legend) == 2

    # Run list: the exit-65 runs' gate column says "not comparable", never FAIL.
    rows = re.findall(r"<tr><td><a href=\"runs/[^\"]+\">([^<]+)</a></td>(.*?)</tr>", index)
    by_id = dict(rows)
    for run_id in ids["subset"]:
        gate_cell = re.findall(r"<td>(.*?)</td>", by_id[run_id])[-1]
        assert "not comparable" in gate_cell and "FAIL" not in gate_cell
    for run_id in ids["whole"]:
        gate_cell = re.findall(r"<td>(.*?)</td>", by_id[run_id])[-1]
        assert "PASS" in gate_cell
    page = next((site / "runs").glob(f"{ids['subset'][0]}*.html")).read_text(encoding="utf-8")
    assert "not comparable</span>: exit 65" in page


def _run(**protocol: Any) -> RunDocument:
    base = {
        "datasetId": "d-v1",
        "datasetHash": "h1",
        "mode": "LIVE",
        "attempts": 1,
        "selectedCaseIds": ["a", "b"],
        "provider": "ollama",
        "model": "m1",
        "judgeEnabled": False,
        "judgeModel": None,
    }
    return typed_run({"protocol": {**base, **protocol}})


@pytest.mark.parametrize(
    "change",
    [
        {"datasetHash": "h2"},
        {"selectedCaseIds": ["a"]},
        {"attempts": 3},
        {"mode": "DETERMINISTIC"},
        {"model": "m2"},
        {"selectedAttempts": {"a": [1]}},
        {"judgeEnabled": True, "judgeModel": "j"},
    ],
)
def test_protocol_key_separates_what_is_not_comparable(change: dict[str, Any]) -> None:
    assert protocol_key(_run(**change)) != protocol_key(_run())


def test_protocol_key_ignores_what_comparison_ignores() -> None:
    assert protocol_key(_run(selectedCaseIds=["b", "a"])) == protocol_key(_run())
    # Not live: the model is not part of the protocol (recorded answers).
    fixture = {"mode": "DETERMINISTIC"}
    assert protocol_key(_run(**fixture, model="m2")) == protocol_key(_run(**fixture))
    assert protocol_key(_run(judgeModel="other")) == protocol_key(_run())
