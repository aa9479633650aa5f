"""Each variant's own baseline (issue 35), on examples/prompt-ab in fixture mode: saved one
file per variant with ``{variant}`` in the path, found again by the default lookup (a
variant's run compares only with its own variant's baseline), a regression of one variant
caught against its baseline, serially and under xdist. Baseline options a side-by-side
session cannot honour are usage errors, never silently ignored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.examples.test_examples import copy_example

SAVE = "--golden-save-baseline=baselines/faq-ab-v1-{variant}.json"
BROKEN_ROW = "price-a-map-of-winter"


def _latest_runs(project: Path) -> dict[str, dict[str, Any]]:
    runs = [json.loads(p.read_text()) for p in (project / ".goldeval/runs").glob("*/run.json")]
    latest: dict[str, dict[str, Any]] = {}
    for run in sorted(runs, key=lambda r: r["runId"]):
        latest[run["variant"]] = run
    return latest


@pytest.mark.parametrize("args", [[], ["-n", "2"]], ids=["serial", "xdist2"])
def test_each_variant_saves_and_is_gated_on_its_own_baseline(
    pytester: pytest.Pytester, args: list[str]
) -> None:
    project = copy_example("prompt-ab", pytester)
    saved = pytester.runpytest("--golden=faq-ab-v1", SAVE, *args)
    assert saved.ret == 0, saved.stdout.str()
    for name in ("control", "concise"):
        doc = json.loads((project / f"baselines/faq-ab-v1-{name}.json").read_text())
        assert doc["protocol"]["variant"] == name
    # Saving again would overwrite them: refused before any item, for either variant.
    again = pytester.runpytest("--golden=faq-ab-v1", SAVE, *args)
    assert again.ret == pytest.ExitCode.USAGE_ERROR
    again.stderr.fnmatch_lines(["*baselines/faq-ab-v1-control.json: baseline already exists*"])

    rerun = pytester.runpytest("--golden=faq-ab-v1", *args)
    assert rerun.ret == 0, rerun.stdout.str()
    runs = _latest_runs(project)
    for name in ("control", "concise"):
        run = runs[name]
        assert run["baselinePath"] == f"baselines/faq-ab-v1-{name}.json"
        assert run["comparison"]["decision"] == "NO_REGRESSION"
        assert run["qualityGate"]["verdict"] == "PASS"

    # One concise answer breaks: its own baseline catches the regression (the paired
    # comparison alone, one case in forty at a 10-point margin, would not say INFERIOR).
    fixture = project / f"golden/faq-ab/fixtures/concise/{BROKEN_ROW}.out.md"
    fixture.write_text("I do not know.", encoding="utf-8")
    broken = pytester.runpytest("--golden=faq-ab-v1", *args)
    assert broken.ret == 1, broken.stdout.str()
    runs = _latest_runs(project)
    assert runs["concise"]["qualityGate"]["verdict"] == "FAIL"
    assert runs["concise"]["comparison"]["decision"] == "REGRESSION"
    assert runs["concise"]["comparison"]["regressions"] == 1
    assert BROKEN_ROW in json.dumps(runs["concise"]["comparison"]["cases"])
    assert runs["control"]["qualityGate"]["verdict"] == "PASS"
    assert runs["concise"]["variantComparison"]["flippedWorse"] == [BROKEN_ROW]
    # The terminal names each variant's own comparison under its table.
    broken.stdout.fnmatch_lines_random(
        [
            "*baseline: REGRESSION vs baselines/faq-ab-v1-concise.json*",
            "*baseline: NO_REGRESSION vs baselines/faq-ab-v1-control.json*",
        ]
    )

    # Without its baseline the concise run is weighed by the comparison alone: the control's
    # baseline is not "its" baseline (no exit 65 for a variant mismatch).
    (project / "baselines/faq-ab-v1-concise.json").unlink()
    alone = pytester.runpytest("--golden=faq-ab-v1", *args)
    runs = _latest_runs(project)
    assert "baselinePath" not in runs["concise"]
    assert runs["control"]["baselinePath"] == "baselines/faq-ab-v1-control.json"
    assert alone.ret == 1  # INCONCLUSIVE: one flipped case, the margin cannot be shown
    assert runs["concise"]["variantComparison"]["decision"] == "INCONCLUSIVE"
    # One variant picked is an ordinary run: its own baseline, no other variant's.
    one = pytester.runpytest("--golden=faq-ab-v1", "--golden-variants=control", *args)
    assert one.ret == 0, one.stdout.str()
    picked = pytester.runpytest("--golden=faq-ab-v1", "--golden-variants=concise", *args)
    assert picked.ret == 1
    assert "comparison invalid" not in picked.stdout.str()


def test_a_typed_path_must_say_where_each_variant_goes(pytester: pytest.Pytester) -> None:
    project = copy_example("prompt-ab", pytester)
    for option in ("--golden-save-baseline=b.json", "--golden-baseline=b.json"):
        result = pytester.runpytest("--golden=faq-ab-v1", option)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*2 variants run, each with its own baseline*{variant}*"])
    assert not (project / "b.json").exists()
    missing = pytester.runpytest("--golden=faq-ab-v1", "--golden-baseline=b-{variant}.json")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*b-{variant}.json: baseline file not found*for variant*"])
