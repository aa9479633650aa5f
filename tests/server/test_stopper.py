"""The worker's stop of a run's process (server/stopper.py), on real processes: the stop file
first, SIGTERM only when the plugin does not answer, SIGKILL after the grace period, and
what the kill is said to be counted from."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from goldeval.server.stopper import ANSWER_SECONDS, Stopper, stop_file

#: A process that ignores SIGTERM (a project fixture that blocks signals) and waits.
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"


def _start() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", STUBBORN], start_new_session=True)


def _drive(stopper: Stopper, seconds: float) -> list[str]:
    sent: list[str] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end and stopper.proc.poll() is None:
        step = stopper.step(time.monotonic())
        if step is not None:
            sent.append(step)
        time.sleep(stopper.wait(time.monotonic(), 0.05))
    return sent


def test_an_answered_stop_sends_no_sigterm_and_the_kill_says_so(tmp_path: Path) -> None:
    proc = _start()
    try:
        path = stop_file(tmp_path, "run-1")
        stopper = Stopper(proc, path, kill_grace=0.5)
        stopper.ask(time.monotonic())
        assert path.read_text(encoding="ascii").strip() == "SIGTERM"
        path.with_name(path.name + ".seen").touch()  # what the plugin writes
        assert _drive(stopper, 10) == ["SIGKILL"]
        assert proc.wait(10) == -signal.SIGKILL
        assert stopper.killed_after() == "the stop request"
        stopper.clean()
        assert list(tmp_path.iterdir()) == []
    finally:
        proc.kill()


def test_an_unanswered_stop_is_sigterm_then_sigkill(tmp_path: Path) -> None:
    proc = _start()
    try:
        stopper = Stopper(proc, stop_file(tmp_path, "run-2"), kill_grace=0.5)
        asked = time.monotonic()
        stopper.ask(asked)
        assert _drive(stopper, 10) == ["SIGTERM", "SIGKILL"]
        assert stopper.terminated_at is not None
        assert stopper.terminated_at - asked >= ANSWER_SECONDS
        assert proc.wait(10) == -signal.SIGKILL
        assert stopper.killed_after() == "SIGTERM"
    finally:
        proc.kill()
