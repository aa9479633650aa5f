"""How a service run's pytest process ended, as the worker reports it: the status, exit code
and error the API shows, always from what the plugin recorded or from the one verdict.

A run whose pytest a signal killed (SIGKILL after the grace period, the OOM killer) recorded
nothing, so the verdict decides from the signal (75, "terminated by SIGKILL", the resume
request), and the store's run says so, so the API, the compare endpoint and the run page all
decide from the same fact (issue 31). A run stopped before the plugin recorded its end is
decided the same way (:func:`unrecorded_stop`); otherwise the error is the plugin's decision
line or recorded reason (never a silent failure).
"""

from __future__ import annotations

import logging
import os
import re
import signal
from pathlib import Path
from typing import Any

from goldeval.core.errors import GoldevalError
from goldeval.core.limits import LimitExceeded, loads_json
from goldeval.core.textsafe import one_line
from goldeval.results.documents import typed_run
from goldeval.results.finalise import FAULT_KEY
from goldeval.results.run_document import RUN_DOCUMENT
from goldeval.results.run_folder import summary as run_summary
from goldeval.server import logs
from goldeval.server.settings import ServiceSettings
from goldeval.store import StoreError
from goldeval.store.base import RunRow
from goldeval.store.queue import FINISHED, RunQueue, ServiceRun
from goldeval.store.views import run_document
from goldeval.verdict.exit_codes import ExitDecision, decide_exit
from goldeval.verdict.outcome import RunOutcome
from goldeval.verdict.run_status import run_status

#: How much of the end of a run's log is read for the line that says why it ended.
_LOG_TAIL = 16_000
#: A run.json larger than this is not read for its finalisation fault (a bounded read: the
#: worker must not load an arbitrarily large file to word an error).
_RUN_JSON_MAX = 32 * 1024 * 1024


def recorded_decision(row: RunRow | None) -> ExitDecision | None:
    """The exit decision the plugin recorded on a run it finished (None: it finished none):
    a kill that came after it does not change the run's verdict."""
    if row is None or row.status not in FINISHED:
        return None
    summary = row.summary
    doc = summary.get(RUN_DOCUMENT) if isinstance(summary, dict) else None
    decision = doc.get("exitDecision") if isinstance(doc, dict) else None
    if not isinstance(decision, dict) or type(decision.get("code")) is not int:
        return None
    return ExitDecision(decision["code"], one_line(str(decision.get("reason") or "")))


def refused_green(row: RunRow | None, code: int) -> ExitDecision | None:
    """The decision that stands when a run's pytest process exited 0 but that 0 is not the
    run's verdict; None when it is (or the process did not exit 0). Either the plugin
    recorded a failing decision (a project hook changed the status past the plugin's guard,
    e.g. with ``os._exit(0)``), or it recorded no COMPLETED end at all (a conftest ended the
    process early: the run was FAILED with ``passed: true``); the verdict then decides what
    a run with nothing graded gets."""
    if code != 0:
        return None
    recorded = recorded_decision(row)
    if recorded is not None:
        return recorded if recorded.code != 0 else None
    if row is not None and row.status == "COMPLETED":
        return None  # finished by a plugin that recorded no decision (before schema 11)
    decided = decide_exit(RunOutcome.from_run(typed_run({"status": "FAILED"})))
    return ExitDecision(
        decided.code,
        "pytest exited 0 without the plugin recording the run's end (a conftest or plugin"
        f" ended the process early): {decided.reason}",
    )


def mark_killed(job: ServiceRun, queue: RunQueue, row: RunRow | None, signum: int) -> ExitDecision:
    """The verdict on a run a signal killed, recorded on its store run (INTERRUPTED,
    ``interruptedBy``) when the plugin left that run unfinished."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    resume = f"POST /api/eval/runs/{job.id}/resume"
    decision = decide_exit(RunOutcome(signal=name, rerun_command=resume))
    if row is not None and row.status not in FINISHED:
        try:
            # What was graded, as the store holds it, with how the run ended.
            rebuilt = run_document(queue.store, row.run_id)
            document = {k: v for k, v in rebuilt.items() if k != "cases"}
            document.update(
                status="INTERRUPTED",
                interruptedBy=name,
                rerunCommand=resume,
                exitDecision={"code": decision.code, "reason": decision.reason},
            )
            summary = run_summary(typed_run(document, f"run {row.run_id}"))
            summary[RUN_DOCUMENT] = document
            queue.store.finish_run(row.run_id, "INTERRUPTED", summary)
        except (StoreError, GoldevalError) as exc:
            logs.event("run not marked", logging.WARNING, run_id=job.id, error=str(exc))
    return decision


def log_tail(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - _LOG_TAIL))
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return ""


#: Lines pytest's output ends with that say why a run did not pass, most telling first: the
#: plugin's decision, its finalisation error (a full disk, a store that failed at the end), a
#: usage error, pytest's internal error.
_REASON_PREFIXES = ("goldeval decision:", "goldeval: error:", "ERROR: ", "INTERNALERROR>")


def decision_line(text: str) -> str | None:
    """The line of pytest's output that says why the run ended as it did (None: none does)."""
    lines = text.splitlines()
    for prefix in _REASON_PREFIXES:
        for line in reversed(lines):
            if line.startswith(prefix):
                return one_line(line)
    return None


def failure_text(log_path: Path, row: RunRow | None, code: int, settings: ServiceSettings) -> str:
    """The ``error`` of a run that did not pass and that the worker did not stop: never a
    silent failure. What pytest printed, else what the plugin recorded, else (the store may be
    what failed) the run folder's record of the fault, else how the process ended. Stored
    with the credentials the run inherited masked (an API answer masks what the serving
    process knows; a worker on another machine may hold others)."""
    tail = log_tail(log_path)
    return settings.masked(
        why_it_ended(tail, row, code)
        or (folder_fault(settings.runs_dir / row.run_id, code) if row else None)
        or (one_line(tail[-800:]) if row is None else "")
        or exit_text(code)
        + ("" if row is None or row.status in FINISHED else " without finishing the run")
    )


def why_it_ended(tail: str, row: RunRow | None, code: int) -> str | None:
    """Why a run's pytest process exited ``code``, from what it printed (``tail``: the end of
    its log) or what the plugin recorded; None when neither says. A decision of another code
    (the plugin decided, then a later hook or plugin failed and changed pytest's exit status)
    is named as such, never given as the reason for ``code``."""
    line = decision_line(tail)
    printed = _DECIDED.match(line or "")
    decided: tuple[int, str] | None = None
    if printed is not None:
        decided = (int(printed.group(1)), line[printed.end() :])  # type: ignore[index]
    elif line is None:
        recorded = _recorded_exit_decision(row)
        if recorded is not None:
            decided = recorded
    if decided is None:
        return line
    decided_code, reason = decided
    if decided_code == code:
        return line or reason
    return (
        f"pytest exited {code} after goldeval decided exit {decided_code} ({reason}):"
        " a hook or plugin that ran after the decision failed; see the run's log"
    )


#: The plugin's decision line: its code, then its reason.
_DECIDED = re.compile(r"^goldeval decision: exit (-?\d+) — ")


def _recorded_exit_decision(row: RunRow | None) -> tuple[int, str] | None:
    summary = row.summary if row is not None else None
    doc = summary.get(RUN_DOCUMENT) if isinstance(summary, dict) else None
    decision = doc.get("exitDecision") if isinstance(doc, dict) else None
    if not isinstance(decision, dict) or type(decision.get("code")) is not int:
        return None
    return decision["code"], one_line(str(decision.get("reason") or ""))


def unrecorded_stop(name: str, job_id: str) -> tuple[str, int, str]:
    """Status, exit code and reason of a run whose pytest process ended by ``name``
    before the plugin recorded the end (SIGKILL after the grace period, or SIGTERM before the
    session began): the run document the plugin would have written, decided by the verdict,
    its resume command the API's (the reason said "to resume it: retry it")."""
    resume = f"POST /api/eval/runs/{job_id}/resume"
    outcome = RunOutcome.from_run(
        typed_run({"status": "INTERRUPTED", "interruptedBy": name, "rerunCommand": resume}),
        signal=name,
    )
    decision = decide_exit(outcome)
    return run_status(outcome), decision.code, decision.reason


def exit_text(code: int) -> str:
    if code < 0:
        return f"pytest was killed by {signal_name(code)}"
    return f"pytest exited {code}"


def folder_fault(run_dir: Path, code: int) -> str | None:
    """The finalisation fault the plugin recorded in the run folder's run.json, when the
    store could not take it (a store down at the end leaves its run RUNNING) and the log's
    tail has no decision line. Only a fault decided with ``code`` counts: a run key's folder
    is shared, and an earlier session's record must not explain this one's exit."""
    doc = _run_json(run_dir)
    fault = doc.get(FAULT_KEY) if doc is not None else None
    decision = doc.get("exitDecision") if doc is not None else None
    if not isinstance(fault, dict) or not isinstance(decision, dict):
        return None
    reason = fault.get("reason")
    if decision.get("code") != code or not isinstance(reason, str) or not reason:
        return None
    return one_line(reason)


def _run_json(run_dir: Path) -> dict[str, Any] | None:
    """The run folder's run.json as written by the plugin (None: absent, a symlink, too large
    or not a JSON object)."""
    path = run_dir / "run.json"
    try:
        if path.is_symlink() or path.stat().st_size > _RUN_JSON_MAX:
            return None
        doc = loads_json(path.read_text(encoding="utf-8"), what="run.json")
    except (OSError, ValueError, LimitExceeded):  # a conftest may rewrite run.json
        return None
    return doc if isinstance(doc, dict) else None


def folder_record(run_dir: Path, store_run_id: str, exit_code: int | None) -> dict[str, Any] | None:
    """The plugin's whole record of a run whose store record never got its end (the store
    failed during the run: attempts missing, no verdict): the run folder's run.json, when it
    is this run's and its verdict is the one its last pytest process exited with (a run key's
    folder is shared: an earlier session's record must not stand for this one).
    ``goldeval compare`` and ``goldeval gate`` decide from that file, so the service's
    surfaces decide from it too."""
    doc = _run_json(run_dir)
    decision = doc.get("exitDecision") if doc is not None else None
    if doc is None or doc.get("runId") != store_run_id or not isinstance(decision, dict):
        return None
    return doc if exit_code is not None and decision.get("code") == exit_code else None


#: The prefix of the plugin's decision line (``goldeval decision: exit 65 — <reason>``).
DECISION_LINE = re.compile(r"^goldeval decision: exit -?\d+ — ")


def ended_decision(row: RunRow | None, code: int, error: str | None) -> ExitDecision:
    """The exit decision of a run's last pytest process, recorded on the queue row when the
    worker ends the run: the one the plugin recorded in the store, unless that process ended
    with another code (a refused resume exits 65 while the store still holds the earlier
    session's 75; a failed finalisation recorded none). Then the decision that process printed
    (its decision line, kept in ``error``), else how it ended. Its code is always ``code``."""
    summary = row.summary if row is not None else None
    doc = summary.get(RUN_DOCUMENT) if isinstance(summary, dict) else None
    recorded = doc.get("exitDecision") if isinstance(doc, dict) else None
    if isinstance(recorded, dict) and recorded.get("code") == code:
        return ExitDecision(code, one_line(str(recorded.get("reason") or "")))
    return ExitDecision(code, DECISION_LINE.sub("", error or "") or exit_text(code))


def signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def final_status(row: RunRow | None, reason: str) -> str:
    """The service's status of a run whose pytest process ended: the one the plugin recorded
    (a run it never began, or left unfinished, is FAILED; stopped by the worker before the
    plugin recorded its end: decided by ``unrecorded_stop``)."""
    if row is None or row.status not in FINISHED:
        return "FAILED"
    return str(row.status)
