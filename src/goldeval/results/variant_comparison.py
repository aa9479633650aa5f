"""The paired comparison of two variants run in one session (issue 35): ``variantComparison``
of run.json, built from the two variants' runs on the cases both graded.

Statistics only (goldeval.results.sampling): the exact McNemar test on per-case outcomes, the
case-clustered bootstrap interval of the difference in pass rate, the non-inferiority figure
against the manifest's margin, the cases that flipped each way and the smallest difference
these cases could detect. The decision label (NON_INFERIOR / INFERIOR / INCONCLUSIVE) and the
exit status are the verdict's (goldeval.verdict.variants), never computed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from goldeval.results.documents import RunDocument
from goldeval.results.non_inferiority import NonInferiority, non_inferiority
from goldeval.results.sampling import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    McNemar,
    OutcomeRule,
    Tally,
    case_outcome,
    mcnemar_exact,
    minimum_detectable_difference,
)
from goldeval.results.variant_costs import CaseFigures, case_figures, paired_costs

#: Flipped case ids listed per direction in run.json (the counts are always whole).
MAX_FLIPPED_LISTED = 50


def ungraded_attempts(run: RunDocument | None) -> int:
    """The run's attempts that are no quality outcome (ERROR, SKIPPED)."""
    return sum(
        a.status not in ("PASS", "FAIL")
        for case in (run.cases if run is not None else ())
        for a in case.attempts
    )


def uneven_cases(a: RunDocument | None, b: RunDocument | None) -> int:
    """Cases both runs hold with a different number of attempts (a selection that took some
    attempts of one side only, ``-k``): those cases were not seen alike by the two."""
    if a is None or b is None:
        return 0
    held = {case.case_id: len(case.attempts) for case in a.cases}
    return sum(
        1 for case in b.cases if held.get(case.case_id, len(case.attempts)) != len(case.attempts)
    )


def case_tallies(run: RunDocument | None) -> dict[str, Tally]:
    """Each case's graded (PASS or FAIL) and passed attempts; ERROR and SKIPPED attempts are
    not quality outcomes and are left out (a case with none graded is not paired)."""
    tallies: dict[str, Tally] = {}
    for case in run.cases if run is not None else ():
        statuses = [a.status for a in case.attempts]
        passed = statuses.count("PASS")
        tallies[case.case_id] = Tally(passed, passed + statuses.count("FAIL"))
    return tallies


@dataclass(frozen=True)
class PairStatistics:
    """Two variants' per-case tallies compared on the cases both graded (ids in id order)."""

    ids: list[str]
    unpaired: int
    pairs: list[tuple[Tally, Tally]]
    test: McNemar
    decision: NonInferiority
    worse: list[str]
    better: list[str]

    def summary(self) -> dict[str, Any]:
        """The figures one row of ``variantComparison.pairs`` carries."""
        return {
            "cases": len(self.ids),
            "unpaired": self.unpaired,
            "controlPassRate": _rate(p[0] for p in self.pairs),
            "candidatePassRate": _rate(p[1] for p in self.pairs),
            "difference": self.decision.difference,
            "ci95": self.decision.interval.dump() if self.decision.interval is not None else None,
            "nonInferiority": self.decision.verdict,
            "moreCases": self.decision.more_cases,
            "controlOnly": self.test.control_only,
            "candidateOnly": self.test.candidate_only,
            "pValue": self.test.p_value,
        }


def pair_statistics(
    a: dict[str, Tally],
    b: dict[str, Tally],
    margin: float,
    *,
    rule: OutcomeRule,
    resamples: int,
    seed: int,
) -> PairStatistics:
    """The paired statistics of control tallies ``a`` and candidate tallies ``b``: cases
    paired by id and taken in id order, so the seeded bootstrap gives the same figures
    whatever order the attempts arrived in (serially or under xdist)."""
    ids = sorted(cid for cid in a.keys() & b.keys() if a[cid].graded and b[cid].graded)
    pairs = [(a[cid], b[cid]) for cid in ids]
    return PairStatistics(
        ids=ids,
        unpaired=len((a.keys() | b.keys()) - set(ids)),
        pairs=pairs,
        test=mcnemar_exact(pairs, rule),
        decision=non_inferiority(pairs, margin, rule=rule, resamples=resamples, seed=seed),
        worse=[cid for cid in ids if case_outcome(a[cid], rule) and not case_outcome(b[cid], rule)],
        better=[
            cid for cid in ids if case_outcome(b[cid], rule) and not case_outcome(a[cid], rule)
        ],
    )


def compare_variants(
    control_run: RunDocument | None,
    candidate_run: RunDocument | None,
    *,
    control: str,
    candidate: str,
    margin: float,
    rule: OutcomeRule = "majority",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    figures: tuple[CaseFigures, CaseFigures] | None = None,
) -> dict[str, Any]:
    """``variantComparison``: candidate minus control on the cases both graded
    (:func:`pair_statistics`).

    ``figures``: each side's per-case latency and tokens (goldeval.results.variant_costs)
    when the runs' cases are light; by default they are read from the runs' own cases. A
    side that recorded nothing (None: its items were all deselected, ``-k``) pairs no case,
    so the comparison is INCONCLUSIVE, never skipped.
    """
    stats = pair_statistics(
        case_tallies(control_run),
        case_tallies(candidate_run),
        margin,
        rule=rule,
        resamples=resamples,
        seed=seed,
    )
    ids, test, worse, better = stats.ids, stats.test, stats.worse, stats.better
    discordance = (len(worse) + len(better)) / len(ids) if ids else None
    mdd = minimum_detectable_difference(len(ids), discordance) if discordance is not None else None
    summary = stats.summary()
    return {
        "control": control,
        "candidate": candidate,
        "controlModel": control_run.model if control_run is not None else None,
        "candidateModel": candidate_run.model if candidate_run is not None else None,
        "outcomeRule": rule,
        "cases": summary["cases"],
        "unpaired": summary["unpaired"],
        "ungradedAttempts": {
            "control": ungraded_attempts(control_run),
            "candidate": ungraded_attempts(candidate_run),
        },
        "unevenCases": uneven_cases(control_run, candidate_run),
        "controlPassRate": summary["controlPassRate"],
        "candidatePassRate": summary["candidatePassRate"],
        "difference": summary["difference"],
        "ci95": summary["ci95"],
        "margin": margin,
        "nonInferiority": summary["nonInferiority"],
        "moreCases": summary["moreCases"],
        "mcnemar": {
            "rule": test.rule,
            "cases": test.cases,
            "controlOnly": test.control_only,
            "candidateOnly": test.candidate_only,
            "pValue": test.p_value,
        },
        "flippedWorse": worse[:MAX_FLIPPED_LISTED],
        "flippedBetter": better[:MAX_FLIPPED_LISTED],
        "discordance": discordance,
        "minimumDetectableDifference": mdd,
        "resamples": resamples,
        "seed": seed,
        "confidence": DEFAULT_CONFIDENCE,
        "costs": {"control": _costs(control_run), "candidate": _costs(candidate_run)},
        "pairedCosts": paired_costs(
            *(figures or (_figures(control_run), _figures(candidate_run))),
            ids,
            resamples=resamples,
            seed=seed,
        ),
    }


def _figures(run: RunDocument | None) -> CaseFigures:
    return case_figures(case.dump() for case in (run.cases if run is not None else ()))


def _costs(run: RunDocument | None) -> dict[str, Any]:
    """What a variant's whole run cost (every case, not only the paired ones): latency
    median and p95 of its attempts, its tokens and estimated price (null when unknown)."""
    metrics = run.metrics if run is not None else None
    latency = (metrics.latency if metrics is not None else None) or {}
    tokens = metrics.tokens if metrics is not None else None
    return {
        "medianMs": latency.get("medianMs"),
        "p95Ms": latency.get("p95Ms"),
        "totalTokens": tokens.total_tokens if tokens is not None else None,
        "estimatedCost": tokens.estimated_cost if tokens is not None else None,
    }


def _rate(tallies: Any) -> float | None:
    passed = graded = 0
    for t in tallies:
        passed += t.passed
        graded += t.graded
    return passed / graded if graded else None
