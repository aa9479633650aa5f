"""The verdict on a service run whose pytest process a signal killed (SIGKILL after the grace
period, the OOM killer): the plugin recorded nothing, so the one verdict decides from the
signal (75, "terminated by SIGKILL", the resume request), and the store's run says so, so the
API, the compare endpoint and the run page all decide from the same fact (issue 31).
"""

from __future__ import annotations

import logging
import signal

from goldeval.core.errors import GoldevalError
from goldeval.core.textsafe import one_line
from goldeval.results.run_document import RUN_DOCUMENT
from goldeval.results.run_folder import summary as run_summary
from goldeval.server import logs
from goldeval.store import StoreError
from goldeval.store.base import RunRow
from goldeval.store.queue import FINISHED, RunQueue, ServiceRun
from goldeval.store.views import run_document
from goldeval.verdict.exit_codes import ExitDecision, decide_exit
from goldeval.verdict.outcome import RunOutcome


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
            summary = run_summary(document)
            summary[RUN_DOCUMENT] = document
            queue.store.finish_run(row.run_id, "INTERRUPTED", summary)
        except (StoreError, GoldevalError) as exc:
            logs.event("run not marked", logging.WARNING, run_id=job.id, error=str(exc))
    return decision
