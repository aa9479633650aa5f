"""The status a finished run is recorded with, from its :class:`RunOutcome`: one function for
the run document (run.json, summary.json, the terminal), the store and the service's API.

Issue 31: a run cut short is named the same everywhere. ``-x``/``--maxfail``, a plugin's stop,
the run deadline, the token/cost budget and golden attempts reported twice leave the run
INCOMPLETE (what ran was graded; the rest never started); a signal (SIGTERM, Ctrl-C) or a store
that failed under the run leave it INTERRUPTED (resume it by its run key). Otherwise COMPLETED.
Whether the run passed is not a status: that is :func:`~goldeval.verdict.exit_codes.decide_exit`.

A run whose attempts errored is no exception: it ran everything it selected, so it is COMPLETED
in run.json, summary.json, the store and the service alike (issue 31: the store said FAILED so
the service could resume it). That it should be retried is its verdict, exit 75, and
:func:`resumable` asks the verdict, not the status.
"""

from __future__ import annotations

from typing import Literal

from goldeval.verdict.exit_codes import INFRA, INTERRUPTED
from goldeval.verdict.outcome import RunOutcome

FinishedStatus = Literal["COMPLETED", "INCOMPLETE", "INTERRUPTED"]


def run_status(outcome: RunOutcome) -> FinishedStatus:
    """COMPLETED, INCOMPLETE or INTERRUPTED: how much of the selected run ``outcome`` ran."""
    if (
        outcome.signal
        or outcome.store_error
        or outcome.recorded_interrupted
        or outcome.recorded_running
        or outcome.pytest_status == INTERRUPTED  # Ctrl-C with no signal recorded
    ):
        return "INTERRUPTED"
    if outcome.incomplete or outcome.duplicates:
        return "INCOMPLETE"
    return "COMPLETED"


#: Finished statuses of a run that did not run everything it selected (INCOMPLETE,
#: INTERRUPTED) or whose end was never recorded (FAILED: the plugin never began or could not
#: finish it): resuming it by its run key runs the rest.
UNFINISHED: tuple[str, ...] = ("INCOMPLETE", "INTERRUPTED", "FAILED")


def resumable(status: str, exit_code: int | None) -> bool:
    """Whether resuming a finished run by its run key can change its verdict: its exit decision
    is 75 (retry: the rerun retries its retryable ERROR attempts, whatever its status), or it
    is :data:`UNFINISHED`. A COMPLETED run decided 0, 1, 4 or 65 would end the same way."""
    return exit_code == INFRA or status in UNFINISHED
