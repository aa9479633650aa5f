"""`goldeval init` scaffolds a dataset that runs at once; `goldeval --version` (issue 22)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import goldeval
from goldeval.cli.main import main


def _init(path: Path, *args: str) -> int:
    cwd = os.getcwd()
    os.chdir(path)
    try:
        return main(["init", *args])
    finally:
        os.chdir(cwd)


def test_version_is_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"goldeval {goldeval.__version__}"


def test_scaffold_runs_at_once_serial_and_xdist(
    pytester: pytest.Pytester, plugin_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _init(pytester.path, "support-bot") == 0
    out = capsys.readouterr().out
    assert "1. pytest --golden=support-bot-v1" in out
    assert (pytester.path / "pytest.ini").is_file()
    assert ".goldeval/" in (pytester.path / ".gitignore").read_text(encoding="utf-8")
    result = pytester.runpytest("--golden=support-bot-v1", *plugin_args)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*grader contains_any*100.0%*", "*grader regex*100.0%*"])
    # two rows, two different graders, and no reference pack
    manifest = (pytester.path / "golden" / "support-bot" / "dataset.yaml").read_text()
    assert "pack: none" in manifest


def test_scaffold_in_a_subfolder_uses_the_project_root(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makeini("[pytest]\n")
    (pytester.path / ".gitignore").write_text("build/\n.goldeval/\n", encoding="utf-8")
    sub = pytester.path / "pkg" / "deep"
    sub.mkdir(parents=True)
    assert _init(sub, "sql-gen") == 0
    assert (pytester.path / "golden" / "sql-gen" / "dataset.yaml").is_file()
    assert not (sub / "golden").exists()
    assert not (sub / "pytest.ini").exists()
    # .goldeval/ was ignored already: not added twice
    assert (pytester.path / ".gitignore").read_text(encoding="utf-8").count(".goldeval") == 1
    assert "kept    .gitignore" in capsys.readouterr().out


def test_init_never_overwrites_and_rejects_bad_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _init(tmp_path, "bot") == 0
    rows = tmp_path / "golden" / "bot" / "bot.jsonl"
    rows.write_text("{}\n", encoding="utf-8")
    assert _init(tmp_path, "bot") == 4
    assert "golden/bot exists already" in capsys.readouterr().err
    assert rows.read_text(encoding="utf-8") == "{}\n"
    for bad in ("../escape", "Bot", "a b", ""):
        assert _init(tmp_path, bad) == 4
    assert not (tmp_path.parent / "escape").exists()


def test_init_does_not_write_through_a_linked_gitignore(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("x\n", encoding="utf-8")
    project = tmp_path / "project"
    project.mkdir()
    (project / ".gitignore").symlink_to(outside)
    assert _init(project, "bot") == 0
    assert outside.read_text(encoding="utf-8") == "x\n"
    assert "not written through" in capsys.readouterr().out
