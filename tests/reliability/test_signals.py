"""Issue 16 (signals): SIGTERM ends a run like Ctrl-C, and a signal during the final write
never leaves half a run folder.

Real subprocesses against the real local LLM server: SIGTERM mid-run must give exit 75, a run
folder marked INTERRUPTED (not LATEST), the store run INTERRUPTED, and a resume with the same
run key must not grade anything twice; under ``-n 2`` the workers stop calling the model too.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from goldeval.store import open_store
from goldeval.testing.llm_server import FakeLLMServer
from tests.helpers import LIVE_NO_GATE, RunFiles, chat_calls, spawn_pytest

LIVE = [*LIVE_NO_GATE]
CASES = 10


def _graded(store_url: str, key: str) -> int:
    try:
        with open_store(store_url) as store:
            row = store.get_run(key)
            return len(store.attempts(row.run_id)) if row else 0
    except Exception:  # the store may not exist yet
        return 0


@pytest.mark.parametrize(
    "workers,concurrency",
    [([], 1), (["-n", "2"], 1), (["-n", "2"], 3)],
    ids=["serial", "xdist2", "xdist2-prefetching"],
)
def test_sigterm_mid_run_is_an_interrupted_run_resumable_by_key(
    pytester: pytest.Pytester,
    golden_project: Path,
    llm: FakeLLMServer,
    run_files: RunFiles,
    workers: list[str],
    concurrency: int,
) -> None:
    store_url = str(golden_project / "runs.sqlite3")
    key = f"term-{len(workers)}-{concurrency}"
    attempts = 3
    total = CASES * attempts
    args = [
        *LIVE,
        f"--golden-base-url={llm.base_url}",
        f"--golden-store={store_url}",
        f"--golden-run-key={key}",
        f"--golden-concurrency={concurrency}",
        f"--golden-attempts={attempts}",
    ]
    llm.latency = 0.3
    proc = spawn_pytest(golden_project, *args, *workers)
    try:
        deadline = time.monotonic() + 90
        graded = 0
        while time.monotonic() < deadline and graded < 4:
            time.sleep(0.1)
            graded = _graded(store_url, key)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert 4 <= graded < total, out[-3000:]
    assert proc.returncode == 75, out[-3000:]
    assert "SIGTERM" in out
    calls_at_exit = chat_calls(llm)
    time.sleep(1.0)
    assert chat_calls(llm) == calls_at_exit  # no worker left calling the model
    runs = golden_project / ".goldeval" / "runs"
    (run_json,) = runs.glob("*/run.json")
    interrupted = json.loads(run_json.read_text(encoding="utf-8"))
    assert interrupted["status"] == "INTERRUPTED"
    assert interrupted["exitDecision"]["code"] == 75
    assert not list(runs.glob("*/.cases.*.tmp"))
    assert not (runs / "LATEST").exists()
    history = (runs / "history.jsonl").read_text(encoding="utf-8")
    assert "INTERRUPTED" in history
    with open_store(store_url) as store:
        row = store.get_run(key)
        assert row is not None and row.status == "INTERRUPTED"
        done_before = len(store.attempts(row.run_id))
    assert interrupted["attemptsTotal"] == done_before  # what was graded is kept

    llm.latency = 0.0
    calls_before = chat_calls(llm)
    resumed = pytester.runpytest(*args)
    assert resumed.ret == 0, resumed.stdout.str()[-3000:]
    assert chat_calls(llm) - calls_before == total - done_before  # nothing graded twice
    # Calls made but not recorded before the stop (in flight, prefetched, or reports still
    # queued at the controller) are made again on resume, as after Ctrl-C: paid twice, graded
    # once.
    print(f"{chat_calls(llm) - total} calls made before SIGTERM but recorded by no one")
    with open_store(store_url) as store:
        row = store.get_run(key)
        assert row.status == "COMPLETED"
        stored = store.attempts(row.run_id)
    assert len({(a["caseId"], a["index"]) for a in stored}) == len(stored) == total
    final = run_files.latest()
    assert final["status"] == "COMPLETED" and final["attemptsTotal"] == total


SLOW_WRITE = """
import time

import goldeval.results.run_folder as artifacts

_write_case = artifacts.write_case


def slow_write_case(*args, **kwargs):
    time.sleep(0.4)  # a slow disk: the final write takes seconds
    return _write_case(*args, **kwargs)


artifacts.write_case = slow_write_case
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_the_final_write_leaves_a_whole_run(
    pytester: pytest.Pytester, golden_project: Path, sig: signal.Signals
) -> None:
    pytester.makeconftest(SLOW_WRITE)
    proc = spawn_pytest(
        golden_project, "--golden=generation-v1", "-p", "no:cacheprovider", "--golden-store=none"
    )
    runs = golden_project / ".goldeval" / "runs"
    try:
        deadline = time.monotonic() + 60
        seen = False
        while time.monotonic() < deadline and not seen:
            seen = runs.exists() and any(runs.glob("*/.cases.*"))
            time.sleep(0.01)
        assert seen, "the final write never started"
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    assert not list(run_dir.glob(".cases.*")), out[-3000:]
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert run["status"] == "COMPLETED" and run["attemptsTotal"] == CASES
    assert (run_dir / "summary.json").exists() and (run_dir / "report.md").exists()
    assert f"{sig.name} arrived while the run was being written" in out
    assert proc.returncode == 0, out[-3000:]
    assert "Traceback" not in out
