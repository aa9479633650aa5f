"""What happened in a run, typed: the one input of :func:`goldeval.verdict.exit_codes.decide_exit`.

Every surface that shows a verdict (pytest's exit status, ``goldeval gate``/``compare``, the
service's API and run page, the site) builds a :class:`RunOutcome` and asks ``decide_exit``;
none computes a code or a label itself (issue 31). A run document carries the session facts
this needs (``stoppedEarly``, ``duplicateAttempts``, ``interruptedBy``, ``storeError``, ...),
so a saved run regated later gets the same code and reason as the session that wrote it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from goldeval.core.errors import is_retryable
from goldeval.results.documents import RunDocument
from goldeval.verdict.comparison import AttemptCounts, ComparisonResult, attempt_counts, cases_total
from goldeval.verdict.exit_codes import RUNNING_REASON
from goldeval.verdict.gate import GateResult
from goldeval.verdict.variants import VariantGateResult, decide_variants


@dataclass(frozen=True)
class StoppedEarly:
    """The run loop stopped before every selected item ran (``-x``, ``--maxfail``, a plugin)."""

    reason: str
    attempts_not_run: int
    #: Selected cases with no graded attempt (a run key's resume must grade them).
    cases_not_run: tuple[str, ...] = ()

    def describe(self) -> str:
        """The one line every surface shows for an early stop."""
        return (
            f"stopped early ({self.reason}): {self.attempts_not_run} selected attempts never "
            "ran; the run is INCOMPLETE"
        )


@dataclass(frozen=True)
class FinalisationFault:
    """Writing the finished run failed (a full disk, a store failing at the end)."""

    reason: str
    #: An artifact path goldeval refuses to write through (a link out of the project): the
    #: user must fix the path, a retry cannot help.
    path_refused: bool = False


@dataclass(frozen=True)
class RunOutcome:
    """Everything the exit decision weighs, and nothing else."""

    #: pytest's own exit status, after a stop that was not Ctrl-C (``-x`` under xdist) was
    #: turned back into what pytest would have said without it (1 with failures, else 0).
    pytest_status: int = 0
    cases_total: int = 0
    attempts: AttemptCounts = field(default_factory=lambda: AttemptCounts(0, 0, 0, 0, 0))
    #: Cases whose status is ERROR, and whether any case reached PASS/FAIL.
    cases_error: int = 0
    cases_graded: int = 0
    #: ERROR attempts of kinds no retry can fix, with their counts.
    non_retryable: Mapping[str, int] = field(default_factory=dict)
    comparison: ComparisonResult | None = None
    gate: GateResult | None = None
    #: ``--golden-no-gate`` / ``--no-gate``: an incomparable baseline is reported, not fatal.
    gate_enabled: bool = True
    #: The comparison is what was asked for (``goldeval compare``, the compare endpoint): an
    #: incomparable pair is 65 with or without a gate, never a report that exits 0.
    comparison_asked: bool = False
    #: A baseline capture run (not gated; FAILs are recorded as they are).
    capture: bool = False
    #: A test that is not a golden item failed: no gate may turn it into a pass.
    other_failures: bool = False
    stopped_early: StoppedEarly | None = None
    #: The signal that ended the run (``SIGTERM``); None when none did.
    signal: str | None = None
    #: Golden attempts reported twice (a rerun or repeat plugin), as "case attempt N".
    duplicates: tuple[str, ...] = ()
    #: Another process recorded the run key under another protocol.
    store_conflict: str | None = None
    #: The store failed while the run was recorded (what was graded is kept in the folder).
    store_error: str | None = None
    finalisation: FinalisationFault | None = None
    #: Selected attempts never started: the run deadline passed, or the token/cost budget.
    not_started_deadline: int = 0
    not_started_budget: int = 0
    #: Saving the requested baseline failed after the run.
    baseline_not_saved: str | None = None
    #: A resumed run key with nothing left to run: pytest's "no tests" is not the verdict.
    resumed_all: bool = False
    #: The command that retries the run (named by the 75 reason), e.g. with its run key.
    rerun_command: str | None = None
    #: The run document says INTERRUPTED (a saved run whose cause is not recorded).
    recorded_interrupted: bool = False
    #: The run document says RUNNING: the store run of a session that never recorded its end
    #: (killed with SIGKILL, a CI job's timeout, or still running). Never a whole run.
    recorded_running: bool = False
    #: The run document's ``status`` as recorded (None: a reference-format document).
    recorded_status: str | None = None
    #: What the capture line says (``10 cases, 2 FAIL (...)``), for capture runs.
    capture_summary: str | None = None
    #: The decision on two variants of the session (``gate.compare``, issue 35).
    variants: VariantGateResult | None = None

    @property
    def gated(self) -> bool:
        """A gate, a capture or a variant comparison weighs the failed golden items instead
        of pytest's 1."""
        return (
            self.gate is not None
            or self.capture
            or (self.variants is not None and self.gate_enabled)
        )

    @property
    def incomplete(self) -> bool:
        return bool(
            self.stopped_early
            or self.signal
            or self.not_started_deadline
            or self.not_started_budget
        )

    @classmethod
    def from_run(
        cls,
        run: RunDocument,
        comparison: ComparisonResult | None = None,
        gate: GateResult | None = None,
        **facts: Any,
    ) -> RunOutcome:
        """The outcome of a run document (run.json shape), plus session facts as keywords.

        Facts the document records itself (``stoppedEarly``, ``duplicateAttempts``,
        ``interruptedBy``, ``storeError``, ``finalisationFault``, ``notStartedBeforeDeadline``,
        ...) are read from it;
        a keyword given here wins.
        """
        statuses = [case.status for case in run.cases]
        recorded: dict[str, Any] = {
            "cases_total": cases_total(run),
            "attempts": attempt_counts(run),
            "cases_error": statuses.count("ERROR"),
            "cases_graded": sum(1 for s in statuses if s in ("PASS", "FAIL")),
            "non_retryable": dict(_non_retryable(run)),
            "comparison": comparison,
            "gate": gate,
            "not_started_deadline": run.not_started_before_deadline or 0,
            "not_started_budget": run.not_started_over_budget or 0,
            "recorded_interrupted": run.status == "INTERRUPTED",
            "recorded_running": run.status == "RUNNING",
            "recorded_status": run.status,
        }
        stopped = run.stopped_early
        if stopped is not None:
            recorded["stopped_early"] = StoppedEarly(
                stopped.reason or "stopped early",
                stopped.attempts_not_run or 0,
                tuple(stopped.cases_not_run or ()),
            )
        fault = run.finalisation_fault
        if fault is not None:
            # Finishing the run failed (recorded by goldeval.results.finalise): the saved run
            # is gated as the session exited, not as its attempts alone would be.
            recorded["finalisation"] = FinalisationFault(
                fault.reason, path_refused=fault.path_refused
            )
        if run.duplicate_attempts:
            recorded["duplicates"] = tuple(run.duplicate_attempts)
        for value, name in (
            (run.interrupted_by, "signal"),
            (run.store_error, "store_error"),
            (run.store_conflict, "store_conflict"),
            (run.rerun_command, "rerun_command"),
        ):
            if value:
                recorded[name] = value
        pair = run.variant_comparison
        if pair is not None and run.variant in (None, pair.control, pair.candidate):
            # Decided again from the figures: a stored label is never trusted as it is. A
            # variant outside the pair carries the comparison for its reports only: no gate
            # weighs its FAIL attempts (they stay failed tests).
            recorded["variants"] = decide_variants(pair)
        if run.pytest_status in _SESSION_STATUSES or (run.pytest_status == 5 and not run.cases):
            # 5 only for a run that holds no case: a run key's session that found every
            # attempt graded earlier exits 5 too, but its document holds them (decided by them)
            recorded["pytest_status"] = run.pytest_status  # a keyword fact still wins
        recorded.update(facts)
        return cls(**recorded)

    def with_(self, **changes: Any) -> RunOutcome:
        """A copy with ``changes`` (facts learnt later, e.g. a finalisation fault)."""
        return replace(self, **changes)


#: pytest statuses a finished session records (``pytestStatus``): OK, failures, Ctrl-C.
_SESSION_STATUSES = (0, 1, 2)


def _non_retryable(run: RunDocument) -> Counter[str]:
    """Kinds of the ERROR attempts that a retry cannot fix, with their counts."""
    kinds: Counter[str] = Counter()
    for case in run.cases:
        for attempt in case.attempts:
            kind = attempt.error_kind
            if attempt.status == "ERROR" and kind is not None and not is_retryable(kind):
                kinds[kind] += 1
    return kinds


@dataclass(frozen=True)
class CutShort:
    """Why a saved run is not a whole run, for display: its status and one line."""

    status: str
    reason: str


def cut_short(run: RunDocument, outcome: RunOutcome) -> CutShort | None:
    """The run's own account of why it is not whole (a rerun plugin, ``-x``, a signal, the
    store), else None. Display only: the code is :func:`decide_exit`'s."""
    status = run.status or "INCOMPLETE"
    if outcome.duplicates:
        return CutShort(status, f"{len(outcome.duplicates)} golden attempts reported twice")
    if outcome.stopped_early is not None:
        stop = outcome.stopped_early
        return CutShort(status, stop.describe())
    if outcome.signal:
        return CutShort(status, f"terminated by {outcome.signal}: the run is INTERRUPTED")
    if outcome.store_error:
        return CutShort(status, outcome.store_error)
    if run.status == "INTERRUPTED":
        return CutShort(status, "the run is INTERRUPTED: not every selected attempt was graded")
    if run.status == "RUNNING":
        return CutShort(status, RUNNING_REASON)
    return None
