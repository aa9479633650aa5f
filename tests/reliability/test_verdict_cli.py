"""Verdicts outside pytest and before the run (issues 15 and 16): no false green anywhere.

* ``goldeval gate`` / ``goldeval compare`` find the run's project (recorded root, the folders
  above the run file, ``--root``) or refuse with exit 4; they never gate with no policy.
* Gate thresholds are checked when the manifest is read (typos, ``grader.<name>``, ranges).
* A baseline that cannot be used is refused before the first model call (0 server calls).
* A capture run says what it captured, FAILs included.
* One malformed run.json: ``goldeval site`` skips it with a warning; gate/compare exit 65.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from goldeval.cli import main as cli
from goldeval.testing.llm_server import FakeLLMServer
from tests.helpers import SERIAL_ONLY, RunFiles, chat_calls, run_cli

HAPPY = "golden/generation/fixtures/e2e-login-happy-alice.out.md"
MANIFEST = "golden/generation/dataset.yaml"
LIVE = ("--golden=generation-v1", "--golden-mode=live", "--golden-model=fake-llm:latest")


_cli = run_cli


def _decision(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("goldeval decision:")]
    return lines[-1] if lines else ""


@pytest.fixture
def regressed_run(pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles) -> Path:
    """A fixture run of generation-v1 with one case broken (the gate fails it: exit 1)."""
    (golden_project / HAPPY).write_text("RAG: po-chain, seed-account\n// nothing useful\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1")
    assert result.ret == 1, result.stdout.str()
    return run_files.latest_dir() / "run.json"


def _elsewhere(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder outside the project, with no golden/ of its own."""
    return tmp_path_factory.mktemp("elsewhere")


# -- 1. the project of a saved run --------------------------------------------------------


@pytest.mark.parametrize("command", ["gate", "compare"])
def test_gate_and_compare_from_another_folder_keep_the_gate(
    regressed_run: Path,
    golden_project: Path,
    tmp_path_factory: pytest.TempPathFactory,
    command: str,
) -> None:
    cwd = _elsewhere(tmp_path_factory)
    args = [str(regressed_run)]
    if command == "compare":
        args = [str(golden_project / "baselines/generation-v1.json"), *args]
    proc = _cli(command, *args, cwd=cwd)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "NO_REGRESSION" not in out and "GATE PASS" not in out
    assert "GATE FAIL" in _decision(proc)
    assert f"dataset and gate policy: {golden_project / 'golden' / 'generation'}" in out


def test_run_document_records_where_it_came_from(regressed_run: Path, golden_project: Path) -> None:
    run = json.loads(regressed_run.read_text(encoding="utf-8"))
    # Relative to the project root (issue 33): "." is the root itself.
    assert run["projectRoot"] == "."
    assert run["goldenRoot"] == "golden"
    assert run["configuration"]["outputDir"] == ".goldeval/runs"
    assert run["baselinePath"] == "baselines/generation-v1.json"
    baseline = json.loads((golden_project / "baselines/generation-v1.json").read_text())
    assert "projectRoot" not in baseline  # where a run was made is not what it measured


def test_run_folder_names_no_absolute_path_of_the_machine(
    regressed_run: Path, golden_project: Path
) -> None:
    """run.json, summary.json and manifest.json are downloaded and attached to CI jobs: the
    project's absolute path (a user name, a server layout) is in none of them (issue 33)."""
    folder = regressed_run.parent
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert {"run.json", "summary.json", "manifest.json"} <= set(names)
    for name in names:
        text = (folder / name).read_text(encoding="utf-8")
        assert str(golden_project) not in text, (name, text[:2000])
        assert str(golden_project.resolve()) not in text, name


def test_old_run_with_absolute_paths_still_finds_its_project(
    regressed_run: Path, golden_project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A run.json written before paths were relative: its absolute projectRoot still names
    the project, also for a copy outside it gated from a third folder."""
    doc = json.loads(regressed_run.read_text(encoding="utf-8"))
    doc["projectRoot"] = str(golden_project)
    doc["goldenRoot"] = str(golden_project / "golden")
    doc["configuration"]["outputDir"] = str(golden_project / ".goldeval/runs")
    doc["baselinePath"] = str(golden_project / "baselines/generation-v1.json")
    copy = _elsewhere(tmp_path_factory) / "old-run.json"
    copy.write_text(json.dumps(doc), encoding="utf-8")
    proc = _cli("gate", str(copy), cwd=_elsewhere(tmp_path_factory))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "GATE FAIL" in _decision(proc)
    assert f"dataset and gate policy: {golden_project / 'golden' / 'generation'}" in proc.stdout


def test_new_run_copied_outside_its_project_needs_root(
    regressed_run: Path, golden_project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A relative run.json names no folder of the machine, so a copy outside the project is
    found with --root (never gated against no policy)."""
    elsewhere = _elsewhere(tmp_path_factory)
    copy = elsewhere / "run.json"
    shutil.copy(regressed_run, copy)
    proc = _cli("gate", str(copy), cwd=elsewhere)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    rooted = _cli("gate", str(copy), "--root", str(golden_project), cwd=elsewhere)
    assert rooted.returncode == 1, rooted.stdout + rooted.stderr
    assert "GATE FAIL" in _decision(rooted)


def _strip_origin(run_json: Path, dest: Path) -> Path:
    doc = json.loads(run_json.read_text(encoding="utf-8"))
    doc.pop("projectRoot", None)
    doc.pop("goldenRoot", None)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(doc), encoding="utf-8")
    return dest


def test_run_without_recorded_root_is_found_from_its_own_location(
    regressed_run: Path, golden_project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # An older run.json (no projectRoot) still inside its project: the folders above it.
    copy = _strip_origin(regressed_run, golden_project / "ci-artifacts" / "run.json")
    proc = _cli("gate", str(copy), cwd=_elsewhere(tmp_path_factory))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "GATE FAIL" in _decision(proc)


@pytest.mark.parametrize("command", ["gate", "compare"])
def test_run_outside_any_project_is_a_usage_error_not_a_pass(
    regressed_run: Path,
    golden_project: Path,
    tmp_path_factory: pytest.TempPathFactory,
    command: str,
) -> None:
    elsewhere = _elsewhere(tmp_path_factory)
    copy = _strip_origin(regressed_run, elsewhere / "downloaded" / "run.json")
    baseline = elsewhere / "downloaded" / "baseline.json"
    shutil.copy(golden_project / "baselines/generation-v1.json", baseline)
    args = [str(copy)] if command == "gate" else [str(baseline), str(copy)]
    proc = _cli(command, *args, cwd=elsewhere)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 4, out
    assert "generation-v1" in proc.stderr and "--root" in proc.stderr
    assert "NO_REGRESSION" not in out and "Traceback" not in out
    # --root names the project: the gate applies again.
    rooted = _cli(command, *args, "--root", str(golden_project), cwd=elsewhere)
    assert rooted.returncode == 1, rooted.stdout + rooted.stderr
    assert "GATE FAIL" in _decision(rooted)
    # --golden-root names the datasets folder directly.
    by_golden = _cli(command, *args, "--golden-root", str(golden_project / "golden"), cwd=elsewhere)
    assert by_golden.returncode == 1, by_golden.stdout + by_golden.stderr
    # --no-gate reports only, and a FAIL attempt without a gate is still a failure.
    report_only = _cli(command, *args, "--no-gate", cwd=elsewhere)
    assert report_only.returncode == 1, report_only.stdout + report_only.stderr
    assert "every graded attempt ok" not in report_only.stdout


def test_recorded_root_of_another_machine_falls_back_to_the_location(
    regressed_run: Path, golden_project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    doc = json.loads(regressed_run.read_text(encoding="utf-8"))
    doc["projectRoot"] = "/nonexistent/ci/project"
    doc["goldenRoot"] = "/nonexistent/ci/project/golden"
    copy = golden_project / "downloaded-run.json"
    copy.write_text(json.dumps(doc), encoding="utf-8")
    proc = _cli("gate", str(copy), cwd=_elsewhere(tmp_path_factory))
    assert proc.returncode == 1, proc.stdout + proc.stderr


def test_explicit_golden_root_without_the_dataset_is_refused(
    regressed_run: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = _elsewhere(tmp_path_factory)
    (elsewhere / "golden").mkdir()
    proc = _cli("gate", str(regressed_run), "--golden-root", "golden", cwd=elsewhere)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "no gate policy" in proc.stderr


def test_unknown_dataset_in_the_working_directory_is_refused(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    # A run of a dataset this project does not have (renamed since): refuse, do not pass.
    assert pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1").ret == 0
    doc = run_files.latest()
    doc["protocol"]["datasetId"] = doc["datasetVersion"] = "renamed-v9"
    path = golden_project / "renamed.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    proc = _cli("gate", str(path), cwd=golden_project)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "renamed-v9" in proc.stderr


def test_cli_refuses_a_typo_in_the_gate_policy(regressed_run: Path, golden_project: Path) -> None:
    manifest = golden_project / MANIFEST
    manifest.write_text(manifest.read_text().replace("overallPassRate: 1.0", "overallPasRate: 1.0"))
    proc = _cli("gate", str(regressed_run), cwd=golden_project)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "gate.fixture.thresholds.overallPasRate" in proc.stderr
    assert "did you mean 'overallPassRate'" in proc.stderr


# -- 2. gate thresholds are manifest errors, found before anything runs --------------------

BAD_GATES = {
    "rate-typo": (
        ("overallPassRate: 1.0", "overallPasRate: 1.0"),
        ["gate.fixture.thresholds.overallPasRate", "did you mean 'overallPassRate'"],
    ),
    "grader-typo": (
        ("hallucinationRate: 0.0}", "hallucinationRate: 0.0, grader.citez: 1.0}"),
        ["gate.fixture.thresholds.grader.citez", "did you mean 'cites'"],
    ),
    "percent": (
        ("overallPassRate: 1.0", "overallPassRate: 60"),
        ["gate.fixture.thresholds.overallPassRate", "outside [0, 1]", "write 0.6"],
    ),
    "negative": (
        ("hallucinationRate: 0.0", "hallucinationRate: -0.1"),
        ["gate.fixture.thresholds.hallucinationRate", "outside [0, 1]"],
    ),
    "allowed-regression": (
        ("allowedRegression: 0.0", "allowedRegression: 5"),
        ["gate.live.allowedRegression", "outside [0, 1]"],
    ),
    "boolean": (
        ("overallPassRate: 1.0", "overallPassRate: true"),
        ["gate.fixture.thresholds.overallPassRate", "valid number"],
    ),
    "mode-typo": (
        ("  fixture:", "  fixtures:"),
        ["gate.fixtures", "did you mean 'fixture'"],
    ),
}


@pytest.mark.parametrize("name", list(BAD_GATES))
def test_bad_gate_threshold_is_a_usage_error_before_anything_runs(
    pytester: pytest.Pytester, golden_project: Path, name: str
) -> None:
    (old, new), expected = BAD_GATES[name]
    manifest = golden_project / MANIFEST
    text = manifest.read_text(encoding="utf-8")
    assert old in text
    manifest.write_text(text.replace(old, new, 1), encoding="utf-8")
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "dataset.yaml" in out
    for fragment in expected:
        assert fragment in out, (fragment, out[-3000:])
    assert "Traceback" not in out and "ValidationError" not in out
    assert "passed" not in out  # nothing ran
    assert not (golden_project / ".goldeval" / "runs").exists()


def test_unregistered_grader_threshold_refused_under_xdist_too(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    manifest = golden_project / MANIFEST
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(
        text.replace("hallucinationRate: 0.0}", "hallucinationRate: 0.0, grader.nosuch: 0.5}", 1),
        encoding="utf-8",
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1", *plugin_args)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "gate.fixture.thresholds.grader.nosuch" in out
    assert not (golden_project / ".goldeval" / "runs").exists()


def test_registered_grader_threshold_is_accepted(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    manifest = golden_project / MANIFEST
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(
        text.replace("hallucinationRate: 0.0}", "hallucinationRate: 0.0, grader.cites: 1.0}", 1),
        encoding="utf-8",
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--golden=generation-v1", "--golden-no-gate"
    )
    assert result.ret == 0, result.stdout.str()[-3000:]


# -- 3. everything that does not need an answer: before the first model call ---------------


@pytest.mark.parametrize(
    "extra,code,fragment",
    [
        (["--golden-baseline=baselines/nope.json"], 4, "baseline file not found"),
        (["--golden-baseline=baselines"], 4, "is not a regular file"),  # a folder: not "not found"
        (["--golden-baseline=/dev/zero"], 4, "is not a regular file"),
        (["--golden-baseline=baselines/holdout-v1.json"], 65, "datasetId mismatch"),
        (["--golden-baseline=baselines/generation-v1.json"], 65, "mode mismatch"),
    ],
    ids=["missing-file", "folder", "device", "other-dataset", "fixture-baseline-for-live"],
)
def test_bad_baseline_refused_before_the_first_model_call(
    pytester: pytest.Pytester,
    golden_project: Path,
    llm: FakeLLMServer,
    plugin_args: list[str],
    extra: list[str],
    code: int,
    fragment: str,
) -> None:
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        *LIVE,
        f"--golden-base-url={llm.base_url}",
        *extra,
        *plugin_args,
    )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == code, out[-3000:]
    assert fragment in out
    assert chat_calls(llm) == 0
    assert "Traceback" not in out
    assert not (golden_project / ".goldeval" / "runs").exists()


def test_tampered_baseline_refused_before_the_first_model_call(
    pytester: pytest.Pytester, golden_project: Path, llm: FakeLLMServer
) -> None:
    path = golden_project / "baselines/holdout-v1.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["casesPassed"] -= 1
    path.write_text(json.dumps(doc), encoding="utf-8")
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        *LIVE,
        f"--golden-base-url={llm.base_url}",
        "--golden-baseline=baselines/holdout-v1.json",
    )
    assert result.ret == 65, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["goldeval decision: exit 65 — baseline rejected: *casesTotal*"])
    assert chat_calls(llm) == 0


def test_live_protocol_mismatch_refused_before_the_first_model_call(
    pytester: pytest.Pytester,
    golden_project: Path,
    llm: FakeLLMServer,
    plugin_args: list[str],
) -> None:
    url = f"--golden-base-url={llm.base_url}"
    captured = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        *LIVE,
        url,
        "--golden-save-baseline=baselines/live-generation-v1.json",
    )
    assert captured.ret == 0, captured.stdout.str()[-3000:]
    calls = chat_calls(llm)
    assert calls >= 10  # one per case, plus any retry on a busy machine
    for extra, fragment in (
        (["-m", "smoke"], "selectedCaseIds mismatch"),
        (["--golden-attempts=2"], "attempts mismatch"),
        (["--golden-model=other-model"], "model mismatch"),
    ):
        result = pytester.runpytest("-p", "no:cacheprovider", *LIVE, url, *extra, *plugin_args)
        out = result.stdout.str() + result.stderr.str()
        assert result.ret == 65, (extra, out[-3000:])
        assert fragment in out and "refused before any item ran" in out
        assert chat_calls(llm) == calls, extra
    # The same protocol is not refused: the run goes ahead and is gated as usual.
    same = pytester.runpytest(
        "-p", "no:cacheprovider", *LIVE, url, "--golden-timeout=120", *plugin_args
    )
    out = same.stdout.str()
    assert "refused before any item ran" not in out, out[-3000:]
    assert same.ret in (0, 75), out[-3000:]  # 75 only if the busy machine timed a call out
    assert chat_calls(llm) >= calls + 10


def test_no_gate_still_runs_with_an_incomparable_baseline(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    # --golden-no-gate is report-only: the invalid comparison is reported, not refused.
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--golden=generation-v1", "-m", "smoke", "--golden-no-gate"
    )
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert run_files.latest()["comparison"]["decision"] == "COMPARISON_INVALID"


def test_empty_selection_keeps_pytest_exit_5(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    # Nothing selected is not an incomparable baseline: pytest's own "no tests" stands.
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--golden=generation-v1", "-m", "nonexistent", *plugin_args
    )
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED, result.stdout.str()[-3000:]
    assert "refused before any item ran" not in result.stdout.str()


def test_row_error_stays_a_collection_error(
    pytester: pytest.Pytester, golden_project: Path, rows_file: Any
) -> None:
    # The pre-flight loads the dataset too; a broken row is still collection's to report.
    with rows_file("generation").open("a", encoding="utf-8") as fh:
        fh.write('{"id": "x", "prompt": 5}\n')
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*golden-generation.jsonl:*: prompt: must be a string*"])


def test_collect_only_is_not_refused(pytester: pytest.Pytester, golden_project: Path) -> None:
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--golden=generation-v1", "-m", "smoke", "--collect-only"
    )
    assert result.ret == 0, result.stdout.str()[-3000:]


# -- 4. a capture run says what it captured --------------------------------------------------


@SERIAL_ONLY
def test_capture_with_fail_attempts_says_what_was_captured(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    (golden_project / HAPPY).write_text("nothing useful")
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--golden=generation-v1",
        "--golden-save-baseline=baselines/red.json",
        *plugin_args,
    )
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]
    assert "every graded attempt ok" not in out
    (line,) = [ln for ln in result.stdout.lines if ln.startswith("goldeval decision:")]
    assert "baseline captured: 10 cases, 1 FAIL (10 attempts: 9 PASS, 1 FAIL)" in line
    assert str(golden_project / "baselines/red.json") in line
    saved = json.loads((golden_project / "baselines/red.json").read_text(encoding="utf-8"))
    assert saved["casesFailed"] == 1 and saved["attemptsFailed"] == 1


def test_capture_of_a_clean_run_also_counts(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--golden=holdout-v1", "--golden-save-baseline=baselines/h.json"
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(["goldeval decision: exit 0 — baseline captured: * 0 FAIL *"])


# -- 5. one malformed run.json --------------------------------------------------------------

DAMAGE: dict[str, tuple[Any, str]] = {
    "cases-number": (lambda d: d.update(cases=5), "cases"),
    "protocol-string": (lambda d: d.update(protocol="x"), "protocol"),
    "configuration-list": (lambda d: d.update(configuration=[1]), "configuration"),
    "metrics-rate-string": (
        lambda d: d["metrics"].update(overallPassRate={"hits": "x", "total": 10}),
        "metrics.overallPassRate.hits",
    ),
    "selected-ids-number": (
        lambda d: d["protocol"].update(selectedCaseIds=5),
        "protocol.selectedCaseIds",
    ),
    "case-id-number": (lambda d: d["cases"][0].update(caseId=5), "cases[0].caseId"),
    "attempts-dict": (lambda d: d["cases"][1].update(attempts={}), "cases[1].attempts"),
    "gate-rules-string": (
        lambda d: d.update(qualityGate={"passed": True, "verdict": "PASS", "rules": "x"}),
        "qualityGate.rules",
    ),
}


@pytest.fixture
def good_run(pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles) -> Path:
    assert pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1").ret == 0
    return run_files.latest_dir() / "run.json"


def _damaged(good_run: Path, dest: Path, name: str) -> Path:
    doc = json.loads(good_run.read_text(encoding="utf-8"))
    DAMAGE[name][0](doc)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(doc), encoding="utf-8")
    return dest


def test_site_skips_malformed_runs_with_a_warning(good_run: Path, golden_project: Path) -> None:
    runs = golden_project / ".goldeval" / "runs"
    for name in DAMAGE:
        _damaged(good_run, runs / f"zz-{name}" / "run.json", name)
    proc = _cli("site", "--out", "site", cwd=golden_project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    for name, (_edit, field) in DAMAGE.items():
        warning = [ln for ln in proc.stderr.splitlines() if f"zz-{name}" in ln]
        assert len(warning) == 1 and "warning" in warning[0], (name, proc.stderr)
        assert f"{field}:" in warning[0], (name, warning)
        assert not (golden_project / "site" / "runs" / f"zz-{name}.html").exists()
    assert (golden_project / "site" / "runs" / f"{good_run.parent.name}.html").is_file()
    assert "1 run" in proc.stdout


def test_gate_and_compare_on_a_malformed_run_exit_65_naming_the_field(
    good_run: Path,
    golden_project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(golden_project)
    for name, (_edit, field) in DAMAGE.items():
        bad = _damaged(good_run, golden_project / "bad" / f"{name}.json", name)
        for args in (
            ["gate", str(bad)],
            ["compare", "baselines/generation-v1.json", str(bad)],
            ["compare", str(bad), str(good_run)],
        ):
            code = cli.main(args)
            err = capsys.readouterr().err
            assert code == 65, (name, args, err)
            assert f"{bad}: {field}:" in err, (name, err)
    # the same through the console script: one line on stderr, no traceback
    proc = _cli("gate", str(golden_project / "bad" / "protocol-string.json"), cwd=golden_project)
    assert proc.returncode == 65
    assert "protocol: must be an object" in proc.stderr and "Traceback" not in proc.stderr


WRONG_VALUES: list[Any] = [5, "x", [1, "a"], {"k": None}, None, True]


def _paths(doc: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """(container, key) of every value worth breaking: top level, protocol, configuration,
    one metric, the first case and its first attempt."""
    for key in list(doc):
        yield doc, key
    for name in ("protocol", "configuration"):
        for key in list(doc[name]):
            yield doc[name], key
    yield doc["metrics"], "overallPassRate"
    for key in list(doc["metrics"]["overallPassRate"]):
        yield doc["metrics"]["overallPassRate"], key
    for key in list(doc["cases"][0]):
        yield doc["cases"][0], key
    for key in list(doc["cases"][0]["attempts"][0]):
        yield doc["cases"][0]["attempts"][0], key


def test_no_damaged_field_crashes_gate_or_compare(
    good_run: Path,
    golden_project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every field of a real run.json replaced by every wrong kind of value: gate and compare
    return an exit code (65 naming the field, or a verdict when the value is acceptable), never
    an exception."""
    monkeypatch.chdir(golden_project)
    original = json.loads(good_run.read_text(encoding="utf-8"))
    path = golden_project / "fuzz.json"
    tried = 0
    for index, _ in enumerate(list(_paths(original))):
        for value in WRONG_VALUES:
            doc = json.loads(json.dumps(original))
            container, key = list(_paths(doc))[index]
            container[key] = value
            path.write_text(json.dumps(doc), encoding="utf-8")
            for argv in (["gate", str(path)], ["compare", str(good_run), str(path)]):
                code = cli.main(argv)
                out, err = capsys.readouterr()
                assert code in (0, 1, 4, 65), (key, value, argv, code, err)
                if code == 65:  # a refused file, or a comparison found invalid
                    assert "goldeval: " in err or "comparison invalid" in out, (key, value)
                tried += 1
    assert tried > 500


# -- 4. issue 31: one way to name a saved run, usage errors exit 4, cut-short runs --------


@pytest.fixture
def two_runs(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> tuple[Path, Path]:
    """A passing run (exit 0), then a regressed run under run key ``k-regressed`` (exit 1),
    which LATEST points at: the folders of both."""
    assert pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1").ret == 0
    good = run_files.latest_dir()
    (golden_project / HAPPY).write_text("RAG: po-chain, seed-account\n// nothing useful\n")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--golden=generation-v1", "--golden-run-key=k-regressed"
    )
    assert result.ret == 1, result.stdout.str()
    bad = run_files.latest_dir()
    assert bad != good
    return good, bad


def _json_decision(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)["exitDecision"]  # type: ignore[no-any-return]


def test_gate_finds_the_run_by_every_kind_of_reference(
    two_runs: tuple[Path, Path], golden_project: Path
) -> None:
    good, bad = two_runs
    runs = golden_project / ".goldeval" / "runs"
    references: list[list[str]] = [
        [],  # the latest run
        ["LATEST"],
        [str(runs / "LATEST")],
        [".goldeval/runs/LATEST/run.json"],  # LATEST is a file: read as the folder it names
        [str(bad)],
        [str(bad / "run.json")],
        [bad.name],  # a run id: the folder's name under the runs folder
        [".goldeval/runs"],  # the runs folder: its latest run
        ["k-regressed"],  # a run key, from the store
        [bad.name, "--runs", str(golden_project / "nowhere")],  # the run id, from the store
        ["--run-key", "k-regressed"],
    ]
    decisions = []
    for args in references:
        proc = _cli("gate", *args, "--json", cwd=golden_project)
        assert proc.returncode == 1, (args, proc.stdout[-2000:], proc.stderr)
        decisions.append(_json_decision(proc))
    assert decisions[0]["code"] == 1 and "GATE FAIL" in decisions[0]["reason"]
    assert all(d == decisions[0] for d in decisions), decisions
    # The other run, named by its id, is the other verdict: the names are not all "LATEST".
    proc = _cli("gate", good.name, "--json", cwd=golden_project)
    assert proc.returncode == 0 and _json_decision(proc)["code"] == 0
    # compare takes the same references for both sides
    proc = _cli("compare", good.name, "LATEST", "--json", cwd=golden_project)
    assert proc.returncode == 1 and _json_decision(proc) == decisions[0]
    proc = _cli("compare", str(good), "k-regressed", cwd=golden_project)
    assert proc.returncode == 1 and "REGRESSION" in proc.stdout


def test_show_takes_the_same_references(two_runs: tuple[Path, Path], golden_project: Path) -> None:
    good, bad = two_runs
    for args in ([], ["LATEST"], [str(bad)], [bad.name], ["k-regressed"]):
        proc = _cli("show", *args, cwd=golden_project)
        assert proc.returncode == 0, (args, proc.stderr)
        assert f"- Run: {bad.name}" in proc.stdout, args
    proc = _cli("show", str(good / "run.json"), cwd=golden_project)
    assert proc.returncode == 0 and f"- Run: {good.name}" in proc.stdout


def test_nothing_matching_is_a_usage_error_listing_what_is_accepted(
    golden_project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    proc = _cli("gate", "no-such-run", cwd=golden_project)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    for accepted in ("run.json", "run folder", "LATEST", "run id", "run key"):
        assert accepted in proc.stderr, accepted
    # No run yet: no LATEST, said so (not "invalid JSON", not "Is a directory").
    for command in ("gate", "show"):
        proc = _cli(command, cwd=golden_project)
        assert proc.returncode == 4, proc.stdout + proc.stderr
        assert "no latest run" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["gate", "--bogus"],  # unknown option
        ["gate", "missing.json"],  # a file that is not there
        ["compare", "baselines/generation-v1.json"],  # compare needs two runs
        ["compare", "missing.json", "baselines/generation-v1.json"],
        ["compare", "baselines/generation-v1.json", "missing.json"],
        ["gate", "golden"],  # a folder without run.json
        ["gate", "--run-key", "nope"],  # no store
        ["show", "nope"],
        ["site", "--out", "site"],  # no runs folder: nothing to render, not "gate failed"
        ["calibrate", "--golden", "no-such-dataset"],
    ],
)
def test_usage_errors_exit_4(
    argv: list[str],
    golden_project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(golden_project)
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code  # type: ignore[assignment]
    err = capsys.readouterr().err
    assert code == 4, (argv, err)
    assert "goldeval" in err and "Traceback" not in err


def test_site_outside_a_project_exits_4(tmp_path_factory: pytest.TempPathFactory) -> None:
    proc = _cli("site", "--out", "site", cwd=_elsewhere(tmp_path_factory))
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "no runs folder" in proc.stderr


@pytest.fixture
def stopped_run(pytester: pytest.Pytester, golden_project: Path) -> Path:
    """A run stopped by -x at its first failure: INCOMPLETE, fewer cases than selected."""
    (golden_project / HAPPY).write_text("RAG: po-chain, seed-account\n// nothing useful\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1", "-x")
    assert result.ret == 1, result.stdout.str()
    (run_json,) = (golden_project / ".goldeval" / "runs").glob("*/run.json")
    run = json.loads(run_json.read_text(encoding="utf-8"))
    assert run["status"] == "INCOMPLETE" and run["stoppedEarly"]["attemptsNotRun"] > 0
    return run_json.parent


def test_a_run_stopped_early_is_explained_as_the_run_says(
    stopped_run: Path, golden_project: Path
) -> None:
    run = json.loads((stopped_run / "run.json").read_text(encoding="utf-8"))
    not_run = run["stoppedEarly"]["attemptsNotRun"]
    for argv in (
        ["gate", str(stopped_run)],
        ["gate", stopped_run.name, "--no-gate"],
        ["compare", "baselines/generation-v1.json", str(stopped_run)],
    ):
        proc = _cli(*argv, cwd=golden_project)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 1, (argv, out)  # as pytest said: never 65, never 0
        assert f"stopped early (stopping after 1 failures): {not_run} selected attempts " in (
            _decision(proc)
        )
        assert "run INCOMPLETE: stopped early" in out
        assert "mismatch" not in out and "deadline" not in out, out
        assert "COMPARISON_INVALID" not in out and "comparison invalid" not in out


def test_an_interrupted_run_keeps_its_own_reason(good_run: Path, golden_project: Path) -> None:
    run = json.loads(good_run.read_text(encoding="utf-8"))
    run["status"] = "INTERRUPTED"
    reason = "terminated by SIGTERM: the run is INTERRUPTED; rerun with --golden-run-key=k"
    run["exitDecision"] = {"code": 75, "reason": reason}
    interrupted = golden_project / "interrupted" / "run.json"
    interrupted.parent.mkdir()
    interrupted.write_text(json.dumps(run), encoding="utf-8")
    proc = _cli("gate", str(interrupted.parent), cwd=golden_project)
    # The one table decides from what the document records: INTERRUPTED with no recorded
    # cause is 75, whatever exitDecision a hand-edited file claims.
    assert proc.returncode == 75, proc.stdout + proc.stderr
    assert "INTERRUPTED" in _decision(proc)
    assert "GATE PASS" not in proc.stdout


# -- no run named: the last session's -------------------------------------------------------


def test_no_run_named_means_the_last_session_not_an_older_passing_run(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    """LATEST names the last complete run: after a session cut short (-x) or refused before
    any item ran (65), `goldeval gate` with no run re-gated an earlier passing run: exit 0."""
    good = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1")
    assert good.ret == 0
    assert _cli("gate", cwd=golden_project).returncode == 0

    (golden_project / HAPPY).write_text("RAG: po-chain, seed-account\n// nothing useful\n")
    cut = pytester.runpytest(
        "-p", "no:cacheprovider", "--golden=generation-v1", "-x", "-p", "no:randomly"
    )
    assert cut.ret == 1
    gated = _cli("gate", cwd=golden_project)
    assert gated.returncode == 1, gated.stdout + gated.stderr
    assert "INCOMPLETE" in _decision(gated) or "stopped early" in _decision(gated)
    # The word LATEST still means the pointer: the last complete run.
    assert _cli("gate", "LATEST", cwd=golden_project).returncode == 0

    refused = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1", "-m", "smoke")
    assert refused.ret == 65
    for command in ("gate", "show"):
        after = _cli(command, cwd=golden_project)
        assert after.returncode == 4, after.stdout + after.stderr
        assert "the last session" in after.stderr and "exited 65 and wrote no run" in after.stderr
        assert "Traceback" not in after.stderr


@pytest.mark.parametrize(
    "refused_by",
    [
        ("--golden-baseline=no/such/baseline.json",),  # at session start
        ("--golden-attempts=0",),  # pytest's argument parser (exit 4 before any hook)
        ("--golden-mode=bogus",),
        ("--golden=no-such-v1",),  # while the plugin configures
    ],
    ids=["missing-baseline", "bad-number", "bad-choice", "unknown-dataset"],
)
def test_a_session_refused_as_it_starts_is_the_last_session(
    pytester: pytest.Pytester, golden_project: Path, refused_by: tuple[str, ...]
) -> None:
    """A usage error before the session could record its end left LAST_SESSION on the
    earlier green session: `goldeval gate` with no run re-gated it and exited 0 right after
    a session that exited 4. LAST_SESSION now says a session began before anything can
    refuse it; the refusal leaves that record, and the gate refuses too."""
    good = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1")
    assert good.ret == 0
    assert _cli("gate", cwd=golden_project).returncode == 0
    refused = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--golden=generation-v1", *refused_by
    )
    assert refused.ret == 4, refused.stdout.str() + refused.stderr.str()
    after = _cli("gate", cwd=golden_project)
    assert after.returncode == 4, after.stdout + after.stderr
    assert "recorded no end and wrote no run" in after.stderr
    assert "GATE PASS" not in after.stdout
    # The next session that finishes is the last session again.
    assert pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1").ret == 0
    assert _cli("gate", cwd=golden_project).returncode == 0


#: The project's app as the provider, killed with SIGKILL on its 4th row (a CI job's
#: timeout, the OOM killer): the session never records its end, the store run stays RUNNING.
KILLED_MID_RUN = """
import os, signal
from pathlib import Path
import pytest

ROOT = Path(__file__).parent
SEEN = []

@pytest.fixture(scope="session")
def golden_provider():
    def app(case):
        SEEN.append(case.id)
        if len(SEEN) == 4:
            os.kill(os.getpid(), signal.SIGKILL)
        return (ROOT / "golden/generation/fixtures" / f"{case.id}.out.md").read_text()
    return app
"""


@pytest.mark.parametrize("gate", [[], ["--no-gate"]])
def test_a_session_killed_mid_run_is_not_gated_as_a_pass(
    pytester: pytest.Pytester, golden_project: Path, gate: list[str]
) -> None:
    """A probe found ``goldeval gate --run-key`` exit 0 ("GATE PASS", or "every graded
    attempt ok" with --no-gate) for a session killed after 3 of 10 attempts: the store run
    is RUNNING and its document read as a whole run of 3 cases."""
    pytester.makeconftest(KILLED_MID_RUN)
    killed = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--golden=generation-v1", "--golden-run-key=k-killed"
    )
    assert killed.ret == -9, killed.stdout.str()[-2000:]
    proc = _cli("gate", "--run-key", "k-killed", *gate, "--json", cwd=golden_project)
    decision = _json_decision(proc)
    assert proc.returncode == 75 and decision["code"] == 75, (proc.stdout, proc.stderr)
    assert "never recorded its end" in decision["reason"], decision
    shown = _cli("show", "k-killed", cwd=golden_project)
    assert "RUNNING" in shown.stdout, shown.stdout


def test_compare_no_gate_of_an_incomparable_pair_is_no_pass(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    """`goldeval compare A B --no-gate` printed "Invalid: attempts mismatch" and exited 0:
    the comparison is the command's product, so an incomparable pair is 65 ungated too
    (after every other rule: a run with ERROR attempts still says 75)."""
    one = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1")
    assert one.ret == 0
    first = run_files.latest_dir() / "run.json"
    two = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--golden=generation-v1",
        "--golden-attempts=2",
        "--golden-no-gate",
    )
    assert two.ret == 0, two.stdout.str()  # --golden-no-gate: reported, not fatal
    second = run_files.latest_dir() / "run.json"
    proc = _cli("compare", str(first), str(second), "--no-gate", cwd=golden_project)
    assert proc.returncode == 65, proc.stdout + proc.stderr
    assert "comparison invalid (not gated): attempts mismatch" in _decision(proc)
    gated = _cli("compare", str(first), str(second), cwd=golden_project)
    assert gated.returncode == 65


def test_gate_refuses_the_policy_of_a_dataset_with_other_rows(
    regressed_run: Path, golden_project: Path
) -> None:
    """A run folder gated where the dataset of its id holds other rows (copied into another
    project, or rows edited without a version bump): that folder's looser policy passed a
    run whose own decision was 1. Refused (4) naming both hashes."""
    rows = golden_project / "golden" / "generation" / "golden-generation.jsonl"
    lines = rows.read_text(encoding="utf-8").splitlines()
    n = next(i for i, line in enumerate(lines) if line.startswith("{"))
    row = json.loads(lines[n])
    row["prompt"] = row["prompt"] + " (edited)"
    lines[n] = json.dumps(row, ensure_ascii=False)
    rows.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = _cli("gate", str(regressed_run), cwd=golden_project)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "other rows of dataset 'generation-v1'" in proc.stderr
    assert "GATE PASS" not in proc.stdout
    # Not gating needs no policy: reported.
    assert _cli("gate", str(regressed_run), "--no-gate", cwd=golden_project).returncode == 1
