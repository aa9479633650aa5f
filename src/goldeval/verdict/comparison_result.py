"""The typed form of a baseline comparison and its JSON form (``ComparisonResult.dump``).

Records only, no logic beyond lookups: :mod:`goldeval.verdict.comparison` fills them, the
protocol check (:mod:`goldeval.verdict.protocol_check`) builds :class:`ProtocolDifference`, and
every surface reads the dumped camelCase dict.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import Field

from goldeval.core.models import Rate, Record


class CaseClass(str, Enum):
    NEW_FAILURE = "NEW_FAILURE"
    RECOVERED = "RECOVERED"
    UNCHANGED_PASS = "UNCHANGED_PASS"
    UNCHANGED_FAIL = "UNCHANGED_FAIL"
    NEW_ERROR = "NEW_ERROR"
    INFRA_RESOLVED = "INFRA_RESOLVED"
    UNCHANGED_ERROR = "UNCHANGED_ERROR"
    UNCHANGED_SKIPPED = "UNCHANGED_SKIPPED"
    ADDED = "ADDED"
    REMOVED = "REMOVED"


class Decision(str, Enum):
    NO_REGRESSION = "NO_REGRESSION"
    REGRESSION = "REGRESSION"
    COMPARISON_INVALID = "COMPARISON_INVALID"


#: The word shown for a comparable comparison that found new failures the gate did not weigh.
NEW_FAILURES_NOT_GATED = "NEW_FAILURES_NOT_GATED"


def shown_decision(decision: str, new_failures: int, gated: bool) -> tuple[str, str | None]:
    """The decision word every surface shows (terminal, reports, JUnit, run.json, the JSON of
    ``goldeval compare`` and of the service) and, when the word needs one, why.

    Never ``NO_REGRESSION`` when the comparison found new failures: a gate of thresholds only
    (or no gate) does not weigh them, so the word says what the comparison found, that the
    gate does not weigh it, and how to make it (``allowedRegression``).
    """
    if decision not in (Decision.NO_REGRESSION.value, NEW_FAILURES_NOT_GATED) or not new_failures:
        return decision, None
    return NEW_FAILURES_NOT_GATED, (
        f"the comparison found {new_failures} new failure{'s' if new_failures != 1 else ''}; "
        + ("the gate does not weigh them" if gated else "no gate weighs them")
        + " (add allowedRegression: 0.0 to the mode's gate in dataset.yaml to fail on them)"
    )


class Direction(str, Enum):
    IMPROVED = "IMPROVED"
    REGRESSED = "REGRESSED"
    UNCHANGED = "UNCHANGED"


class ProtocolDifference(Record):
    """One key on which the two runs' protocols differ."""

    key: str
    baseline: Any = None
    candidate: Any = None
    message: str = ""


class CaseComparison(Record):
    """One case id of the union: its class and both sides' status and success rate."""

    case_id: str
    case_class: CaseClass = Field(alias="class")
    baseline_status: str | None = None
    candidate_status: str | None = None
    baseline_success: Rate | None = None
    candidate_success: Rate | None = None
    #: The candidate case carries a CRITICAL violation (case or any attempt's contract taxonomy).
    critical: bool = False
    #: Categories of those CRITICAL violations, first-seen order.
    critical_categories: list[str] = Field(default_factory=list)


class MetricDelta(Record):
    name: str
    baseline: float | None = None
    candidate: float | None = None
    delta: float | None = None
    direction: Direction = Direction.UNCHANGED
    inverted: bool = False


class McNemar(Record):
    n01: int
    n10: int
    chi_square: float
    p_value: float | None = None
    note: str | None = None


class ComparisonResult(Record):
    """Outcome of :func:`compare`; ``decision`` becomes REGRESSION when a gate attached fails."""

    decision: Decision = Decision.NO_REGRESSION
    invalid_reasons: list[str] = Field(default_factory=list)
    protocol_differences: list[ProtocolDifference] = Field(default_factory=list)
    configuration_differences: list[str] = Field(default_factory=list)
    baseline_run_id: str | None = None
    candidate_run_id: str | None = None
    cases: list[CaseComparison] = Field(default_factory=list)
    #: Number of cases per class; every class is present (0 included) when valid.
    counts: dict[str, int] = Field(default_factory=dict)
    unchanged_pass: int = 0
    unchanged_fail: int = 0
    regressions: int = 0
    improvements: int = 0
    metrics: list[MetricDelta] = Field(default_factory=list)
    mcnemar: McNemar | None = None
    #: The gate's ``dump()`` when a gate was attached (``goldeval.verdict.gate.attach_gate``).
    quality_gate: dict[str, Any] | None = None

    @property
    def valid(self) -> bool:
        return self.decision is not Decision.COMPARISON_INVALID

    def dump(self) -> dict[str, Any]:
        """JSON-plain camelCase dict; unlike run records, nulls are kept (``"delta": null``).
        ``decision`` is the word every surface shows (:func:`shown_decision`), with
        ``decisionWhy``: a reader of the JSON never sees ``NO_REGRESSION`` beside new failures."""
        data = self.model_dump(by_alias=True, mode="json")
        data["decision"], data["decisionWhy"] = shown_decision(
            self.decision.value,
            self.counts.get(CaseClass.NEW_FAILURE.value, 0),
            self.quality_gate is not None,
        )
        return data

    def case_ids(self, case_class: CaseClass) -> list[str]:
        """Ids of the cases in one class, in union order."""
        return [c.case_id for c in self.cases if c.case_class is case_class]

    def metric(self, name: str) -> MetricDelta | None:
        for m in self.metrics:
            if m.name == name:
                return m
        return None
