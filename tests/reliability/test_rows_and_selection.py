"""Rows, selection and hostile dataset files (issues 15 and 16), black box with pytester.

Every test here failed on the code before the fix: a row tagged ``skip`` turned a failing row
into a green run, a pasted node id ran the whole dataset, ``-k attempt2`` compared with a full
baseline, two datasets with one version silently picked the first, an ungraded row passed,
plain ``pytest`` said nothing, a deselected row needed its fixture, and a fixture linked to
``/proc/self/environ`` put the environment in every report (a FIFO hung the run for ever).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import SERIAL_ONLY, RunFiles

ROWS = "golden/generation/golden-generation.jsonl"
FIXTURES = "golden/generation/fixtures"
#: A row of generation-v1 that passes in fixture mode, and one known to fail live (red).
PASSING = "e2e-login-happy-alice"
RED = "hallucinate-form-invalid-password"


def mini_dataset(
    root: Path,
    rows: list[dict[str, object]],
    answers: dict[str, str] | None = None,
    manifest: str = "",
    name: str = "mini",
) -> Path:
    """golden/<name>/ with version <name>-v1, one rows file and a fixture per row."""
    folder = root / "golden" / name
    (folder / "fixtures").mkdir(parents=True)
    (folder / "dataset.yaml").write_text(
        f"version: {name}-v1\npack: none\n{manifest}", encoding="utf-8"
    )
    (folder / "rows.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    for row in rows:
        text = (answers or {}).get(str(row["id"]), "an answer")
        (folder / "fixtures" / f"{row['id']}.out.md").write_text(text, encoding="utf-8")
    return folder


def no_traceback(result: pytest.RunResult) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and "INTERNALERROR" not in text, text


# -- 1. row tags are pytest marks: marks with behaviour are row errors ----------------------


@pytest.mark.parametrize(
    "tag",
    ["skip", "skipif", "xfail", "usefixtures", "filterwarnings", "parametrize", "tryfirst",
     "trylast", "timeout", "flaky", "repeat", "xdist_group", "_x", "__init__", "9lives"],
)  # fmt: skip
def test_tags_that_are_marks_with_behaviour_are_row_errors(
    pytester: pytest.Pytester, tag: str
) -> None:
    rows = [
        {"id": "fails", "prompt": "q", "expect": {"contains_any": ["yes"]}, "tags": [tag]},
        {"id": "passes", "prompt": "q", "expect": {"contains_any": ["an"]}},
    ]
    mini_dataset(pytester.path, rows, {"fails": "no", "passes": "an answer"})
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest("--golden=mini-v1", "--golden-no-gate")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    result.stdout.fnmatch_lines([f"*rows.jsonl:1: tags: *{tag}*"])
    no_traceback(result)
    assert not (pytester.path / ".goldeval" / "runs" / "LATEST").exists()


@SERIAL_ONLY
def test_marks_registered_by_code_are_reserved_and_ini_labels_are_not(
    pytester: pytest.Pytester, plugin_args: list[str]
) -> None:
    # A conftest (or plugin) that registers a marker may act on it; a label declared in the
    # ini file is just a label. Tags that are plain labels keep working with --strict-markers.
    pytester.makeconftest(
        "def pytest_configure(config):\n"
        "    config.addinivalue_line('markers', 'quarantine: skipped by our conftest')\n"
    )
    pytester.makeini("[pytest]\nmarkers =\n    nightly: a label of ours\n")
    rows = [
        {"id": "a", "prompt": "q", "expect": {"contains_any": ["an"]}, "tags": ["nightly"]},
        {"id": "b", "prompt": "q", "expect": {"contains_any": ["an"]}, "tags": ["smoke"]},
    ]
    mini_dataset(pytester.path, rows)
    args = ["--golden=mini-v1", "--golden-no-gate", "--strict-markers", *plugin_args]
    result = pytester.runpytest(*args, "-m", "nightly or smoke")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=2)
    rows.append({"id": "c", "prompt": "q", "must_not": ["x"], "tags": ["quarantine"]})
    shutil.rmtree(pytester.path / "golden")
    mini_dataset(pytester.path, rows)
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    result.stdout.fnmatch_lines(["*rows.jsonl:3: tags: tag 'quarantine' is a pytest mark*"])
    no_traceback(result)


@SERIAL_ONLY
def test_red_and_smoke_rows_still_select(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    result = pytester.runpytest(
        "--golden=generation-v1", "-m", "smoke and not red", "--strict-markers",
        "--golden-no-gate", *plugin_args,
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=2)


# -- 3. node ids narrow the run ---------------------------------------------------------------


@SERIAL_ONLY
def test_node_ids_from_a_failed_line_select_only_those_items(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, plugin_args: list[str]
) -> None:
    ids = [f"{ROWS}::test_golden[{PASSING}-attempt1]", f"{ROWS}::test_golden[{RED}-attempt1]"]
    result = pytester.runpytest("--golden=generation-v1", "--golden-no-gate", *ids, *plugin_args)
    result.assert_outcomes(passed=2)
    assert sorted(run_files.latest()["protocol"]["selectedCaseIds"]) == sorted([PASSING, RED])
    # The file path alone (not a node id) still means the whole dataset.
    result = pytester.runpytest("--golden=generation-v1", "--golden-no-gate", ROWS, *plugin_args)
    result.assert_outcomes(passed=10)


def test_node_id_with_attempts_runs_one_attempt_and_says_so(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    node = f"{ROWS}::test_golden[{PASSING}-attempt2]"
    # Reported only: the run goes ahead and records the one attempt it ran.
    result = pytester.runpytest(
        "--golden=generation-v1", "--golden-attempts=3", node, "--golden-no-gate"
    )
    result.assert_outcomes(passed=1)
    protocol = run_files.latest()["protocol"]
    assert protocol["selectedAttempts"] == {PASSING: [2]}
    # Gated: a one-attempt subset is not the protocol of any baseline, refused before it runs.
    result = pytester.runpytest("--golden=generation-v1", "--golden-attempts=3", node)
    assert result.ret == 65, result.stdout.str()
    result.stdout.fnmatch_lines(["*refused before any item ran*"])


# -- 4. the attempts actually run are part of the protocol ------------------------------------


def test_k_attempt_subset_is_not_comparable_with_a_full_baseline(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, plugin_args: list[str]
) -> None:
    base = ["--golden=generation-v1", "--golden-attempts=3"]
    full = "baselines/generation-v1-a3.json"
    result = pytester.runpytest(*base, f"--golden-save-baseline={full}", "--golden-no-gate")
    assert result.ret == 0, result.stdout.str()
    assert "selectedAttempts" not in run_files.latest()["protocol"]
    result = pytester.runpytest(*base, "-k", "attempt2", f"--golden-baseline={full}", *plugin_args)
    result.assert_outcomes(passed=10, deselected=None if plugin_args else 20)
    assert result.ret == 65, result.stdout.str()
    result.stdout.fnmatch_lines(["*selectedAttempts mismatch*every attempt*10 attempts of 10*"])
    run = run_files.latest()
    assert run["protocol"]["attempts"] == 3
    assert set(map(tuple, run["protocol"]["selectedAttempts"].values())) == {(2,)}
    # The same subset, captured as its own baseline, compares.
    subset = "baselines/generation-v1-a3-attempt2.json"
    save = [f"--golden-save-baseline={subset}", "--golden-no-gate"]
    assert pytester.runpytest(*base, "-k", "attempt2", *save).ret == 0
    result = pytester.runpytest(*base, "-k", "attempt2", f"--golden-baseline={subset}")
    assert result.ret == 0, result.stdout.str()


# -- 5. two datasets with one version ---------------------------------------------------------


@pytest.mark.parametrize("asked", ["holdout-v1", "generation-v1", "golden/holdout"])
def test_two_datasets_with_one_version_is_a_usage_error(
    pytester: pytest.Pytester, golden_project: Path, asked: str
) -> None:
    shutil.copytree(golden_project / "golden/holdout", golden_project / "golden/holdout-copy")
    result = pytester.runpytest(f"--golden={asked}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    err = result.stderr.str()
    assert "two datasets share a version: 'holdout-v1'" in err
    assert str(golden_project / "golden/holdout") in err
    assert str(golden_project / "golden/holdout-copy") in err
    no_traceback(result)


# -- 6. rows no grader checks -----------------------------------------------------------------


@pytest.mark.parametrize(
    "row",
    [
        {"id": "bare", "prompt": "q"},
        {"id": "empty-lists", "prompt": "q", "expect": {}, "must_not": []},
        {"id": "only-red", "prompt": "q", "expect": {"red": True}},
        {"id": "null-keys", "prompt": "q", "expect": {"contains_any": None}, "must_not": None},
    ],
    ids=lambda r: str(r["id"]),
)
def test_a_row_no_grader_checks_is_a_row_error(
    pytester: pytest.Pytester, row: dict[str, object]
) -> None:
    good = {"id": "good", "prompt": "q", "expect": {"contains_any": ["an"]}}
    mini_dataset(pytester.path, [good, row])
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest("--golden=mini-v1", "--golden-no-gate")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    result.stdout.fnmatch_lines(["*rows.jsonl:2: expect: no grader checks this row*"])
    result.stdout.fnmatch_lines(["*allow_ungraded_rows: true*"])
    no_traceback(result)


def test_a_grader_switched_off_leaves_its_rows_ungraded(pytester: pytest.Pytester) -> None:
    row = {"id": "r", "prompt": "q", "expect": {"contains_any": ["an"]}}
    mini_dataset(pytester.path, [row], manifest='graders:\n  contains_any: "off"\n')
    result = pytester.runpytest("--golden=mini-v1", "--golden-no-gate")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    result.stdout.fnmatch_lines(["*rows.jsonl:1: expect: no grader checks this row*"])


@SERIAL_ONLY
def test_allow_ungraded_rows_runs_them_on_purpose(
    pytester: pytest.Pytester, plugin_args: list[str]
) -> None:
    rows = [{"id": "bare", "prompt": "q"}, {"id": "g", "prompt": "q", "must_not": ["zzz"]}]
    mini_dataset(pytester.path, rows, manifest="allow_ungraded_rows: true\n")
    result = pytester.runpytest("--golden=mini-v1", "--golden-no-gate", *plugin_args)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=2)


# -- 7. plain pytest in a project with datasets -----------------------------------------------


def test_plain_pytest_names_the_datasets_and_the_option(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    def files() -> list[Path]:
        return sorted(p.relative_to(golden_project) for p in golden_project.rglob("*"))

    before = files()
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(
        ["goldeval: datasets under golden/: generation-v1, holdout-v1; run them with --golden=ID"]
    )
    assert files() == before  # nothing created


def test_plain_pytest_with_tests_prints_no_dataset_line(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    pytester.makepyfile(test_app="def test_ok():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == 0
    assert "goldeval: datasets under" not in result.stdout.str()


# -- 8. deselected rows need no fixture -------------------------------------------------------


@pytest.mark.parametrize("select", [["-m", "not red"], ["-k", "not hallucinate"]])
@SERIAL_ONLY
def test_deselected_rows_need_no_fixture(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str], select: list[str]
) -> None:
    (golden_project / FIXTURES / f"{RED}.out.md").unlink()
    result = pytester.runpytest("--golden=generation-v1", "--golden-no-gate", *select, *plugin_args)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=7 if "-m" in select else 8)


def test_a_selected_row_without_fixture_is_still_a_collection_error(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, plugin_args: list[str]
) -> None:
    (golden_project / FIXTURES / f"{RED}.out.md").unlink()
    result = pytester.runpytest("--golden=generation-v1", *plugin_args)
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    result.stdout.fnmatch_lines(
        [f"*golden-generation.jsonl:7: id: no recorded answer fixtures/{RED}.out.md*"]
    )
    assert not run_files.runs.joinpath("LATEST").exists()
    no_traceback(result)


# -- 9. hostile files: links out of the dataset, FIFOs ----------------------------------------

SECRET = "sk-planted-SECRET-9f8e7d6c5b4a"


def _assert_secret_nowhere(root: Path, result: pytest.RunResult) -> None:
    assert SECRET not in result.stdout.str() + result.stderr.str()
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert SECRET.encode() not in path.read_bytes(), path


@SERIAL_ONLY
def test_fixture_linked_to_proc_environ_is_refused(
    pytester: pytest.Pytester,
    golden_project: Path,
    monkeypatch: pytest.MonkeyPatch,
    plugin_args: list[str],
) -> None:
    monkeypatch.setenv("PLANTED_TEST_SECRET_KEY", SECRET)
    fixture = golden_project / FIXTURES / f"{PASSING}.out.md"
    fixture.unlink()
    fixture.symlink_to("/proc/self/environ")
    result = pytester.runpytest_subprocess("--golden=generation-v1", *plugin_args)
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    result.stdout.fnmatch_lines(
        [f"*golden-generation.jsonl:5: id: recorded answer fixtures/{PASSING}.out.md*outside*"]
    )
    _assert_secret_nowhere(golden_project, result)


def test_fixture_linked_to_a_file_outside_is_refused_and_inside_is_followed(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    fixture = golden_project / FIXTURES / f"{PASSING}.out.md"
    recorded = fixture.read_bytes()
    outside = golden_project / "elsewhere.md"
    outside.write_text(f"RAG: x\n{SECRET}\n", encoding="utf-8")
    fixture.unlink()
    fixture.symlink_to(outside)
    result = pytester.runpytest("--golden=generation-v1")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    assert "outside" in result.stdout.str()
    outside.unlink()
    _assert_secret_nowhere(golden_project, result)
    # A link that stays inside the dataset folder is an ordinary fixture.
    shared = golden_project / "golden/generation/shared"
    shared.mkdir()
    (shared / "a.md").write_bytes(recorded)
    fixture.unlink()
    fixture.symlink_to(shared / "a.md")
    result = pytester.runpytest("--golden=generation-v1")
    assert result.ret == 0, result.stdout.str()


@pytest.mark.parametrize("where", ["fixture", "rows"])
def test_a_fifo_is_refused_without_hanging(
    pytester: pytest.Pytester, golden_project: Path, where: str
) -> None:
    if where == "fixture":
        target = golden_project / FIXTURES / f"{PASSING}.out.md"
        target.unlink()
    else:
        target = golden_project / "golden/generation/pipe.jsonl"
        manifest = golden_project / "golden/generation/dataset.yaml"
        manifest.write_text(manifest.read_text("utf-8") + "rows: pipe.jsonl\n", "utf-8")
    os.mkfifo(target)
    result = pytester.runpytest_subprocess("--golden=generation-v1", timeout=120)
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    result.stdout.fnmatch_lines(["*is a FIFO (named pipe), not a regular file*"])
    no_traceback(result)


@pytest.mark.parametrize("rows", ["/etc/shadow", "/proc/self/environ", "../../outside.jsonl"])
def test_rows_outside_the_dataset_folder_are_refused(
    pytester: pytest.Pytester, golden_project: Path, monkeypatch: pytest.MonkeyPatch, rows: str
) -> None:
    monkeypatch.setenv("PLANTED_TEST_SECRET_KEY", SECRET)
    (golden_project / "outside.jsonl").write_text(
        json.dumps({"id": "x", "prompt": SECRET, "must_not": ["y"]}) + "\n", encoding="utf-8"
    )
    manifest = golden_project / "golden/generation/dataset.yaml"
    manifest.write_text(manifest.read_text(encoding="utf-8") + f"rows: {rows}\n", "utf-8")
    result = pytester.runpytest_subprocess("--golden=generation-v1", timeout=120)
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    result.stdout.fnmatch_lines(["*dataset.yaml: rows: rows file*"])
    assert "outside" in result.stdout.str() or "not found" in result.stdout.str()
    (golden_project / "outside.jsonl").unlink()
    _assert_secret_nowhere(golden_project, result)


@pytest.mark.parametrize("what", ["rubric.md", "rows.jsonl", "pack"])
def test_other_dataset_files_linked_out_are_refused(
    pytester: pytest.Pytester,
    golden_project: Path,
    tmp_path_factory: pytest.TempPathFactory,
    what: str,
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "secret.md"
    outside.write_text(f"---\nid: leaked\n---\n{SECRET}\n", encoding="utf-8")
    folder = golden_project / "golden/generation"
    if what == "rubric.md":
        (folder / "rubric.md").unlink()
        (folder / "rubric.md").symlink_to(outside)
    elif what == "rows.jsonl":
        (folder / "golden-generation.jsonl").unlink()
        (folder / "golden-generation.jsonl").symlink_to(outside)
    else:
        (golden_project / "pack/rag/leak.md").symlink_to(outside)
    result = pytester.runpytest("--golden=generation-v1")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    assert "outside" in result.stdout.str()
    no_traceback(result)
    _assert_secret_nowhere(golden_project, result)


def test_calibration_corpus_linked_out_is_refused(
    golden_project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from goldeval.cli.main import main

    outside = golden_project / "outside-calibration.jsonl"
    outside.write_text(json.dumps({"id": "x", "note": SECRET}) + "\n", encoding="utf-8")
    corpus = golden_project / "golden/generation/calibration.jsonl"
    corpus.unlink()
    corpus.symlink_to(outside)
    monkeypatch.chdir(golden_project)
    assert main(["calibrate", "--golden", "generation-v1", "--out", "out"]) == 4
    err = capsys.readouterr().err
    assert "calibration corpus" in err and "outside" in err and SECRET not in err
    assert not (golden_project / "out").exists()
