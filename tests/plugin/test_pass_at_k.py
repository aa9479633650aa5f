"""metrics.passAtK end to end: written to run.json and report.md only with repeated attempts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import RunFiles


def test_repeated_attempts_report_pass_at_k_and_single_attempts_do_not(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, plugin_args: list[str]
) -> None:
    fixture = golden_project / "golden/generation/fixtures/e2e-login-happy-alice.out.md"
    fixture.write_text("no contract header at all\n")
    result = pytester.runpytest(
        "--golden=generation-v1", "--golden-attempts=3", "--golden-no-gate", *plugin_args
    )
    assert result.ret == 1, result.stdout.str()  # the broken case fails its 3 attempts
    table = run_files.latest()["metrics"]["passAtK"]
    assert table["cases"] == 10 and table["seed"] == 0
    assert [row["k"] for row in table["byK"]] == [1, 2, 3]
    for row in table["byK"]:
        # Recorded answers repeat: every case passes all its attempts or none.
        assert row["passAtK"] == pytest.approx(0.9) and row["passHatK"] == pytest.approx(0.9)
        assert row["passAtKCi95"]["lower"] < 0.9 < row["passAtKCi95"]["upper"] == 1.0
    report = (run_files.latest_dir() / "report.md").read_text(encoding="utf-8")
    assert "## Repeated attempts: pass@k and pass^k" in report
    assert "| 3 | 10 | 90.0% |" in report

    result = pytester.runpytest("--golden=generation-v1", "--golden-no-gate", *plugin_args)
    assert result.ret == 1, result.stdout.str()
    assert "passAtK" not in run_files.latest()["metrics"]
    assert "pass@k" not in (run_files.latest_dir() / "report.md").read_text(encoding="utf-8")
