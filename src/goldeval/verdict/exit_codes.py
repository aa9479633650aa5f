"""The session's exit status, decided once on the controller after the run.

pytest's own codes are reused where they mean the same thing; the two codes pytest has no word
for come from BSD ``sysexits.h``: 65 (EX_DATAERR: the baseline is not comparable) and 75
(EX_TEMPFAIL: infrastructure errors, retry the run). The reference's codes map as
0→0, 1 (usage)→4, 2 (gate failed)→1, 3 (infrastructure)→75, 4 (comparison invalid)→65.

:func:`decide_exit` applies the first matching row:

===  ==================================================================  =====
 #   Condition                                                           Exit
===  ==================================================================  =====
 1   pytest exited INTERRUPTED (2), INTERNAL_ERROR (3) or USAGE_ERROR    2/3/4
     (4): kept as it is
 2   the baseline comparison is COMPARISON_INVALID                       65
 3   nothing was graded: ``casesTotal`` is 0 (empty selection), or no    1
     PASS/FAIL attempt and no ERROR attempt (everything skipped)
 4   every attempt ERROR (no PASS/FAIL attempt, at least one ERROR)      75/4*
 5   no case reached PASS/FAIL and some case is ERROR (reference rule)   75/4*
 6   the quality gate failed (or the comparison says REGRESSION)         1
 7   any attempt ERROR: the run is not a quality verdict, retry it       75/4*
 8   pytest exited 1 (test failures; e.g. no gate configured)            1
 9   pytest exited with another non-zero status                          kept
 10  otherwise                                                           0
===  ==================================================================  =====

75/4*: when an ERROR attempt has a kind that no retry can fix (``CONTEXT_LENGTH``,
``MODEL_NOT_FOUND``, ``NOT_FOUND``, ``BAD_REQUEST``, ``AUTH_FAILED``, ``CONFIG_ERROR``,
``GRADER_TIMEOUT``: :data:`goldeval.core.errors.NON_RETRYABLE_KINDS`), rows 4, 5 and 7 give 4,
"configuration error: retrying will not help", instead of 75: 75 tells a CI job to run again,
and an identical rerun would end the same way. A run mixing such errors with retryable ones
also gives 4: it cannot become a complete verdict until the model, configuration or rows
change. Exit 4 is pytest's usage error, which is what these are: a wrong model name, a prompt
too long for the chosen model, a wrong key or URL, a pathological pattern in a row.

Before the table is applied, the plugin passes pytest's status 1 as 0 when a gate (or a
baseline capture) is in play and every failed item is a golden attempt: the gate weighs failed
golden items, so a run whose gate passes exits 0; the user's own failing tests still give 1.

Without a gate (``--golden-no-gate`` or no policy) row 6 never matches: failing items still
give pytest's 1 (row 8) and infrastructure errors still give 75 (row 7).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, NamedTuple

from goldeval.core.errors import ExitKind, GoldevalError, is_retryable
from goldeval.verdict.comparison import ComparisonResult, Decision, attempt_counts, cases_total
from goldeval.verdict.gate import GateResult

OK = 0
#: pytest's TESTS_FAILED, reused on purpose: a failed gate is a failed test run.
GATE_FAILED = 1
#: pytest's INTERRUPTED and INTERNAL_ERROR, passed through.
INTERRUPTED = 2
INTERNAL_ERROR = 3
#: pytest's USAGE_ERROR.
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


def _case_statuses(run: Mapping[str, Any]) -> list[str]:
    cases = run.get("cases")
    if not isinstance(cases, list):
        return []
    return [str(c.get("status")) for c in cases if isinstance(c, Mapping)]


def _non_retryable(run: Mapping[str, Any]) -> Counter[str]:
    """Kinds of the ERROR attempts that a retry cannot fix, with their counts."""
    kinds: Counter[str] = Counter()
    cases = run.get("cases")
    for case in cases if isinstance(cases, list) else []:
        attempts = case.get("attempts") if isinstance(case, Mapping) else None
        for attempt in attempts if isinstance(attempts, list) else []:
            if not isinstance(attempt, Mapping) or attempt.get("status") != "ERROR":
                continue
            kind = attempt.get("errorKind")
            if isinstance(kind, str) and not is_retryable(kind):
                kinds[kind] += 1
    return kinds


def _infra(run: Mapping[str, Any], reason: str) -> ExitDecision:
    """Exit 75 for ``reason``, or 4 when some ERROR is of a kind a retry cannot fix."""
    fixed = _non_retryable(run)
    if not fixed:
        return ExitDecision(INFRA, reason)
    kinds = ", ".join(f"{kind} ({n})" for kind, n in sorted(fixed.items()))
    return ExitDecision(
        CONFIG_ERROR,
        f"configuration error: {sum(fixed.values())} attempts ERROR with {kinds}; retrying "
        "will not help, change the model, configuration or rows",
    )


def decide_exit(
    run: Mapping[str, Any],
    comparison: ComparisonResult | None,
    gate: GateResult | None,
    *,
    pytest_status: int,
) -> ExitDecision:
    """The exit code and a one-line human reason; see the module docstring for the table."""
    if pytest_status in _PYTEST_KEPT:
        return ExitDecision(pytest_status, f"{_PYTEST_KEPT[pytest_status]} (exit {pytest_status})")
    if comparison is not None and comparison.decision is Decision.COMPARISON_INVALID:
        reasons = comparison.invalid_reasons or ["baseline not comparable"]
        more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
        return ExitDecision(COMPARISON_INVALID, f"comparison invalid: {reasons[0]}{more}")
    counts = attempt_counts(run)
    if cases_total(run) == 0:
        return ExitDecision(GATE_FAILED, "nothing was graded: no golden case selected")
    if counts.quality == 0 and counts.error == 0:
        return ExitDecision(GATE_FAILED, f"nothing was graded: all {counts.total} attempts skipped")
    if counts.quality == 0:
        return _infra(
            run, f"infrastructure failure: all {counts.error} attempts ERROR, no quality verdict"
        )
    statuses = _case_statuses(run)
    if "ERROR" in statuses and not any(s in ("PASS", "FAIL") for s in statuses):
        n_error = statuses.count("ERROR")
        return _infra(
            run, f"infrastructure failure: {n_error} cases ERROR and no case reached PASS/FAIL"
        )
    if gate is not None and not gate.passed:
        return ExitDecision(GATE_FAILED, gate.summary_line())
    if comparison is not None and comparison.decision is Decision.REGRESSION:
        return ExitDecision(GATE_FAILED, "regression against the baseline")
    if counts.error > 0:
        return _infra(
            run,
            f"infrastructure errors: {counts.error} of {counts.total} attempts ERROR; "
            "the run is not a quality verdict, retry it",
        )
    if pytest_status == 1:
        return ExitDecision(GATE_FAILED, "test failures")
    if pytest_status != OK:
        return ExitDecision(pytest_status, f"pytest exit status {pytest_status}")
    if run.get("incomplete"):
        # Without a gate (--golden-no-gate) nothing else stops an incomplete run (deadline,
        # budget) from exiting 0: exit 0 means every selected attempt was graded.
        return ExitDecision(GATE_FAILED, "run incomplete: not every selected attempt was started")
    if gate is not None:
        return ExitDecision(OK, gate.summary_line())
    return ExitDecision(OK, "every graded attempt ok (no gate)")


# -- errors that stop a command ------------------------------------------------------------

#: The exit status of each kind of :class:`~goldeval.core.errors.GoldevalError`.
_CODE_FOR_KIND = {ExitKind.USAGE: USAGE, ExitKind.NOT_COMPARABLE: COMPARISON_INVALID}


def code_for_error(exc: GoldevalError) -> int:
    """The exit status of a command stopped by ``exc``: its class's ``exit_kind`` mapped here,
    so no caller chooses a code by the exception's class or name."""
    return _CODE_FOR_KIND[exc.exit_kind]
