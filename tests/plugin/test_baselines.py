"""Baselines, comparison and the gate, black-box (serially: decided on the controller), plus the
goldeval CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import SERIAL_ONLY, RunFiles, run_cli

HAPPY = "golden/generation/fixtures/e2e-login-happy-alice.out.md"


def test_save_writes_diffable_baseline_and_history(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    result = pytester.runpytest("--golden=holdout-v1", "--golden-save-baseline=baselines/new.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*baseline saved to*new.json*"])
    doc = json.loads((golden_project / "baselines/new.json").read_text())
    assert doc["protocol"]["datasetId"] == "holdout-v1"
    assert "qualityGate" not in doc and "durationMs" not in doc
    assert all("output" not in a for c in doc["cases"] for a in c["attempts"])
    history = (golden_project / "baselines/history.jsonl").read_text().splitlines()
    assert json.loads(history[-1])["baseline"] == "new.json"


def test_save_refuses_to_overwrite_without_force(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    result = pytester.runpytest(
        "--golden=holdout-v1", "--golden-save-baseline=baselines/holdout-v1.json"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*already exists; pass --golden-force-save-baseline*"])
    result = pytester.runpytest(
        "--golden=holdout-v1",
        "--golden-save-baseline=baselines/holdout-v1.json",
        "--golden-force-save-baseline",
    )
    assert result.ret == 0


def test_save_refuses_a_run_with_errors(pytester: pytest.Pytester, golden_project: Path) -> None:
    pytester.makeconftest(
        """
        import pytest
        from goldeval import ProviderError

        @pytest.fixture(scope="session")
        def golden_provider():
            def app(case):
                raise ProviderError("TIMEOUT", "slow")
            return app
        """
    )
    result = pytester.runpytest("--golden=holdout-v1", "--golden-save-baseline=baselines/x.json")
    assert result.ret == 75
    assert not (golden_project / "baselines/x.json").exists()
    result.stdout.fnmatch_lines(["*baseline not saved*"])


@SERIAL_ONLY
def test_regression_gives_new_failure_and_exit_1(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, plugin_args: list[str]
) -> None:
    (golden_project / HAPPY).write_text("RAG: po-chain, seed-account\n// Invalid password\n")
    result = pytester.runpytest("--golden=generation-v1", *plugin_args)
    assert result.ret == 1
    run = run_files.latest()
    classes = {c["caseId"]: c["class"] for c in run["comparison"]["cases"]}
    assert classes["e2e-login-happy-alice"] == "NEW_FAILURE"
    assert run["comparison"]["decision"] == "REGRESSION"
    assert run["comparison"]["mcnemar"]["n01"] == 1
    report = (run_files.latest_dir() / "report.md").read_text()
    assert "## Regression" in report and "## Quality gate" in report and "**FAIL**" in report


def test_critical_new_failure_rule(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    # no absolute thresholds: only the pair rules can fail the gate
    manifest = golden_project / "golden/generation/dataset.yaml"
    text = manifest.read_text().replace("overallPassRate: 1.0, contractPassRate: 1.0, ", "")
    text = text.replace("layerAccuracy: 1.0, ragAccuracy: 1.0, ", "")
    manifest.write_text(text)
    (golden_project / HAPPY).write_text(
        (golden_project / HAPPY)
        .read_text()
        .replace("RAG: po-chain, seed-account", "RAG: po-chain, seed-account, api-json-schema")
    )
    result = pytester.runpytest("--golden=generation-v1")
    assert result.ret == 1
    run = run_files.latest()
    rules = {r["name"]: r for r in run["qualityGate"]["rules"]}
    assert not rules["criticalNewFailure.e2e-login-happy-alice"]["passed"]
    assert "overallPassRate" not in rules  # the gate policy is not part of the protocol
    assert run["comparison"]["decision"] == "REGRESSION"


@pytest.mark.parametrize(
    "edit,reason",
    [
        (lambda d: d["metrics"]["overallPassRate"].update(hits=9), "metrics.overallPassRate"),
        (lambda d: d.update(casesPassed=9), "do not add up"),
        (lambda d: d["cases"].pop(), "cases listed"),
    ],
    ids=["hand-edited-metric", "counters", "missing-case"],
)
def test_tampered_baseline_is_rejected_with_its_reason(
    pytester: pytest.Pytester, golden_project: Path, edit, reason
) -> None:
    path = golden_project / "baselines/generation-v1.json"
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    result = pytester.runpytest("--golden=generation-v1")
    assert result.ret == 65
    result.stdout.fnmatch_lines([f"*baseline rejected*{reason}*"])


def test_truncated_baseline(pytester: pytest.Pytester, golden_project: Path) -> None:
    path = golden_project / "baselines/generation-v1.json"
    path.write_text(path.read_text()[:500])
    result = pytester.runpytest("--golden=generation-v1")
    assert result.ret == 65
    result.stdout.fnmatch_lines(["*baseline rejected*invalid JSON*"])


def test_baseline_of_another_dataset_is_incomparable(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    result = pytester.runpytest(
        "--golden=generation-v1", "--golden-baseline=baselines/holdout-v1.json"
    )
    assert result.ret == 65
    result.stdout.fnmatch_lines(
        ["*datasetId mismatch: baseline holdout-v1 vs candidate generation-v1*"]
    )


def test_dataset_changed_without_version_bump(
    pytester: pytest.Pytester, golden_project: Path, rows_file
) -> None:
    rows = rows_file("generation")
    rows.write_text(rows.read_text(encoding="utf-8").replace("smoke", "smoky"), encoding="utf-8")
    result = pytester.runpytest("--golden=generation-v1")
    assert result.ret == 65
    result.stdout.fnmatch_lines(["*dataset changed without a version bump*"])


def test_attempts_mismatch_is_65_and_no_gate_reports_only(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    assert pytester.runpytest("--golden=generation-v1", "--golden-attempts=2").ret == 65
    assert (
        pytester.runpytest("--golden=generation-v1", "--golden-attempts=2", "--golden-no-gate").ret
        == 0
    )


_cli = run_cli


def test_cli_compare_and_gate_use_the_same_exit_codes(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    assert pytester.runpytest("--golden=generation-v1").ret == 0
    run = str(run_files.latest_dir() / "run.json")
    ok = _cli("gate", run, cwd=golden_project)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "GATE PASS" in ok.stdout
    same = _cli("compare", "baselines/generation-v1.json", run, cwd=golden_project)
    assert same.returncode == 0 and "NO_REGRESSION" in same.stdout
    other = _cli("compare", "baselines/holdout-v1.json", run, cwd=golden_project)
    assert other.returncode == 65
    (golden_project / HAPPY).write_text("nothing useful")
    pytester.runpytest("--golden=generation-v1", "--golden-no-gate")
    bad = _cli("gate", str(run_files.latest_dir() / "run.json"), "--json", cwd=golden_project)
    assert bad.returncode == 1
    assert json.loads(bad.stdout)["qualityGate"]["verdict"] == "FAIL"
    missing = _cli("gate", "nope.json", cwd=golden_project)
    # A run that is not there is a usage error (4), not an incomparable run (65).
    assert missing.returncode == 4 and "baseline file not found" not in missing.stdout


def test_cli_verify_detects_changed_artifacts(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    pytester.runpytest("--golden=generation-v1", "--golden-artifacts=always")
    run_dir = run_files.latest_dir()
    assert _cli("verify", str(run_dir), cwd=golden_project).returncode == 0
    (run_dir / "summary.json").write_text("{}")
    (run_dir / "cases/e2e-login-happy-alice/output.md").unlink()
    out = _cli("verify", str(run_dir), cwd=golden_project)
    assert out.returncode == 65
    assert "changed: summary.json" in out.stdout
    assert "missing: cases/e2e-login-happy-alice/output.md" in out.stdout
