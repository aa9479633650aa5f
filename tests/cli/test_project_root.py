"""One project root for every command (docs/configuration.md, "Project root").

pytest started in any subfolder writes the project's ``.goldeval/`` (runs and store), and the
``goldeval`` commands started in any other subfolder read the same runs and store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import run_cli


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PYTEST_XDIST") and k != "GOLDEVAL_STORE"
    }
    env.update(extra)
    return env


def _pytest(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--golden=generation-v1", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(**env),
    )


def _goldeval(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd, env=_env(**env))


def _run_ids(project: Path) -> set[str]:
    runs = project / ".goldeval" / "runs"
    return {p.name for p in runs.iterdir() if (p / "run.json").is_file()}


def test_runs_from_subfolders_share_one_goldeval_folder(golden_project: Path) -> None:
    dataset_dir = golden_project / "golden" / "generation"
    src = golden_project / "src"
    src.mkdir()
    elsewhere = golden_project / "docs" / "notes"
    elsewhere.mkdir(parents=True)
    first = _pytest(dataset_dir)
    assert first.returncode == 0, first.stdout + first.stderr
    second = _pytest(src)
    assert second.returncode == 0, second.stdout + second.stderr
    for sub in (dataset_dir, src):
        assert not (sub / ".goldeval").exists(), f"{sub} got its own .goldeval/"
    run_ids = _run_ids(golden_project)
    assert len(run_ids) == 2
    # The default baseline (<root>/baselines) was found from both subfolders.
    for run_id in run_ids:
        doc = json.loads(
            (golden_project / ".goldeval/runs" / run_id / "run.json").read_text("utf-8")
        )
        assert doc["comparison"]["decision"] == "NO_REGRESSION"
        assert doc["exitDecision"]["code"] == 0

    listing = _goldeval(elsewhere, "runs")
    assert listing.returncode == 0, listing.stderr
    for run_id in run_ids:
        assert run_id in listing.stdout
        show = _goldeval(elsewhere, "show", run_id)
        assert show.returncode == 0, show.stderr
        assert "GATE PASS" in show.stdout  # the run's own gate, as in its report.md
        export = _goldeval(dataset_dir, "export", run_id)
        assert export.returncode == 0, export.stderr
        assert json.loads(export.stdout)["runId"] == run_id
    site = _goldeval(elsewhere, "site", "--out", "site")
    assert site.returncode == 0, site.stderr
    assert "2 runs" in site.stdout
    index = (elsewhere / "site" / "index.html").read_text("utf-8")  # --out: the working dir
    for run_id in run_ids:
        assert run_id in index
    gate = _goldeval(
        src, "gate", str(golden_project / ".goldeval/runs" / next(iter(run_ids)) / "run.json")
    )
    assert gate.returncode == 0, gate.stdout + gate.stderr


def test_store_commands_from_a_subfolder_of_a_project_without_runs(golden_project: Path) -> None:
    sub = golden_project / "golden"
    listing = _goldeval(sub, "runs")
    assert listing.returncode == 4
    assert str(golden_project / ".goldeval" / "goldeval.sqlite3") in listing.stderr
    assert "Traceback" not in listing.stderr


def test_root_option_and_goldeval_store_env(golden_project: Path, tmp_path: Path) -> None:
    dataset_dir = golden_project / "golden" / "generation"
    # GOLDEVAL_STORE relative: the project's, for pytest and for goldeval alike.
    ran = _pytest(dataset_dir, GOLDEVAL_STORE="stores/main.sqlite3")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (golden_project / "stores" / "main.sqlite3").is_file()
    assert not (dataset_dir / "stores").exists()
    listing = _goldeval(golden_project / "golden", "runs", GOLDEVAL_STORE="stores/main.sqlite3")
    assert listing.returncode == 0, listing.stderr
    (run_id,) = _run_ids(golden_project)
    assert run_id in listing.stdout
    # --root from a folder outside the project.
    outside = _goldeval(tmp_path, "runs", "--root", str(golden_project))
    assert outside.returncode == 4  # the default store is not there: it went to stores/
    outside = _goldeval(
        tmp_path, "runs", "--root", str(golden_project), GOLDEVAL_STORE="stores/main.sqlite3"
    )
    assert outside.returncode == 0 and run_id in outside.stdout, outside.stderr
    site = _goldeval(tmp_path, "site", "--root", str(golden_project), "--out", "s")
    assert site.returncode == 0 and "1 run" in site.stdout, site.stderr


@pytest.mark.parametrize("where", ["cli", "ini"])
def test_golden_out_typed_is_relative_to_the_invocation_dir_ini_to_the_root(
    golden_project: Path, where: str
) -> None:
    dataset_dir = golden_project / "golden" / "generation"
    if where == "cli":
        ran = _pytest(dataset_dir, "--golden-out=here-runs")
        expected = dataset_dir / "here-runs"
    else:
        (golden_project / "tox.ini").write_text(
            "[pytest]\ngolden_out = ci-runs\n", encoding="utf-8"
        )
        ran = _pytest(dataset_dir)
        expected = golden_project / "ci-runs"
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (expected / "LATEST").is_file()
    assert not (golden_project / ".goldeval" / "runs").exists()


def test_xdist_run_from_a_subfolder_writes_the_project_store(golden_project: Path) -> None:
    dataset_dir = golden_project / "golden" / "generation"
    ran = _pytest(dataset_dir, "-n", "2")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert not (dataset_dir / ".goldeval").exists()
    (run_id,) = _run_ids(golden_project)
    listing = _goldeval(golden_project / "baselines", "runs")
    assert listing.returncode == 0 and run_id in listing.stdout, listing.stderr
