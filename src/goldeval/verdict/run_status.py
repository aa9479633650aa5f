"""The status a finished run is recorded with, from its :class:`RunOutcome`: one function for
the run document (run.json, summary.json, the terminal), the store and the service's API.

Issue 31: a run cut short is named the same everywhere. ``-x``/``--maxfail``, a plugin's stop,
the run deadline, the token/cost budget and golden attempts reported twice leave the run
INCOMPLETE (what ran was graded; the rest never started); a signal (SIGTERM, Ctrl-C) or a store
that failed under the run leave it INTERRUPTED (resume it by its run key). Otherwise COMPLETED.
Whether the run passed is not a status: that is :func:`~goldeval.verdict.exit_codes.decide_exit`.
"""

from __future__ import annotations

from typing import Literal

from goldeval.verdict.exit_codes import INTERRUPTED
from goldeval.verdict.outcome import RunOutcome

FinishedStatus = Literal["COMPLETED", "INCOMPLETE", "INTERRUPTED"]


def run_status(outcome: RunOutcome) -> FinishedStatus:
    """COMPLETED, INCOMPLETE or INTERRUPTED: how much of the selected run ``outcome`` ran."""
    if (
        outcome.signal
        or outcome.store_error
        or outcome.recorded_interrupted
        or outcome.pytest_status == INTERRUPTED  # Ctrl-C with no signal recorded
    ):
        return "INTERRUPTED"
    if outcome.incomplete or outcome.duplicates:
        return "INCOMPLETE"
    return "COMPLETED"
