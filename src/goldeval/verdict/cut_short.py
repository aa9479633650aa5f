"""A saved run that did not run every selected attempt, as the run document itself says.

pytest's controller decides a cut-short session when it ends (``stoppedEarly`` for ``-x`` /
``--maxfail`` / ``--sw``, ``duplicateAttempts`` for a rerun plugin, status ``INTERRUPTED`` for
a signal or a store fault) and records it in run.json. ``goldeval gate`` / ``compare`` read
those fields back here instead of re-deriving the story from the attempts: a run stopped by
``-x`` has fewer cases than the baseline, and comparing it would report a "selection mismatch"
the user never made.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from goldeval.verdict.exit_codes import (
    COMPARISON_INVALID,
    GATE_FAILED,
    INFRA,
    INTERRUPTED,
    OK,
    USAGE,
    ExitDecision,
)

#: Codes of the table a cut-short run replaces: a pass, a gate failure or a comparison made
#: invalid by the attempts that never ran say nothing about it. 4 and 75 (configuration,
#: infrastructure) are more telling and stay, as in pytest.
_REPLACED = (OK, GATE_FAILED, COMPARISON_INVALID)


@dataclass(frozen=True)
class CutShort:
    """Why a run is not a whole run: its status and one line saying what happened."""

    status: str
    reason: str
    code: int


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _recorded(run: Mapping[str, Any]) -> tuple[int | None, str | None]:
    decision = run.get("exitDecision")
    if not isinstance(decision, Mapping):
        return None, None
    reason = decision.get("reason")
    return _count(decision.get("code")), reason if isinstance(reason, str) and reason else None


def _duplicates(run: Mapping[str, Any]) -> CutShort | None:
    duplicates = run.get("duplicateAttempts")
    if not isinstance(duplicates, list) or not duplicates:
        return None
    shown = ", ".join(str(d) for d in duplicates[:3]) + (" ..." if len(duplicates) > 3 else "")
    return CutShort(
        "INCOMPLETE",
        f"{len(duplicates)} golden attempts reported twice ({shown}): a rerun or repeat plugin "
        "ran them again; use --golden-attempts",
        USAGE,
    )


def _stopped_early(run: Mapping[str, Any]) -> CutShort | None:
    stopped = run.get("stoppedEarly")
    if not isinstance(stopped, Mapping):
        return None
    why = stopped.get("reason")
    why = why if isinstance(why, str) and why else "the session stopped early"
    not_run = _count(stopped.get("attemptsNotRun"))
    never = f"{not_run} selected attempts never ran" if not_run else "not every attempt ran"
    return CutShort(
        "INCOMPLETE", f"stopped early ({why}): {never}; the run is INCOMPLETE", GATE_FAILED
    )


def _interrupted(run: Mapping[str, Any]) -> CutShort | None:
    if run.get("status") != "INTERRUPTED":
        return None
    code, reason = _recorded(run)
    if code in (INTERRUPTED, INFRA) and reason is not None:
        # What the session said when it ended (the signal, the resume command): kept.
        return CutShort("INTERRUPTED", reason, code)
    return CutShort(
        "INTERRUPTED",
        "the run is INTERRUPTED: not every selected attempt was graded; retry it",
        INFRA,
    )


def cut_short(run: Mapping[str, Any]) -> CutShort | None:
    """The run's own account of why it is not whole, else None (a COMPLETED run, or one
    whose deadline or budget left attempts unstarted: the gate's ``complete`` rule says so)."""
    for reading in (_duplicates, _stopped_early, _interrupted):
        found = reading(run)
        if found is not None:
            return found
    return None


def decide_cut_short(cut: CutShort, decision: ExitDecision) -> ExitDecision:
    """The exit decision of a cut-short run: never 0, and never a comparison's verdict on a
    selection the run did not finish (see :data:`_REPLACED`); a rerun plugin's run is a usage
    error whatever the table said."""
    if cut.code == USAGE or decision.code in _REPLACED:
        return ExitDecision(cut.code, cut.reason)
    return decision
