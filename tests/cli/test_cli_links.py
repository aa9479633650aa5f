"""The ``goldeval`` commands read and write nothing through a link out of the project, as the
plugin does not (configuration.md, "Paths the session writes"), and a path the system refuses
is a message with its name, never a traceback (a probe found each of these).

Each project is real and each command a real subprocess; the place a link leads to is a
folder beside the project, whose content is checked untouched.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import make_bot_dataset, run_cli

GATE = "    thresholds:\n      overallPassRate: 0.5\n"


def _link_out(project: Path, name: str, elsewhere: Path) -> Path:
    """``project/name`` moved to ``elsewhere/name`` and linked back (created when absent)."""
    target = elsewhere / name
    target.parent.mkdir(parents=True, exist_ok=True)
    place = project / name
    if place.exists():
        shutil.move(str(place), str(target))
    else:
        target.mkdir(parents=True)
    place.symlink_to(target, target_is_directory=True)
    return target


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def bot(pytester: pytest.Pytester) -> Path:
    make_bot_dataset(pytester.path, GATE)
    pytester.makeini("[pytest]\n")
    return pytester.path


def _pytest(pytester: pytest.Pytester, *args: str) -> int:
    return int(
        pytester.runpytest_subprocess("-p", "no:cacheprovider", "--golden=bot-v1", *args).ret
    )


def test_prune_deletes_nothing_through_a_linked_goldeval_folder(
    pytester: pytest.Pytester, bot: Path, tmp_path: Path
) -> None:
    for _ in range(3):
        assert _pytest(pytester) == 0
    outside = _link_out(bot, ".goldeval", tmp_path / "elsewhere")
    before = _files(outside)
    proc = run_cli("prune", "--keep-last", "1", cwd=bot)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "symbolic link" in proc.stderr and ".goldeval" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _files(outside) == before


def test_gate_refuses_the_baseline_a_run_recorded_behind_a_linked_baselines_folder(
    pytester: pytest.Pytester, bot: Path, tmp_path: Path
) -> None:
    assert _pytest(pytester, "--golden-save-baseline=baselines/bot-v1.json") == 0
    assert _pytest(pytester) == 0  # compared with that baseline
    _link_out(bot, "baselines", tmp_path / "elsewhere")
    assert _pytest(pytester) == 65  # pytest refuses a baseline read through the link
    proc = run_cli("gate", "LATEST", cwd=bot)
    assert proc.returncode == 65, proc.stdout + proc.stderr
    assert "a link out of the project" in proc.stdout + proc.stderr


def test_gate_reads_no_policy_through_a_linked_golden_folder(
    pytester: pytest.Pytester, bot: Path, tmp_path: Path
) -> None:
    assert _pytest(pytester) == 0
    _link_out(bot, "golden", tmp_path / "elsewhere")
    assert _pytest(pytester) == 4
    proc = run_cli("gate", "LATEST", cwd=bot)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "is a symbolic link" in proc.stderr and "Traceback" not in proc.stderr


def test_init_and_import_write_no_dataset_through_a_linked_golden_folder(
    bot: Path, tmp_path: Path
) -> None:
    outside = _link_out(bot, "golden", tmp_path / "elsewhere")
    before = _files(outside)
    init = run_cli("init", "my-bot", cwd=bot)
    source = bot / "rows.csv"
    source.write_text("id,prompt,answer\nr1,say hi,hi\n", encoding="utf-8")
    imported = run_cli("import", str(source), "--name", "imported", cwd=bot)
    for proc in (init, imported):
        assert proc.returncode == 4, proc.stdout + proc.stderr
        assert "is a symbolic link" in proc.stderr and "Traceback" not in proc.stderr
    assert _files(outside) == before


def test_calibrate_reads_no_dataset_and_writes_no_report_through_a_link(
    golden_project: Path, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious", encoding="utf-8")
    reports = golden_project / ".goldeval" / "calibration"
    reports.mkdir(parents=True)
    (reports / "report.json").symlink_to(victim)
    proc = run_cli("calibrate", "--golden=generation-v1", cwd=golden_project)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "is a symbolic link" in proc.stderr and "Traceback" not in proc.stderr
    assert victim.read_text(encoding="utf-8") == "precious"
    (reports / "report.json").unlink()
    # the datasets (and the pack they name) moved out, golden/ linked back
    elsewhere = tmp_path / "elsewhere"
    _link_out(golden_project, "golden", elsewhere)
    shutil.copytree(golden_project / "pack", elsewhere / "pack")
    proc = run_cli("calibrate", "--golden=generation-v1", cwd=golden_project)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "golden_root" in proc.stderr and "is a symbolic link" in proc.stderr


@pytest.mark.parametrize(
    ("command", "problem"),
    [
        (["site", "--out", "a-file"], "is a file, not a folder"),
        (["site", "--out", "linked-out"], "is a symbolic link"),
        (["calibrate", "--golden=generation-v1", "--out", "a-file"], "is a file, not a folder"),
        # refused by the system itself: its reason and the path, no traceback
        (["calibrate", "--golden=generation-v1", "--out", "/proc/goldeval-x"], "/proc/"),
    ],
)
def test_an_output_path_that_cannot_be_written_is_a_usage_error(
    golden_project: Path, tmp_path: Path, command: list[str], problem: str
) -> None:
    (golden_project / "a-file").write_text("x", encoding="utf-8")
    (golden_project / "linked-out").symlink_to(tmp_path, target_is_directory=True)
    (golden_project / ".goldeval" / "runs").mkdir(parents=True)
    proc = run_cli(*command, cwd=golden_project)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert problem in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_store_file_linked_out_of_the_project_is_never_opened(
    pytester: pytest.Pytester, bot: Path, tmp_path: Path
) -> None:
    """Opening the store migrated it and changed the file the link led to (SQLite's change
    counters), then pytest refused the link: the store refuses it before connecting."""
    assert _pytest(pytester) == 0
    store = bot / ".goldeval" / "goldeval.sqlite3"
    outside = tmp_path / "elsewhere.sqlite3"
    shutil.move(str(store), str(outside))
    for extra in store.parent.glob("goldeval.sqlite3-*"):
        extra.unlink()
    store.symlink_to(outside)
    before = outside.read_bytes()
    assert _pytest(pytester) == 4
    for command in (["runs"], ["prune", "--keep-last", "1"]):
        proc = run_cli(*command, cwd=bot)
        assert proc.returncode == 4, proc.stdout + proc.stderr
        assert "symbolic link" in proc.stderr and "Traceback" not in proc.stderr
    assert outside.read_bytes() == before
    assert not list(tmp_path.glob("elsewhere.sqlite3-*"))


def _outside_run(pytester: pytest.Pytester, bot: Path, tmp_path: Path) -> tuple[Path, Path]:
    """Two runs: the project's LATEST one, and a copy of it outside the project."""
    assert _pytest(pytester) == 0
    runs = bot / ".goldeval" / "runs"
    latest = runs / (runs / "LATEST").read_text(encoding="utf-8").strip()
    outside = tmp_path / "elsewhere" / "run1"
    shutil.copytree(latest, outside)
    return runs, outside


@pytest.mark.parametrize("how", ["folder", "pointer-text", "pointer-link", "run-json"])
def test_no_run_is_found_through_a_link_or_a_pointer_out_of_the_project(
    pytester: pytest.Pytester, bot: Path, tmp_path: Path, how: str
) -> None:
    """A re-probe: a run folder linked into the runs folder, a LATEST naming (or linking
    to) a run elsewhere, a run.json linked out: gated as this project's run (exit 0)."""
    runs, outside = _outside_run(pytester, bot, tmp_path)
    reference = "LATEST"
    if how == "folder":
        reference = "2026-12-08T09-00-00.000-aaaaaa"
        (runs / reference).symlink_to(outside, target_is_directory=True)
    elif how == "pointer-text":
        (runs / "LATEST").write_text(str(outside), encoding="utf-8")
    elif how == "pointer-link":
        pointer = tmp_path / "elsewhere" / "LATEST"
        pointer.write_text(str(outside), encoding="utf-8")
        (runs / "LATEST").unlink()
        (runs / "LATEST").symlink_to(pointer)
    else:
        latest = runs / (runs / "LATEST").read_text(encoding="utf-8").strip()
        (latest / "run.json").unlink()
        (latest / "run.json").symlink_to(outside / "run.json")
    for command in (["gate", reference], ["show", reference]):
        proc = run_cli(*command, cwd=bot)
        assert proc.returncode == 4, proc.stdout + proc.stderr
        assert "symbolic link" in proc.stderr or "outside" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr


def test_site_reads_no_runs_folder_reached_through_a_link(
    pytester: pytest.Pytester, bot: Path, tmp_path: Path
) -> None:
    assert _pytest(pytester) == 0
    _link_out(bot, ".goldeval", tmp_path / "elsewhere")
    proc = run_cli("site", "--out", "site", cwd=bot)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "symbolic link" in proc.stderr and not (bot / "site").exists()
