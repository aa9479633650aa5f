"""``goldeval prune``: retention of run folders and store runs (docs/reliability.md).

Real pytest runs of the example dataset make real run folders and store runs (SQLite file and
PostgreSQL schema); prune runs as the ``goldeval`` command in a subprocess.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from goldeval.store import open_store
from tests.helpers import RunFiles, run_cli
from tests.store.conftest import Target

RUNS = 4


def _runs(pytester: pytest.Pytester, url: str, n: int = RUNS) -> list[str]:
    ids = []
    for _ in range(n):
        result = pytester.runpytest("--golden=generation-v1", f"--golden-store={url}")
        assert result.ret == 0, result.stdout.str()
        latest = Path((pytester.path / ".goldeval/runs/LATEST").read_text().strip())
        ids.append(latest.name)
    return ids


def _prune(project: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("prune", "--store", url, *args, cwd=project)


def _folders(project: Path) -> set[str]:
    return {p.name for p in (project / ".goldeval/runs").iterdir() if p.is_dir()}


def _stored(url: str) -> set[str]:
    with open_store(url) as store:
        return {r.run_id for r in store.runs(limit=1000)}


def _export(project: Path, url: str, run: str) -> dict[str, Any]:
    out = run_cli("export", run, "--store", url, cwd=project)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


@contextmanager
def _session_holds(folder: Path) -> Iterator[None]:
    """What a session writing a run folder does: an exclusive flock on the folder."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def test_keep_last_keeps_latest_baseline_and_runs_in_progress(
    pytester: pytest.Pytester, golden_project: Path, target: Target, run_files: RunFiles
) -> None:
    ids = _runs(pytester, target.url)
    oldest, baseline_run, busy, newest = ids
    # A committed baseline made from the second run (as `cp run.json baselines/...`).
    shutil.copy(
        golden_project / ".goldeval/runs" / baseline_run / "run.json",
        golden_project / "baselines" / "promoted.json",
    )
    # A store run in progress (another session began it and has not finished).
    with open_store(target.url) as store:
        store.begin_run(
            "still-running",
            dataset_id="generation-v1",
            dataset_hash="h",
            mode="fixture",
            protocol={},
            configuration={},
        )
        store.record_cases("still-running", [{"caseId": "x", "prompt": "p", "line": 1}])
    before = _export(golden_project, target.url, newest)

    with _session_holds(golden_project / ".goldeval/runs" / busy):
        dry = _prune(golden_project, target.url, "--keep-last", "1", "--dry-run", "--json")
        assert dry.returncode == 0, dry.stderr
        plan = json.loads(dry.stdout)
        assert _folders(golden_project) == set(ids)  # a dry run deletes nothing
        assert _stored(target.url) == {*ids, "still-running"}
        done = _prune(golden_project, target.url, "--keep-last", "1")
    assert done.returncode == 0, done.stderr
    assert plan["folders"]["deleted"] == [oldest]
    assert plan["folders"]["kept"] == {
        baseline_run: "baseline promoted.json refers to it",
        busy: "in progress (a session holds it locked)",
    }
    assert _folders(golden_project) == {baseline_run, busy, newest}
    # In the store "still-running" is the newest run: the policy keeps it; LATEST's run is
    # beyond the policy but kept; the folder lock does not concern the store.
    assert _stored(target.url) == {baseline_run, newest, "still-running"}
    assert f"deleted {oldest}" in done.stdout
    assert f"kept {newest}: LATEST points at it" in done.stdout
    # The kept runs read back exactly as before (shared texts were not collected).
    assert _export(golden_project, target.url, newest) == before
    assert _export(golden_project, target.url, baseline_run)["runId"] == baseline_run

    # once nothing holds it any more, the next prune takes the folder too
    again = _prune(golden_project, target.url, "--keep-last", "0")
    assert again.returncode == 0, again.stderr
    assert _folders(golden_project) == {baseline_run, newest}
    assert _stored(target.url) == {baseline_run, newest, "still-running"}


def test_older_than(pytester: pytest.Pytester, golden_project: Path, target: Target) -> None:
    ids = _runs(pytester, target.url, 3)
    old = ids[0]
    # Make the first run ten days old, in its folder and in the store.
    summary = golden_project / ".goldeval/runs" / old / "summary.json"
    doc = json.loads(summary.read_text())
    doc["timestamp"] = "2020-01-01T00:00:00Z"
    summary.write_text(json.dumps(doc))
    sql = "UPDATE runs SET started_at = ? WHERE run_id = ?"
    stamp: Any = "2020-01-01T00:00:00.000000+00:00"
    if target.backend == "postgresql":
        from datetime import datetime, timezone

        stamp = datetime(2020, 1, 1, tzinfo=timezone.utc)
    target.execute(sql, (stamp, old))

    nothing = _prune(golden_project, target.url, "--older-than", "10000")
    assert nothing.returncode == 0, nothing.stderr
    assert _folders(golden_project) == set(ids) and _stored(target.url) == set(ids)
    done = _prune(golden_project, target.url, "--older-than", "1")
    assert done.returncode == 0, done.stderr
    assert _folders(golden_project) == set(ids[1:])
    assert _stored(target.url) == set(ids[1:])


def test_links_are_never_followed(
    pytester: pytest.Pytester, golden_project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    url = str(golden_project / ".goldeval/goldeval.sqlite3")
    ids = _runs(pytester, url, 2)
    outside = tmp_path_factory.mktemp("outside")
    (outside / "precious.txt").write_text("keep me")
    runs = golden_project / ".goldeval/runs"
    (runs / "0000-linked-run").symlink_to(outside, target_is_directory=True)
    os.utime(runs / "0000-linked-run", (0, 0), follow_symlinks=False)
    done = _prune(golden_project, url, "--keep-last", "0")
    assert done.returncode == 0, done.stderr
    assert (outside / "precious.txt").read_text() == "keep me"
    assert (runs / "0000-linked-run").is_symlink()
    assert "left alone 0000-linked-run (a symbolic link)" in done.stdout
    assert _folders(golden_project) == {ids[-1], "0000-linked-run"}

    # LATEST as a link: refused with a clear message, nothing deleted, no traceback
    latest = runs / "LATEST"
    (outside / "LATEST").write_text(str(runs / ids[-1]) + "\n")
    latest.unlink()
    latest.symlink_to(outside / "LATEST")
    refused = _prune(golden_project, url, "--keep-last", "0")
    assert refused.returncode == 4
    assert "LATEST is a symbolic link" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert ids[-1] in _folders(golden_project)


def test_bad_usage_is_a_clear_error(golden_project: Path) -> None:
    both = run_cli("prune", "--keep-last", "1", "--older-than", "3", cwd=golden_project)
    assert both.returncode == 4 and "not allowed with argument" in both.stderr
    neither = run_cli("prune", cwd=golden_project)
    assert neither.returncode == 4 and "--keep-last" in neither.stderr
    negative = run_cli("prune", "--keep-last", "-2", cwd=golden_project)
    assert negative.returncode == 4 and "--keep-last must be 0 or more" in negative.stderr
    for days in ("nan", "inf", "-1"):
        bad = run_cli("prune", f"--older-than={days}", cwd=golden_project)
        assert bad.returncode == 4 and "--older-than must be a number of days" in bad.stderr
        assert "Traceback" not in bad.stderr
    (golden_project / "baselines" / "broken.json").write_text("{not json")
    broken = run_cli("prune", "--keep-last", "1", cwd=golden_project)
    assert broken.returncode == 4
    assert "broken.json" in broken.stderr and "cannot read baseline" in broken.stderr
    assert "Traceback" not in broken.stderr
