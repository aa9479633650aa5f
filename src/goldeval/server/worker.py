"""Workers: take QUEUED runs from the store and execute them as the pytest plugin does.

A run is executed by ``python -m pytest <rows file> --golden=<id> --golden-run-key=svc-<id>
...`` in the project root, as a subprocess: the same code, the same artifacts and the same
exit decision as a run started by hand or by CI. The worker only supervises it:

* it renews its claim on the run every ``heartbeat_seconds`` (a worker that dies stops
  renewing; after ``lease_seconds`` another worker takes the run again, and the run key makes
  the plugin skip every attempt already graded: nothing is graded twice);
* the pytest process gets SIGTERM when its worker dies (Linux ``PR_SET_PDEATHSIG``), so it
  records the run INTERRUPTED instead of running on unsupervised next to its successor;
* the pytest process runs in its own process group (a new session): a Ctrl-C or SIGTERM
  meant for the worker does not reach it twice, and the worker signals the whole group;
* cancellation (``POST .../cancel``), the run budget (``deadlineSeconds``, from the start of
  the pytest process) and a graceful shutdown all ask the run to stop through its stop file
  (``stopper.py``) — the plugin turns it into a stop between items and its own INTERRUPTED
  path (exit 75, ``pytest_plugin/stopping.py``), whatever the project did with SIGTERM —
  then SIGTERM to that group if the plugin did not answer, and SIGKILL only if it does not
  stop within ``kill_grace_seconds`` (longer than the plugin's own ``stop_grace_seconds``);
* the final status and exit code are the ones the plugin's verdict recorded (COMPLETED,
  FAILED or INTERRUPTED, and its exit code); a run killed before recording its end is decided
  by the same verdict from the signal that ended it; a run the plugin never began (a usage
  error) is FAILED with pytest's message. ``error`` says why a stopped run stopped
  ("cancelled by key#N", "worker stopped", "killed ...").

The store URL reaches pytest through ``GOLDEVAL_STORE`` (the environment, not the command
line: a PostgreSQL password must not show in ``ps``).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from goldeval.core.errors import GoldevalError
from goldeval.core.settings import STOP_FILE_ENV
from goldeval.core.textsafe import one_line, safe_text
from goldeval.server import datasets, logs, run_artifacts
from goldeval.server.auth import ENV as AUTH_ENV
from goldeval.server.run_endings import (
    ended_decision,
    failure_text,
    final_status,
    mark_killed,
    recorded_decision,
    refused_green,
    signal_name,
    unrecorded_stop,
)
from goldeval.server.settings import ServiceSettings
from goldeval.server.stopper import Stopper, signal_group, stop_file
from goldeval.store import Store, StoreError, open_store, redact_url
from goldeval.store.queue import FINISHED, RunQueue, ServiceRun
from goldeval.store.views import run_document
from goldeval.verdict.exit_codes import INFRA, USAGE, ExitDecision

#: Starts pytest with SIGTERM as its parent-death signal (Linux; elsewhere a no-op).
_LAUNCHER = (
    "import os, signal, sys\n"
    "try:\n"
    "    import ctypes\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)\n"
    "except Exception:\n"
    "    pass\n"
    "if os.getppid() != int(os.environ.pop('GOLDEVAL_WORKER_PID', '0') or os.getppid()):\n"
    f"    sys.exit({INFRA})\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'pytest', *sys.argv[1:]])\n"
)
#: A run whose workers died this many times is not taken again (a run that kills its worker
#: must not take down every worker in turn): it ends FAILED.
MAX_CLAIMS = 3


#: Variables a run's pytest process must not inherit: the service's own secrets (the API keys,
#: ADMIN included: a dataset's conftest.py or a provider function runs in that process) and
#: what pytest sets when the service itself runs under pytest (its tests).
CHILD_ENV_DROPPED = frozenset(
    {AUTH_ENV, "PYTEST_XDIST_WORKER", "PYTEST_XDIST_TESTRUNUID", "PYTEST_CURRENT_TEST"}
)


def child_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of a run's pytest process: the worker's, without the service's secrets.
    Provider and judge settings (``OPENAI_API_KEY``, ``GOLDEVAL_JUDGE_API_KEY``, ...) stay: the
    run needs them, and they are the run's, not the service's."""
    return {name: value for name, value in environ.items() if name not in CHILD_ENV_DROPPED}


def worker_name(number: int = 0) -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{number}"


#: Why a run stopped when the worker stopped it (cancellation names who asked, see
#: ``RunQueue.request_cancel``).
STOP_REASONS = {
    "cancelled": "cancelled",
    "shutdown": "worker stopped: the worker shut down; resume with POST /api/eval/runs/{id}/resume",
    "deadline": "stopped at the run budget (deadlineSeconds {budget}s);"
    " resume with POST /api/eval/runs/{id}/resume",
}


class Worker:
    """One worker: a loop that claims runs and supervises their pytest process."""

    def __init__(self, settings: ServiceSettings, name: str, stop: threading.Event) -> None:
        self.settings = settings
        self.name = name
        self.stop = stop
        self._store: Store | None = None

    # ---- store

    def _queue(self) -> RunQueue:
        if self._store is None:
            self._store = open_store(self.settings.store_url)
        return RunQueue(self._store)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    # ---- loop

    def run_forever(self) -> None:
        logs.event("worker started", worker=self.name)
        try:
            while not self.stop.is_set():
                try:
                    did = self.run_once()
                except StoreError as exc:
                    logs.event(
                        "worker store error", logging.ERROR, worker=self.name, error=str(exc)
                    )
                    self.close()
                    did = False
                if not did:
                    self.stop.wait(self.settings.poll_seconds)
        finally:
            self.close()
            logs.event("worker stopped", worker=self.name)

    def run_once(self) -> bool:
        """Claim and execute one run; False when the queue was empty."""
        job = self._queue().claim(self.name, lease_seconds=self.settings.lease_seconds)
        if job is None:
            return False
        if job.claims > MAX_CLAIMS:
            error = (
                f"its worker stopped {job.claims - 1} times while running it; not retried "
                "(see the run's log in .goldeval/service); POST .../resume to try again"
            )
            self._queue().finish(job.id, self.name, "FAILED", exit_code=None, error=error)
            logs.event("run abandoned", logging.ERROR, run_id=job.id, claims=job.claims)
            return True
        logs.event(
            "run claimed",
            run_id=job.id,
            worker=self.name,
            dataset_version=job.dataset_id,
            idempotency_key=job.idempotency_key,
            resumed=job.claims > 1 or None,
        )
        self.execute(job)
        return True

    # ---- one run

    def _argv(self, job: ServiceRun, rows_path: Path, baseline: Path | None) -> list[str]:
        req = job.request
        argv = [
            str(rows_path),
            "-p",
            "no:cacheprovider",
            "-q",
            f"--golden={job.dataset_id}",
            f"--golden-mode={req.get('mode') or 'fixture'}",
            f"--golden-attempts={int(req.get('attempts') or 1)}",
            f"--golden-run-key={job.run_key}",
            f"--golden-out={self.settings.runs_dir}",
            "-o",
            f"golden_root={self.settings.datasets}",
        ]
        if req.get("model"):
            argv.append(f"--golden-model={req['model']}")
        if req.get("provider"):
            argv.append(f"--golden-provider={req['provider']}")
        if req.get("noGate"):
            argv.append("--golden-no-gate")
        if req.get("variants"):  # checked against the manifest when the run was queued
            argv.append(f"--golden-variants={','.join(req['variants'])}")
        if baseline is not None:
            argv.append(f"--golden-baseline={baseline}")
        return argv

    def _baseline(self, job: ServiceRun, queue: RunQueue) -> Path | None:
        """The run named by ``baselineRunId``, exported as a run.json for --golden-baseline."""
        ref = job.request.get("baselineRunId")
        if not ref:
            return None
        base = queue.get(str(ref))
        target = base.run_key if base is not None else str(ref)
        doc = run_document(queue.store, target)
        path = self.settings.work_dir / f"{job.id}.baseline.json"
        path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        return path

    def execute(self, job: ServiceRun) -> None:
        queue = self._queue()
        settings = self.settings
        settings.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            resolved = datasets.resolve(settings, job.dataset_id)
            baseline = self._baseline(job, queue)
        except GoldevalError as exc:
            why = one_line(str(exc))
            refused = ExitDecision(USAGE, why)._asdict()
            queue.finish(job.id, self.name, "FAILED", exit_code=USAGE, error=why, decision=refused)
            logs.event("run failed", logging.WARNING, run_id=job.id, error=one_line(str(exc)))
            return
        log_path = settings.work_dir / f"{job.id}.log"
        env = child_environment(os.environ)
        env["GOLDEVAL_STORE"] = settings.store_url
        env["GOLDEVAL_WORKER_PID"] = str(os.getpid())
        env[STOP_FILE_ENV] = str(stop_file(settings.work_dir, job.id))
        argv = [
            settings.python,
            "-c",
            _LAUNCHER,
            *self._argv(job, resolved.rows_path, baseline),
            *run_artifacts.child_options(run_artifacts.evidence_dir(settings.work_dir, job.id)),
        ]
        started = time.monotonic()
        # Masked as it is written, mode 0600 (logs.RunLog): the project's code may print
        # what the run inherited (the store URL, a provider key).
        writer_env = child_environment(os.environ)
        log = logs.RunLog(log_path, settings.secret_forms, settings.python, writer_env)
        try:
            log.note(f"\n== {time.strftime('%Y-%m-%dT%H:%M:%S')} {self.name}\n")
            proc = subprocess.Popen(
                argv,
                cwd=settings.root,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log.stdout,
                stderr=subprocess.STDOUT,
                # Its own process group: stops are sent to the group, once (see the module).
                start_new_session=True,
            )
            stopper = Stopper(proc, Path(env[STOP_FILE_ENV]), settings.kill_grace_seconds)
            reason = self._supervise(job, proc, log, stopper)
            stopper.clean()
            killed = stopper.killed_after()
        finally:
            log.close()
        elapsed = time.monotonic() - started
        if reason == "lost":
            logs.event("run taken over", logging.WARNING, run_id=job.id, worker=self.name)
            return
        self._conclude(job, queue, proc.returncode, reason, log_path, elapsed, killed=killed)

    def _supervise(
        self, job: ServiceRun, proc: subprocess.Popen[bytes], log: logs.RunLog, stopper: Stopper
    ) -> str:
        """Wait for pytest, renewing the claim; returns why it ended early ("" if it did not).
        ``stopper`` stops it (the stop file, SIGTERM, SIGKILL: see ``stopper``)."""
        settings = self.settings
        queue = self._queue()
        # The run budget is a stop like a cancel (the plugin's INTERRUPTED path, 75,
        # resumable), not the plugin's --golden-deadline (INCOMPLETE, 1: the exit status of a
        # quality failure, for a run that only ran out of time).
        budget = job.request.get("deadlineSeconds")
        budget_end = time.monotonic() + float(budget) if budget else None
        reason = ""
        linked = False
        while True:
            wait = stopper.wait(time.monotonic(), settings.heartbeat_seconds)
            if budget_end is not None and stopper.asked_at is None:  # the stop on time
                wait = max(0.05, min(wait, budget_end - time.monotonic()))
            try:
                proc.wait(timeout=wait)
                return reason
            except subprocess.TimeoutExpired:
                pass
            try:
                ours, cancel = queue.heartbeat(job.id, self.name)
                if not linked:
                    store_run = queue.store_run_id(job.run_key)
                    if store_run is not None:
                        queue.link(job.id, store_run, str(settings.runs_dir / store_run))
                        linked = True
            except StoreError as exc:
                # The store is unreachable: keep the run going (the plugin copes), retry later.
                logs.event("heartbeat failed", logging.WARNING, run_id=job.id, error=str(exc))
                ours, cancel = True, False
            if not ours:
                signal_group(proc, signal.SIGKILL)
                proc.wait()
                stopper.killed = True
                return "lost"
            now = time.monotonic()
            if stopper.asked_at is None:
                if cancel:
                    reason = "cancelled"
                elif self.stop.is_set():
                    reason = "shutdown"
                elif budget_end is not None and now >= budget_end:
                    reason = "deadline"
                if reason:
                    logs.event("stopping run", run_id=job.id, reason=reason)
                    stopper.ask(now)
            sent = stopper.step(now)
            if sent is not None:
                logs.event("stopping run", run_id=job.id, reason=reason, signal=sent)
            if sent == "SIGKILL":
                log.note("\n== goldeval worker: SIGKILL after the grace period\n")

    def _conclude(
        self,
        job: ServiceRun,
        queue: RunQueue,
        code: int,
        reason: str,
        log_path: Path,
        elapsed: float,
        *,
        killed: str | None = None,
    ) -> None:
        row = queue.store.get_run(job.run_key)
        if row is not None:
            queue.link(job.id, row.run_id, str(self.settings.runs_dir / row.run_id))
        kill_verdict: ExitDecision | None = None
        signum = -code if code < 0 else 0
        if signum:
            # Killed by a signal (SIGKILL after the grace period, the OOM killer). A run the
            # plugin finished keeps the verdict it recorded (the kill came after it); else the
            # one verdict decides from the signal, as for a run the plugin saw terminated, and
            # the store's run says so too (run_endings.mark_killed).
            kill_verdict = recorded_decision(row) or mark_killed(job, queue, row, signum)
            code = kill_verdict.code
            row = queue.store.get_run(job.run_key)
        overruled = refused_green(row, code) if kill_verdict is None else None
        if overruled is not None:
            code = overruled.code  # never a green the run's verdict does not give
        status = final_status(row, reason)
        error: str | None = None
        decision: ExitDecision | None = kill_verdict
        recorded = row is not None and row.status in FINISHED
        if reason and not recorded and code != USAGE:
            # Stopped by the worker, and no store run records the end: killed before the
            # session made one, SIGTERM before the session began, or stopped before any
            # attempt was recorded. The verdict decides from the signal, as the plugin would.
            ended_by = signal_name(-signum if signum else -signal.SIGTERM)
            status, code, why = unrecorded_stop(ended_by, job.id)
            decision = ExitDecision(code, why)
        if reason in STOP_REASONS and recorded and status != "INTERRUPTED":
            # The stop came after the plugin recorded the run's end (its final write, pytest's
            # teardown): the run is as recorded, the stop changed nothing.
            logs.event("stop after the run was recorded", run_id=job.id, reason=reason)
            reason = ""
        if reason in STOP_REASONS:
            error = self._stop_text(job, queue, reason, killed=killed)
        elif kill_verdict is not None:
            # Killed after the plugin recorded a passing end: nothing failed to explain.
            passed = status == "COMPLETED" and code == 0
            error = None if passed else kill_verdict.reason
        elif status != "COMPLETED" or code != 0:
            error = failure_text(log_path, row, code, self.settings)
        if overruled is not None and decision is None:
            if recorded_decision(row) is None:  # no end recorded: the log says nothing useful
                error, decision = overruled.reason, overruled
            else:
                error = f"{error} (pytest itself exited 0: a hook or plugin changed it)"
        if row is not None:
            # Before the final status: a client that sees it finished finds every artifact.
            self._record_evidence(job, queue, row.run_id, log_path)
        # Recorded with the status: the API reads the decision, never rebuilds it (issue 33).
        if decision is None:
            decision = ended_decision(row, code, error)
        queue.finish(
            job.id, self.name, status, exit_code=code, error=error, decision=decision._asdict()
        )
        logs.event(
            "run finished",
            run_id=job.id,
            store_run_id=row.run_id if row is not None else None,
            status=status,
            exit_code=code,
            dataset_version=job.dataset_id,
            idempotency_key=job.idempotency_key,
            seconds=round(elapsed, 3),
        )
        if row is not None:
            self._log_cases(job, row.run_id)

    def _record_evidence(
        self, job: ServiceRun, queue: RunQueue, store_run_id: str, log_path: Path
    ) -> None:
        """JUnit XML, HTML report, log bundle and manifest.json into the run's inventory
        (:mod:`goldeval.server.run_artifacts`); a failure costs those downloads, not the run."""
        settings = self.settings
        try:
            run_artifacts.record(
                queue.store,
                store_run_id,
                settings.runs_dir / store_run_id,
                run_artifacts.evidence_dir(settings.work_dir, job.id),
                [log_path],
                settings.public_text,
            )
        except (OSError, StoreError) as exc:
            logs.event(
                "run evidence not recorded", logging.WARNING, run_id=job.id, error=safe_text(exc)
            )

    def _stop_text(
        self, job: ServiceRun, queue: RunQueue, reason: str, *, killed: str | None
    ) -> str:
        """Why the worker stopped the run ("cancelled by key#N" as recorded at the request);
        ``killed``: what the kill's grace period was counted from (``Stopper.killed_after``)."""
        text = self._stop_reason(job, queue, reason)
        if killed is None:
            return text
        grace = self.settings.kill_grace_seconds
        return f"killed: pytest did not stop within {grace:g}s of {killed} ({text})"

    @staticmethod
    def _stop_reason(job: ServiceRun, queue: RunQueue, reason: str) -> str:
        if reason == "cancelled":
            try:
                now = queue.get(job.id)
            except StoreError:
                now = None
            if now is not None and now.error and now.error.startswith("cancelled"):
                return now.error
        text = STOP_REASONS[reason].replace("{id}", job.id)
        if "{budget}" in text:
            text = text.replace("{budget}", f"{float(job.request.get('deadlineSeconds') or 0):g}")
        return text

    def _log_cases(self, job: ServiceRun, store_run_id: str) -> None:
        """One log line per case with its status (the seed's per-case evidence)."""
        try:
            per_case: dict[str, list[str]] = {}
            for record in self._queue().store.attempts(store_run_id):
                per_case.setdefault(str(record.get("caseId")), []).append(str(record.get("status")))
        except StoreError:
            return
        for case_id, statuses in per_case.items():
            logs.event(
                "case result",
                run_id=job.id,
                case_id=case_id,
                dataset_version=job.dataset_id,
                statuses=",".join(statuses),
            )


def start_workers(
    settings: ServiceSettings, count: int, stop: threading.Event
) -> list[threading.Thread]:
    """``count`` worker threads (each supervising at most one pytest process)."""
    threads = []
    for number in range(count):
        worker = Worker(settings, worker_name(number), stop)
        thread = threading.Thread(target=worker.run_forever, name=f"goldeval-worker-{number}")
        thread.daemon = True
        thread.start()
        threads.append(thread)
    return threads


def run_workers(settings: ServiceSettings, count: int) -> int:
    """``goldeval worker``: run workers until SIGTERM/SIGINT, then stop their runs cleanly."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        logs.event("worker shutdown requested", signal=signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    logs.event(
        "workers starting", count=count, store=redact_url(settings.store_url), pid=os.getpid()
    )
    threads = start_workers(settings, count, stop)
    while any(t.is_alive() for t in threads):
        for thread in threads:
            thread.join(timeout=0.5)
    return 0
