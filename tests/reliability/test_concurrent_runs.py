"""Runs that finish at the same time (issue 16, items 4 and 5), with real processes.

* Runs started in the same second (CI shards, a matrix) each get their own id and folder:
  ids are time + a random suffix, and the folder is created exclusively.
* Sessions of one run key share the key's folder on purpose; they write it one at a time (a
  flock on the folder) through unique temp files, so none crashes on another's temp file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from goldeval.results.evidence import verify_run_dir
from goldeval.results.run_document import new_run_id
from goldeval.store import open_store

# Every process sleeps until the same instant, then starts pytest: their sessions start in
# the same second (the old ids had one-second resolution and no suffix).
START_TOGETHER = (
    "import sys, time\n"
    "time.sleep(max(0.0, float(sys.argv[1]) - time.time()))\n"
    "import pytest\n"
    "sys.exit(pytest.main(sys.argv[2:]))\n"
)


def _start_together(project: Path, n: int, *args: str) -> list[tuple[int, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    at = float(int(time.time()) + 4) + 0.05  # just after a second boundary, once all started
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", START_TOGETHER, str(at), "-p", "no:cacheprovider", *args],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        for _ in range(n)
    ]
    return [(p.wait(timeout=600), p.communicate()[0]) for p in procs]


def _tmp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]


# --------------------------------------------------------------------------- 4. run ids


def test_run_ids_of_one_instant_are_unique_and_ids_sort_by_time(tmp_path: Path) -> None:
    now = datetime(2026, 12, 3, 6, 45, 37, 123456, tzinfo=timezone.utc)
    ids = {new_run_id(tmp_path, now) for _ in range(2000)}
    assert len(ids) == 2000
    assert all(i.startswith("2026-12-03T06-45-37.123-") for i in ids)
    later = [new_run_id(tmp_path, now + timedelta(milliseconds=ms)) for ms in (1, 900, 1500, 61000)]
    assert sorted(later) == later and max(ids) < later[0]


def test_a_run_folder_is_created_exclusively(tmp_path: Path) -> None:
    from goldeval.results.finalise import Finalisation

    taken = tmp_path / "2026-12-03T06-45-37.000-aaaaaa"
    taken.mkdir()
    (taken / "run.json").write_text("{}", encoding="utf-8")
    fresh = iter(["2026-12-03T06-45-37.000-bbbbbb"])
    fin = Finalisation()
    run_id, run_dir = fin.open_run_dir(
        tmp_path, taken.name, shared=False, new_id=lambda: next(fresh)
    )
    assert run_id == "2026-12-03T06-45-37.000-bbbbbb" and run_dir == tmp_path / run_id
    assert {p.name for p in run_dir.iterdir()} == {"cases", fin.cases_files[run_dir].name}
    # A run key's folder is shared by its sessions (a resumed run keeps its folder).
    other = Finalisation()
    assert other.open_run_dir(tmp_path, taken.name, shared=True, new_id=None)[1] == taken
    fin.release_all()
    other.release_all()


def test_runs_started_in_the_same_second_get_their_own_folders(golden_project: Path) -> None:
    out = golden_project / ".goldeval" / "runs"
    results = _start_together(golden_project, 4, "--golden=generation-v1", "--golden-store=none")
    for code, output in results:
        assert code == 0, output
    folders = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(folders) == 4
    history = [json.loads(ln) for ln in (out / "history.jsonl").read_text().splitlines()]
    assert sorted(h["runId"] for h in history) == [p.name for p in folders]
    for folder in folders:
        assert verify_run_dir(folder) == []
        run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        assert run["runId"] == folder.name and len(run["cases"]) == 10
        assert run["attemptsTotal"] == 10  # no mixed cases from another run
    assert _tmp_files(out) == []


# --------------------------------------------------------------------------- 5. one run key


# The project's conftest holds every session at the start of pytest_sessionfinish (a wrapper
# runs before goldeval's own hook) until all of them got there: the eight finalisations then
# write the key's folder at the same moment, which is what crashed on `run.json.tmp`.
BARRIER_CONFTEST = """
import os, pathlib, time
import pytest

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    barrier = pathlib.Path(os.environ["FINALISE_TEST_BARRIER"])
    (barrier / str(os.getpid())).touch()
    deadline = time.time() + 120
    while len(list(barrier.iterdir())) < 8 and time.time() < deadline:
        time.sleep(0.01)
    return (yield)
"""


def test_eight_processes_with_one_run_key(
    golden_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = golden_project / ".goldeval" / "runs"
    (golden_project / "conftest.py").write_text(BARRIER_CONFTEST, encoding="utf-8")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    monkeypatch.setenv("FINALISE_TEST_BARRIER", str(barrier))
    results = _start_together(golden_project, 8, "--golden=generation-v1", "--golden-run-key=k8")
    assert len(list(barrier.iterdir())) == 8
    for code, output in results:
        assert "Traceback" not in output and "INTERNALERROR" not in output, output
        assert code == 0, output
    (folder,) = [p for p in out.iterdir() if p.is_dir()]
    assert verify_run_dir(folder) == []
    assert _tmp_files(out) == []
    run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    assert run["status"] == "COMPLETED" and len(run["cases"]) == 10
    history = [json.loads(ln) for ln in (out / "history.jsonl").read_text().splitlines()]
    assert len(history) == 8 and {h["runId"] for h in history} == {folder.name}
    assert {h["status"] for h in history} == {"COMPLETED"}
    assert (out / "LATEST").read_text(encoding="utf-8") == str(folder.resolve()) + "\n"
    with open_store(str(golden_project / ".goldeval" / "goldeval.sqlite3")) as store:
        (row,) = store.runs()
        assert (row.run_id, row.status) == (folder.name, "COMPLETED")
        assert len(store.attempts(row.run_id)) == 10
