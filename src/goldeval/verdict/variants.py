"""The decision on the difference between two variants of one session (issue 35).

``gate.compare`` asks: is the candidate not worse than the control by more than the margin?
The figures are goldeval.results.variant_comparison's; the label is decided here, once:

- ``NON_INFERIOR``: the 95% interval of candidate − control lies above −margin.
- ``INFERIOR``: the interval lies below −margin (clearly worse).
- ``INCONCLUSIVE``: the interval contains −margin (or no case was graded by both): these
  cases cannot tell. Never a pass (no false green): the exit status is 1, and the reason says
  about how many more paired cases would decide it.

The exit code itself is :func:`goldeval.verdict.exit_codes.decide_exit`'s, which reads the
:class:`VariantGateResult` from the :class:`~goldeval.verdict.outcome.RunOutcome`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from goldeval.results.documents import VariantComparisonDoc


class VariantDecision(str, Enum):
    NON_INFERIOR = "NON_INFERIOR"
    INFERIOR = "INFERIOR"
    INCONCLUSIVE = "INCONCLUSIVE"


#: The statistic's verdict (goldeval.results.non_inferiority.NonInferiority) → the gate's label.
_LABELS = {
    "PASS": VariantDecision.NON_INFERIOR,
    "FAIL": VariantDecision.INFERIOR,
    "UNDERPOWERED": VariantDecision.INCONCLUSIVE,
}


@dataclass(frozen=True)
class VariantGateResult:
    """The label and the one line every surface shows for it."""

    decision: VariantDecision
    reason: str

    @property
    def passed(self) -> bool:
        return self.decision is VariantDecision.NON_INFERIOR


def _pts(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:+.1f} pts"


def _not_seen_alike(doc: VariantComparisonDoc) -> str:
    """What of the selection the pair did not weigh, in words ("" when nothing)."""
    parts = []
    if doc.unpaired:
        parts.append(f"{doc.unpaired} case(s) graded by one side only")
    ungraded = doc.ungraded_attempts or {}
    for side in ("control", "candidate"):
        if ungraded.get(side):
            name = doc.control if side == "control" else doc.candidate
            parts.append(f"{ungraded[side]} attempt(s) of {name} ERROR or SKIPPED")
    if doc.uneven_cases:
        parts.append(f"{doc.uneven_cases} case(s) with a different number of attempts per side")
    return "; ".join(parts)


def decide_variants(doc: VariantComparisonDoc) -> VariantGateResult:
    """The label of a ``variantComparison`` and why. An unknown statistic verdict (a
    hand-edited file) is INCONCLUSIVE: never read as a pass."""
    decision = _LABELS.get(doc.non_inferiority, VariantDecision.INCONCLUSIVE)
    pair = f"{doc.candidate} vs {doc.control}"
    ci = doc.ci95
    interval = f"95% CI [{_pts(ci.lower)}, {_pts(ci.upper)}]" if ci is not None else "no CI"
    figures = (
        f"difference {_pts(doc.difference)}, {interval}, margin {doc.margin * 100:.1f} pts, "
        f"{doc.cases} paired cases"
    )
    unseen = _not_seen_alike(doc)
    if decision is VariantDecision.NON_INFERIOR and unseen:
        # The statistic holds on the cases both graded; what it did not weigh (a case one
        # side never graded, an ERROR or SKIPPED attempt, a case one side ran fewer attempts
        # of) could hide a regression: never a pass.
        return VariantGateResult(
            VariantDecision.INCONCLUSIVE,
            f"{pair}: INCONCLUSIVE, the two did not grade the same selection ({unseen}); the "
            f"graded cases alone say NON_INFERIOR ({figures}); not a pass",
        )
    if decision is VariantDecision.NON_INFERIOR:
        return VariantGateResult(decision, f"{pair}: NON_INFERIOR ({figures})")
    if decision is VariantDecision.INFERIOR:
        worse = doc.flipped_worse
        shown = ", ".join(worse[:5]) + (" ..." if len(worse) > 5 else "")
        flipped = f"; flipped to FAIL: {shown}" if worse else ""
        return VariantGateResult(
            decision, f"{pair}: INFERIOR, worse by more than the margin ({figures}){flipped}"
        )
    if doc.cases == 0:
        more = "no case was graded by both variants"
    elif doc.more_cases is not None:
        more = f"about {doc.more_cases} more paired cases (or attempts) would decide it"
    else:
        more = "the estimate sits on the margin: no number of cases is predicted to decide it"
    return VariantGateResult(
        decision, f"{pair}: INCONCLUSIVE, underpowered ({figures}); {more}; not a pass"
    )
