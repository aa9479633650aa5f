"""Case roll-up and run counters (reference 4.2 and 4.3): pure, no pytest."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from goldeval.models import AttemptRecord, CaseInfo, CaseRecord, Rate, Status

QUALITY = (Status.PASS, Status.FAIL)


def case_status(attempts: Sequence[AttemptRecord]) -> Status:
    statuses = [a.status for a in attempts]
    if not statuses or all(s is Status.SKIPPED for s in statuses):
        return Status.SKIPPED
    quality = [s for s in statuses if s in QUALITY]
    errors = any(s is Status.ERROR for s in statuses)
    if errors:
        # A PASS+ERROR mix is an ERROR case: an error never counts as a pass or a FAIL.
        if not quality or all(s is Status.PASS for s in quality):
            return Status.ERROR
    if quality and all(s is Status.PASS for s in quality):
        return Status.PASS
    return Status.FAIL


def _majority_share(decisions: list[str]) -> float | None:
    if not decisions:
        return None
    return Counter(decisions).most_common(1)[0][1] / len(decisions)


def roll_up(info: CaseInfo, attempts: Sequence[AttemptRecord]) -> CaseRecord:
    ordered = sorted(attempts, key=lambda a: a.index)
    status = case_status(ordered)
    retrieval = next((a.retrieval for a in ordered if a.retrieval is not None), None)
    if status is Status.PASS and retrieval is not None and retrieval.applicable and not retrieval.passed:
        status = Status.FAIL
    quality = [a for a in ordered if a.status in QUALITY]
    contract = next((a.contract for a in reversed(ordered) if a.contract is not None), None)
    judge = next((a.judge for a in reversed(ordered) if a.judge is not None), None)
    judged = [a.judge.decision for a in ordered if a.judge is not None and a.judge.error is None]
    if len(ordered) == 1:
        stability = ordered[0].judge_stability
    else:
        stability = _majority_share(judged) if len(judged) >= 2 else None
    return CaseRecord(
        case_id=info.case_id,
        status=status,
        kinds=info.kinds,
        attempts=list(ordered),
        contract=contract,
        judge=judge,
        retrieval=retrieval,
        success_rate=Rate(hits=sum(a.status is Status.PASS for a in quality), total=len(quality)),
        errors=[f"{a.error_kind}: {a.error_message}" for a in ordered if a.status is Status.ERROR],
        duration_ms=sum(a.duration_ms for a in ordered),
        metadata={"prompt": info.prompt},
        taxonomy=list(contract.taxonomy) if contract is not None else [],
        judge_stability=stability,
        tags=list(info.tags),
        model=ordered[0].model if ordered else None,
    )


@dataclass
class Counters:
    cases_total: int = 0
    cases_passed: int = 0
    cases_failed: int = 0
    cases_skipped: int = 0
    cases_error: int = 0
    attempts_total: int = 0
    attempts_passed: int = 0
    attempts_failed: int = 0
    attempts_skipped: int = 0
    attempts_error: int = 0

    @property
    def quality_attempts(self) -> int:
        return self.attempts_passed + self.attempts_failed

    def dump(self) -> dict[str, int]:
        return {
            "casesTotal": self.cases_total,
            "casesPassed": self.cases_passed,
            "casesFailed": self.cases_failed,
            "casesSkipped": self.cases_skipped,
            "casesError": self.cases_error,
            "attemptsTotal": self.attempts_total,
            "attemptsPassed": self.attempts_passed,
            "attemptsFailed": self.attempts_failed,
            "attemptsSkipped": self.attempts_skipped,
            "attemptsError": self.attempts_error,
        }


def count(cases: Iterable[CaseRecord]) -> Counters:
    c = Counters()
    by_case: Counter[Status] = Counter()
    by_attempt: Counter[Status] = Counter()
    for case in cases:
        c.cases_total += 1
        by_case[case.status] += 1
        for a in case.attempts:
            by_attempt[a.status] += 1
            c.attempts_total += 1
    c.cases_passed, c.cases_failed = by_case[Status.PASS], by_case[Status.FAIL]
    c.cases_skipped, c.cases_error = by_case[Status.SKIPPED], by_case[Status.ERROR]
    c.attempts_passed, c.attempts_failed = by_attempt[Status.PASS], by_attempt[Status.FAIL]
    c.attempts_skipped, c.attempts_error = by_attempt[Status.SKIPPED], by_attempt[Status.ERROR]
    return c
