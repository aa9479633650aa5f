"""How a worker stops a run's pytest process: ask through a file, then signal, then kill.

A SIGTERM is delivered to whatever handler the run's project installed last: a fixture that
ignores SIGTERM made a cancel do nothing (the run completed and read as passed), a handler
that calls ``sys.exit(0)`` turned the rest of the run into ERROR attempts, and one raising
``KeyboardInterrupt`` ended pytest with exit 2. So the worker first writes the stop file
(``GOLDEVAL_STOP_FILE``, see ``pytest_plugin/stopping.py``), which the plugin checks every
quarter second and turns into its own stop between items (INTERRUPTED, 75), whatever the
project did with signals. SIGTERM follows only when the plugin has not answered (``.seen``)
within :data:`ANSWER_SECONDS` (pytest still importing, no plugin listening); SIGKILL when the
process has not ended ``kill_grace`` seconds after it was asked.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

#: How long the plugin has to answer the stop file before SIGTERM is sent.
ANSWER_SECONDS = 2.0
#: How often the worker looks for the answer while it waits for one.
LOOK_SECONDS = 0.25


def signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    """``signum`` to the run's process group (pytest and anything it started)."""
    try:
        os.killpg(proc.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # already gone
    except OSError:
        proc.send_signal(signum)


def stop_file(work_dir: Path, job_id: str) -> Path:
    """The stop file of a run's pytest process, none left from an earlier one."""
    path = work_dir / f"{job_id}.stop"
    for stale in (path, _answer(path)):
        stale.unlink(missing_ok=True)
    return path


def _answer(path: Path) -> Path:
    return path.with_name(path.name + ".seen")


class Stopper:
    """The stop of one pytest process, driven by the worker's supervision loop."""

    def __init__(self, proc: subprocess.Popen[bytes], path: Path, kill_grace: float) -> None:
        self.proc = proc
        self.path = path
        self.kill_grace = kill_grace
        self.asked_at: float | None = None
        self.terminated_at: float | None = None
        #: SIGKILL was sent.
        self.killed = False

    def killed_after(self) -> str | None:
        """What the SIGKILL's grace period was counted from ("SIGTERM", or "the stop
        request" the plugin answered, when no SIGTERM was sent); None: not killed."""
        if not self.killed:
            return None
        return "SIGTERM" if self.terminated_at is not None else "the stop request"

    def clean(self) -> None:
        """The stop file and its answer removed once the process has ended."""
        for done in (self.path, _answer(self.path)):
            done.unlink(missing_ok=True)

    def ask(self, now: float) -> None:
        try:
            self.path.write_text("SIGTERM\n", encoding="ascii")
        except OSError:
            pass  # no file: the signal below is sent at once
        self.asked_at = now

    def wait(self, now: float, wait: float) -> float:
        """How long the loop may wait before :meth:`step` has something to do."""
        if self.asked_at is not None and self.terminated_at is None and not self.answered:
            return max(0.05, min(wait, LOOK_SECONDS))
        return wait

    @property
    def answered(self) -> bool:
        return _answer(self.path).exists()

    def step(self, now: float) -> str | None:
        """What the stop needs now: "SIGTERM" or "SIGKILL" once sent, else None."""
        if self.asked_at is None or self.killed:
            return None
        if self.terminated_at is None and not self.answered:
            if now - self.asked_at >= ANSWER_SECONDS or not self.path.exists():
                signal_group(self.proc, signal.SIGTERM)
                self.terminated_at = now
                return "SIGTERM"
            return None
        if now - (self.terminated_at or self.asked_at) > self.kill_grace:
            signal_group(self.proc, signal.SIGKILL)
            self.killed = True
            return "SIGKILL"
        return None
