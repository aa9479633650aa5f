"""One verdict for every surface (issue 31): labels and codes that agree everywhere."""

from __future__ import annotations

import json
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
    # The JSON surfaces say the same word (a CI job reads run.json or `compare --json`).
    assert run["comparison"]["decision"] == "NEW_FAILURES_NOT_GATED", run["comparison"]
    assert "allowedRegression" in run["comparison"]["decisionWhy"]
    as_json = run_cli(
        "compare",
        "baselines/generation-v1.json",
        str(run_files.latest_dir() / "run.json"),
        "--json",
        cwd=golden_project,
    )
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["comparison"]["decision"] == "NEW_FAILURES_NOT_GATED"


def test_init_writes_the_allowed_regression_line_commented(tmp_path: Path) -> None:
    result = run_cli("init", "my-bot", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    manifest = (tmp_path / "golden/my-bot/dataset.yaml").read_text(encoding="utf-8")
    assert "# allowedRegression: 0.0" in manifest


# ------------------------------------------------------------------ one code on every surface
#
# Each outcome is produced by a real pytest run; then the saved run is gated again by
# `goldeval gate` (and compared with the committed baseline by `goldeval compare` where the run
# is comparable): the code and the reason must be the ones the session decided.

LIVE = ["--golden-mode=live", "--golden-model=fake-llm:latest", "-p", "no:cacheprovider"]


def _outcome_args(name: str, project: Path, llm: object) -> tuple[list[str], bool]:
    """The pytest arguments that produce outcome ``name``, and whether the run is gated."""
    from goldeval.testing.llm_server import Fault

    base = getattr(llm, "base_url", "")
    live = [*LIVE, f"--golden-base-url={base}", "--golden-no-gate", "--golden-retries=0"]
    if name == "pass":
        return [], True
    if name in ("regression", "stopped early (-x)"):
        (project / HAPPY).write_text("RAG: po-chain, seed-account\n// Invalid password\n")
        return (["-x"] if name.endswith("(-x)") else []), True
    if name == "provider down":
        llm.set_fault(Fault.status(503))  # type: ignore[attr-defined]
        return live, False
    if name == "auth error":
        llm.set_fault(Fault.status(401))  # type: ignore[attr-defined]
        return live, False
    if name == "deadline":
        llm.set_fault(Fault.hang(60))  # type: ignore[attr-defined]
        deadline = ["--golden-timeout=10", "--golden-concurrency=2", "--golden-deadline=3"]
        return [*live, *deadline], False
    if name == "budget":
        return [*live, "--golden-max-tokens=1"], False
    if name == "nothing selected (-k)":
        return ["-k", "no-such-case"], True
    raise AssertionError(name)


OUTCOMES = {
    "pass": 0,
    "regression": 1,
    "stopped early (-x)": 1,
    "provider down": 75,
    "auth error": 4,
    "deadline": 75,
    "budget": 1,
    # `goldeval gate` said 1 ("no golden case selected") for the session's 5
    "nothing selected (-k)": 5,
}


@pytest.mark.parametrize("name", list(OUTCOMES))
def test_every_surface_gives_the_session_s_code_and_reason(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, llm: object, name: str
) -> None:
    args, gated = _outcome_args(name, golden_project, llm)
    result = pytester.runpytest("--golden=generation-v1", *args)
    out = result.stdout.str()
    assert result.ret == OUTCOMES[name], out
    run_json = run_files.latest_dir() / "run.json" if name != "stopped early (-x)" else None
    if run_json is None:  # an early stop is not LATEST: take its folder
        (run_dir,) = [d for d in run_files.runs.iterdir() if d.is_dir()]
        run_json = run_dir / "run.json"
    import json

    decision = json.loads(run_json.read_text(encoding="utf-8"))["exitDecision"]
    assert decision["code"] == result.ret
    result.stdout.fnmatch_lines([f"goldeval decision: exit {result.ret} — *"])
    gate = run_cli("gate", str(run_json), *([] if gated else ["--no-gate"]), cwd=golden_project)
    assert gate.returncode == result.ret, gate.stdout + gate.stderr
    assert decision["reason"].split(";")[0] in gate.stdout + gate.stderr
    if gated and name != "nothing selected (-k)":  # no case to compare
        shown = run_cli(
            "compare", "baselines/generation-v1.json", str(run_json), cwd=golden_project
        )
        assert shown.returncode == result.ret, shown.stdout + shown.stderr
