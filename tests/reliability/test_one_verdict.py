"""One verdict for every surface (issue 31): labels and codes that agree everywhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import RunFiles, run_cli

HAPPY = "golden/generation/fixtures/e2e-login-happy-alice.out.md"
THRESHOLDS = re.compile(r"thresholds: \{overallPassRate: 1\.0, [^}]*\}")


def _thresholds_only_gate(project: Path) -> None:
    manifest = project / "golden/generation/dataset.yaml"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(THRESHOLDS.sub("thresholds: {overallPassRate: 0.8}", text), "utf-8")


def test_new_failures_are_never_labelled_no_regression(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    _thresholds_only_gate(golden_project)
    (golden_project / HAPPY).write_text("RAG: po-chain, seed-account\n// Invalid password\n")
    result = pytester.runpytest("--golden=generation-v1")
    out = result.stdout.str()
    # The thresholds still hold (9 of 10 pass), so the gate passes; the comparison found a
    # new failure, and the label says so and that the gate does not weigh it.
    assert result.ret == 0, out
    assert "baseline: NO_REGRESSION" not in out
    result.stdout.fnmatch_lines(
        [
            "*baseline: NEW_FAILURES_NOT_GATED*",
            "*the comparison found 1 new failure; the gate does not weigh them*allowedRegression*",
        ]
    )
    run = run_files.latest()
    assert run["comparison"]["counts"]["NEW_FAILURE"] == 1
    report = (run_files.latest_dir() / "report.md").read_text(encoding="utf-8")
    assert "Decision: **NEW_FAILURES_NOT_GATED**" in report
    assert "NO_REGRESSION" not in report
    shown = run_cli(
        "compare",
        "baselines/generation-v1.json",
        str(run_files.latest_dir() / "run.json"),
        cwd=golden_project,
    )
    assert "NO_REGRESSION" not in shown.stdout, shown.stdout


def test_init_writes_the_allowed_regression_line_commented(tmp_path: Path) -> None:
    result = run_cli("init", "my-bot", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    manifest = (tmp_path / "golden/my-bot/dataset.yaml").read_text(encoding="utf-8")
    assert "# allowedRegression: 0.0" in manifest
