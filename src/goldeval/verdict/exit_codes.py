"""The session's exit status, decided once from a :class:`~goldeval.verdict.outcome.RunOutcome`.

pytest's own codes are reused where they mean the same thing; the two codes pytest has no word
for come from BSD ``sysexits.h``: 65 (EX_DATAERR: the baseline is not comparable) and 75
(EX_TEMPFAIL: infrastructure errors, retry the run). The reference's codes map as
0→0, 1 (usage)→4, 2 (gate failed)→1, 3 (infrastructure)→75, 4 (comparison invalid)→65.

:func:`decide_exit` applies the first matching rule of :data:`RULES`, the one precedence table
of the project: pytest, every ``goldeval`` command, the service and its run page all ask it,
and docs/methodology.md's table is generated from it (:func:`markdown_table`). This module and
the rest of ``goldeval.verdict`` are the only places an exit code is written as a number
(tests/unit/test_exit_policy.py).

75/4*: when an ERROR attempt has a kind that no retry can fix (``CONTEXT_LENGTH``,
``MODEL_NOT_FOUND``, ``NOT_FOUND``, ``BAD_REQUEST``, ``AUTH_FAILED``, ``CONFIG_ERROR``,
``GRADER_TIMEOUT``, ...: :data:`goldeval.core.errors.NON_RETRYABLE_KINDS`), those rules give 4,
"configuration error: retrying will not help", instead of 75: 75 tells a CI job to run again,
and an identical rerun would end the same way.

With a gate (or a baseline capture) pytest's status 1 counts only when a test that is not a
golden attempt failed: the gate weighs the failed golden items, so a run whose gate passes
exits 0; the user's own failing tests still give 1.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from goldeval.core.errors import RERUN_HINT, ExitKind, GoldevalError
from goldeval.verdict.comparison import Decision
from goldeval.verdict.variants import VariantDecision

if TYPE_CHECKING:
    from goldeval.verdict.comparison_result import ComparisonResult
    from goldeval.verdict.outcome import RunOutcome

OK = 0
#: pytest's TESTS_FAILED, reused on purpose: a failed gate is a failed test run.
GATE_FAILED = 1
#: pytest's INTERRUPTED and INTERNAL_ERROR, passed through.
INTERRUPTED = 2
INTERNAL_ERROR = 3
#: pytest's USAGE_ERROR: a user mistake (an option, a file, a command's arguments).
USAGE = 4
#: pytest's NO_TESTS_COLLECTED.
NO_TESTS = 5
#: sysexits EX_DATAERR: baseline and run are not comparable.
COMPARISON_INVALID = 65
#: sysexits EX_TEMPFAIL: infrastructure failure, retry.
INFRA = 75
#: ERROR attempts that no retry can fix: pytest's USAGE_ERROR, "change the configuration".
CONFIG_ERROR = USAGE

_PYTEST_KEPT = {
    INTERRUPTED: "pytest was interrupted",
    INTERNAL_ERROR: "pytest internal error",
    USAGE: "pytest usage error",
}


class ExitDecision(NamedTuple):
    code: int
    reason: str


@dataclass(frozen=True)
class Rule:
    """One row of the precedence table: a condition and what it gives."""

    condition: str
    gives: str
    decide: Callable[[RunOutcome], ExitDecision | None]


#: Why a RUNNING run document is not a whole run (the verdict's reason and the display's).
RUNNING_REASON = (
    "the run's session never recorded its end (the store run is RUNNING: it was killed, or"
    " is still running): not every selected attempt was graded"
)


def _infra(outcome: RunOutcome, reason: str) -> ExitDecision:
    """Exit 75 for ``reason``, or 4 when some ERROR is of a kind a retry cannot fix."""
    fixed = outcome.non_retryable
    if not fixed:
        again = f" ({outcome.rerun_command})" if outcome.rerun_command else ""
        return ExitDecision(INFRA, reason + again)
    kinds = ", ".join(f"{kind} ({n})" for kind, n in sorted(fixed.items()))
    return ExitDecision(
        CONFIG_ERROR,
        f"configuration error: {sum(fixed.values())} attempts ERROR with {kinds}; retrying "
        "will not help, change the model, configuration or rows",
    )


def _duplicates(o: RunOutcome) -> ExitDecision | None:
    if not o.duplicates:
        return None
    shown = ", ".join(o.duplicates[:3]) + (" ..." if len(o.duplicates) > 3 else "")
    return ExitDecision(
        USAGE,
        f"{len(o.duplicates)} golden attempts reported twice ({shown}): a rerun or repeat "
        f"plugin ran them again; {RERUN_HINT}",
    )


def _store_conflict(o: RunOutcome) -> ExitDecision | None:
    return ExitDecision(COMPARISON_INVALID, o.store_conflict) if o.store_conflict else None


def _signal(o: RunOutcome) -> ExitDecision | None:
    if not o.signal:
        return None
    again = o.rerun_command or "retry it"
    return ExitDecision(
        INFRA, f"terminated by {o.signal}: the run is INTERRUPTED; to resume it: {again}"
    )


def _pytest_kept(o: RunOutcome) -> ExitDecision | None:
    if o.pytest_status in _PYTEST_KEPT:
        status = o.pytest_status
        return ExitDecision(status, f"{_PYTEST_KEPT[status]} (exit {status})")
    return None


def _no_tests_kept(o: RunOutcome) -> ExitDecision | None:
    if o.pytest_status == NO_TESTS and not o.resumed_all:
        return ExitDecision(NO_TESTS, "pytest exit status 5 kept (NO_TESTS_COLLECTED)")
    return None


def _finalisation(o: RunOutcome) -> ExitDecision | None:
    fault = o.finalisation
    if fault is None:
        return None
    return ExitDecision(USAGE if fault.path_refused else INFRA, fault.reason)


def _comparison_invalid(o: RunOutcome) -> ExitDecision | None:
    cmp = o.comparison
    if not o.gate_enabled or cmp is None or cmp.decision is not Decision.COMPARISON_INVALID:
        return None
    if o.stopped_early is not None or o.recorded_running:
        # A shorter selection says nothing more than "stopped early" or "never finished".
        return None
    return ExitDecision(COMPARISON_INVALID, f"comparison invalid: {_first_reason(cmp)}")


def _first_reason(cmp: ComparisonResult) -> str:
    """An invalid comparison's first reason, and how many more there are."""
    reasons = cmp.invalid_reasons or ["baseline not comparable"]
    return reasons[0] + (f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else "")


def _asked_comparison_invalid(o: RunOutcome) -> ExitDecision | None:
    """``goldeval compare --no-gate``: the comparison is the product; an incomparable pair is
    no report that passes (``--golden-no-gate`` sessions report it and go on)."""
    cmp = o.comparison
    if not o.comparison_asked or cmp is None or cmp.decision is not Decision.COMPARISON_INVALID:
        return None
    return ExitDecision(COMPARISON_INVALID, f"comparison invalid (not gated): {_first_reason(cmp)}")


def _store_error(o: RunOutcome) -> ExitDecision | None:
    if not o.store_error:
        return None
    return ExitDecision(INFRA, f"{o.store_error}; the run is INCOMPLETE in the store, retry it")


def _recorded_interrupted(o: RunOutcome) -> ExitDecision | None:
    if not o.recorded_interrupted:
        return None
    return _infra(o, "the run is INTERRUPTED: not every selected attempt was graded; retry it")


#: Statuses a whole run may record, or whose cause another rule weighs: any other one
#: (QUEUED, FAILED without its fault, INCOMPLETE without its stop; a word goldeval never
#: writes) is a run whose session recorded no whole end. None: a reference-format document.
_STATUS_EXPLAINED = (None, "COMPLETED", "INTERRUPTED")


#: Statuses goldeval writes that say a run did not end whole.
_UNFINISHED = ("RUNNING", "QUEUED", "FAILED", "INCOMPLETE")


def _recorded_running(o: RunOutcome) -> ExitDecision | None:
    if o.recorded_running:
        return _infra(o, f"{RUNNING_REASON}; resume it by its run key")
    if o.recorded_status in _STATUS_EXPLAINED or o.incomplete:
        return None
    # (a word goldeval never writes is refused when the document is read: RunStatusWord)
    if o.recorded_status not in _UNFINISHED or not o.attempts.total:
        return None  # nothing graded: the rules below say so (exit 1)
    return _infra(
        o,
        f"the run document says {o.recorded_status!r} and records no cause: its session "
        "recorded no whole end, so not every selected attempt was graded; resume it by its "
        "run key or run it again",
    )


def _nothing_selected(o: RunOutcome) -> ExitDecision | None:
    if o.cases_total == 0:
        return ExitDecision(GATE_FAILED, "nothing was graded: no golden case selected")
    return None


def _all_skipped(o: RunOutcome) -> ExitDecision | None:
    a = o.attempts
    if a.quality == 0 and a.error == 0:
        return ExitDecision(GATE_FAILED, f"nothing was graded: all {a.total} attempts skipped")
    return None


def _all_error(o: RunOutcome) -> ExitDecision | None:
    a = o.attempts
    if a.quality == 0 and a.error > 0:
        return _infra(
            o, f"infrastructure failure: all {a.error} attempts ERROR, no quality verdict"
        )
    return None


def _no_case_graded(o: RunOutcome) -> ExitDecision | None:
    if o.cases_error and not o.cases_graded:
        return _infra(
            o,
            f"infrastructure failure: {o.cases_error} cases ERROR and no case reached PASS/FAIL",
        )
    return None


def _stopped_early(o: RunOutcome) -> ExitDecision | None:
    stop = o.stopped_early
    if stop is None or o.attempts.error:
        return None
    return ExitDecision(GATE_FAILED, stop.describe())


def _gate_failed(o: RunOutcome) -> ExitDecision | None:
    if o.gate is not None and not o.gate.passed:
        return ExitDecision(GATE_FAILED, o.gate.summary_line())
    cmp = o.comparison
    if o.gate_enabled and cmp is not None and cmp.decision is Decision.REGRESSION:
        return ExitDecision(GATE_FAILED, "regression against the baseline")
    return None


def _variants_inferior(o: RunOutcome) -> ExitDecision | None:
    v = o.variants
    if not o.gate_enabled or v is None or v.decision is not VariantDecision.INFERIOR:
        return None
    return ExitDecision(GATE_FAILED, v.reason)


def _variants_inconclusive(o: RunOutcome) -> ExitDecision | None:
    v = o.variants
    if not o.gate_enabled or v is None or v.decision is not VariantDecision.INCONCLUSIVE:
        return None
    return ExitDecision(GATE_FAILED, v.reason)


def _any_error(o: RunOutcome) -> ExitDecision | None:
    a = o.attempts
    if a.error == 0:
        return None
    return _infra(
        o,
        f"infrastructure errors: {a.error} of {a.total} attempts ERROR; the run is not a "
        "quality verdict, retry it",
    )


def _test_failures(o: RunOutcome) -> ExitDecision | None:
    # The FAIL attempts decide, whatever pytest's status: a conftest that marks golden items
    # xfail makes pytest exit 0 with a FAIL attempt (or an edited ``pytestStatus``).
    if not o.gated and o.attempts.failed and not o.other_failures:
        return ExitDecision(
            GATE_FAILED, f"{o.attempts.failed} FAIL attempt(s) and no gate to weigh them"
        )
    if not o.gated and o.attempts.failed:
        return ExitDecision(GATE_FAILED, "test failures")
    if o.pytest_status != GATE_FAILED or (o.gated and not o.other_failures):
        return None
    return ExitDecision(GATE_FAILED, "test failures")


def _pytest_other(o: RunOutcome) -> ExitDecision | None:
    if o.pytest_status in (OK, GATE_FAILED, NO_TESTS):
        return None
    return ExitDecision(o.pytest_status, f"pytest exit status {o.pytest_status}")


def _not_started(o: RunOutcome) -> ExitDecision | None:
    parts = []
    if o.not_started_deadline:
        parts.append(f"{o.not_started_deadline} not started before the run deadline")
    if o.not_started_budget:
        parts.append(f"{o.not_started_budget} not started over the token/cost budget")
    if not parts:
        return None
    return ExitDecision(GATE_FAILED, f"run INCOMPLETE: selected attempts {'; '.join(parts)}")


def _skipped(o: RunOutcome) -> ExitDecision | None:
    skipped = o.attempts.skipped
    if not skipped:
        return None
    return ExitDecision(
        GATE_FAILED,
        f"{skipped} of {o.attempts.total} selected attempts SKIPPED (pytest.skip in a fixture, "
        "the provider, the retriever or a grader): not graded, so not a pass; deselect rows "
        "with -m/-k instead of skipping them",
    )


def _baseline_not_saved(o: RunOutcome) -> ExitDecision | None:
    if o.baseline_not_saved:
        return ExitDecision(GATE_FAILED, f"baseline not saved: {o.baseline_not_saved}")
    return None


def _passed(o: RunOutcome) -> ExitDecision | None:
    if o.capture:
        return ExitDecision(
            OK, "baseline capture (not gated): " + (o.capture_summary or "no FAIL recorded")
        )
    if o.gate is not None:
        return ExitDecision(OK, o.gate.summary_line())
    if o.variants is not None and o.gate_enabled:
        return ExitDecision(OK, o.variants.reason)
    return ExitDecision(OK, "every graded attempt ok (no gate)")


#: The precedence table: the first rule that matches decides. "75/4*": see the module doc.
RULES: tuple[Rule, ...] = (
    Rule("a golden attempt was reported twice (a rerun or repeat plugin)", "4", _duplicates),
    Rule("another process recorded the run key under another protocol", "65", _store_conflict),
    Rule("the run was terminated by a signal (SIGTERM, SIGINT): INTERRUPTED", "75", _signal),
    Rule(
        "pytest exited INTERRUPTED (2), INTERNAL_ERROR (3) or USAGE_ERROR (4): kept as it is",
        "2/3/4",
        _pytest_kept,
    ),
    Rule(
        "finishing the run failed (a full disk, the store at the end); 4 for an artifact path "
        "goldeval refuses to write through",
        "75/4",
        _finalisation,
    ),
    Rule(
        "pytest exited 5 (no tests collected or all deselected), unless the run key itself "
        "left every selected attempt out as graded by an earlier session (a `-k`, `-m` or "
        "node id selecting nothing keeps 5): kept",
        "5",
        _no_tests_kept,
    ),
    Rule(
        "the baseline comparison is COMPARISON_INVALID (unless the run stopped early or never "
        "recorded its end)",
        "65",
        _comparison_invalid,
    ),
    Rule("the store failed while the run was recorded", "75", _store_error),
    Rule(
        "the run document says INTERRUPTED and no cause above is recorded",
        "75",
        _recorded_interrupted,
    ),
    Rule(
        "the run document says RUNNING: its session never recorded an end (killed, a CI "
        "job's timeout, or still running); or QUEUED, FAILED or INCOMPLETE with attempts and "
        "no cause above or stop recorded",
        "75",
        _recorded_running,
    ),
    Rule("nothing was graded: no golden case selected", "1", _nothing_selected),
    Rule(
        "nothing was graded: no PASS/FAIL attempt and no ERROR attempt (everything skipped)",
        "1",
        _all_skipped,
    ),
    Rule("every attempt ERROR (no PASS/FAIL attempt, at least one ERROR)", "75/4*", _all_error),
    Rule(
        "no case reached PASS/FAIL and some case is ERROR (reference rule)",
        "75/4*",
        _no_case_graded,
    ),
    Rule(
        "stopped early (-x, --maxfail, a plugin's stop) and no attempt ERROR: INCOMPLETE",
        "1",
        _stopped_early,
    ),
    Rule("the quality gate failed (or the comparison says REGRESSION)", "1", _gate_failed),
    Rule("any attempt ERROR: the run is not a quality verdict, retry it", "75/4*", _any_error),
    Rule(
        "FAIL attempts with no gate to weigh them (whatever pytest's status: an xfail marker "
        "does not hide them), or pytest exited 1: a test that is not a golden attempt failed",
        "1",
        _test_failures,
    ),
    Rule("pytest exited with another non-zero status", "kept", _pytest_other),
    Rule(
        "selected attempts were not started (the run deadline, the token/cost budget): INCOMPLETE",
        "1",
        _not_started,
    ),
    Rule(
        "some selected attempts were SKIPPED (not graded; SKIPPED is never a pass)",
        "1",
        _skipped,
    ),
    Rule("the requested baseline could not be saved", "1", _baseline_not_saved),
    # The variant rules come last: the paired comparison is a verdict only on a whole run
    # (no ERROR, no SKIPPED, nothing left unstarted); earlier rules decide any other run.
    Rule(
        "the variant comparison (gate.compare) says INFERIOR: the candidate is worse than the "
        "control by more than the margin",
        "1",
        _variants_inferior,
    ),
    Rule(
        "the variant comparison (gate.compare) is INCONCLUSIVE: underpowered, never a pass",
        "1",
        _variants_inconclusive,
    ),
    Rule(
        "ungated, nothing above decided, and the comparison asked for (`goldeval compare` or "
        "the compare endpoint with `--no-gate`) is COMPARISON_INVALID: never a pass",
        "65",
        _asked_comparison_invalid,
    ),
    Rule(
        "otherwise: every selected attempt graded, the gate (or the variant comparison) passed",
        "0",
        _passed,
    ),
)


def decide_exit(outcome: RunOutcome) -> ExitDecision:
    """The exit code and a one-line human reason: the first rule of :data:`RULES` that matches."""
    for rule in RULES:
        decision = rule.decide(outcome)
        if decision is not None:
            return decision
    raise AssertionError("the last rule always matches")  # pragma: no cover


def worst(decisions: Sequence[ExitDecision], what: str) -> ExitDecision:
    """Several runs decided together (models side by side): the highest code, and why."""
    top = max(decisions, key=lambda d: d.code)
    return ExitDecision(top.code, f"{len(decisions)} {what}, worst exit {top.code}: {top.reason}")


def refused_before_run(reason: str) -> ExitDecision:
    """The run is refused before any item ran because its comparison is already invalid."""
    return ExitDecision(COMPARISON_INVALID, reason)


def markdown_table() -> str:
    """docs/methodology.md's precedence table, generated from :data:`RULES`."""
    lines = ["| # | condition | exit |", "|---|---|---|"]
    for number, rule in enumerate(RULES, 1):
        lines.append(f"| {number} | {rule.condition} | {rule.gives} |")
    return "\n".join(lines)


# -- errors that stop a command ------------------------------------------------------------

#: The exit status of each kind of :class:`~goldeval.core.errors.GoldevalError`.
_CODE_FOR_KIND = {ExitKind.USAGE: USAGE, ExitKind.NOT_COMPARABLE: COMPARISON_INVALID}


def code_for_error(exc: GoldevalError) -> int:
    """The exit status of a command stopped by ``exc``: its class's ``exit_kind`` mapped here,
    so no caller chooses a code by the exception's class or name."""
    return _CODE_FOR_KIND[exc.exit_kind]


#: The system's refusals of a path the user named (not there, a file where a folder goes, a
#: folder where a file goes, no permission, read-only, too long, a loop of links): usage.
_PATH_ERRNOS = frozenset((errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM))
_PATH_ERRNOS |= {errno.EEXIST, errno.EROFS, errno.ENAMETOOLONG, errno.ELOOP}


def code_for_os_error(exc: OSError) -> int:
    """The exit status of a command stopped by the system refusing a read or a write: a path
    the user named that cannot be used is a usage error; anything else (a full disk, an I/O
    error) is infrastructure, to retry."""
    return USAGE if exc.errno in _PATH_ERRNOS else INFRA
