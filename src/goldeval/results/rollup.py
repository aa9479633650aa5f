"""Case roll-up and run counters (reference 4.2 and 4.3): pure, no pytest.

Works on JSON-plain attempt records (the camelCase dicts that travel on test reports), so the
controller never has to hold 100,000 model objects: it rolls cases up one at a time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

QUALITY = ("PASS", "FAIL")
#: The run counters of run.json, in the reference's order.
COUNTER_KEYS = (
    "casesTotal",
    "casesPassed",
    "casesFailed",
    "casesSkipped",
    "casesError",
    "attemptsTotal",
    "attemptsPassed",
    "attemptsFailed",
    "attemptsSkipped",
    "attemptsError",
)
RAW_FIELDS = ("output", "judgeOutput", "recordedAnswer")


def case_status(statuses: Sequence[str]) -> str:
    if not statuses or all(s == "SKIPPED" for s in statuses):
        return "SKIPPED"
    quality = [s for s in statuses if s in QUALITY]
    if "ERROR" in statuses:
        # A PASS+ERROR mix is an ERROR case: an error never counts as a pass or a FAIL.
        if not quality or all(s == "PASS" for s in quality):
            return "ERROR"
    if quality and all(s == "PASS" for s in quality):
        return "PASS"
    return "FAIL"


def _majority_share(decisions: list[str]) -> float | None:
    if not decisions:
        return None
    return Counter(decisions).most_common(1)[0][1] / len(decisions)


def roll_up(info: Mapping[str, Any], attempts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The case record of run.json (reference field names) from its attempt records."""
    ordered = sorted(attempts, key=lambda a: a["index"])
    status = case_status([a["status"] for a in ordered])
    retrieval = next((a["retrieval"] for a in ordered if a.get("retrieval") is not None), None)
    if (
        status == "PASS"
        and retrieval
        and retrieval.get("applicable")
        and not retrieval.get("passed")
    ):
        status = "FAIL"
    quality = [a for a in ordered if a["status"] in QUALITY]
    contract = next((a["contract"] for a in reversed(ordered) if a.get("contract")), None)
    judge = next((a["judge"] for a in reversed(ordered) if a.get("judge")), None)
    judged = [
        a["judge"]["decision"] for a in ordered if a.get("judge") and not a["judge"].get("error")
    ]
    if len(ordered) == 1:
        stability = ordered[0].get("judgeStability")
    else:
        stability = _majority_share(judged) if len(judged) >= 2 else None
    case: dict[str, Any] = {
        "caseId": info["caseId"],
        "status": status,
        "kinds": list(info["kinds"]),
        "attempts": list(ordered),
    }
    if contract is not None:
        case["contract"] = contract
    if judge is not None:
        case["judge"] = judge
    if retrieval is not None:
        case["retrieval"] = retrieval
    case["successRate"] = {
        "hits": sum(a["status"] == "PASS" for a in quality),
        "total": len(quality),
    }
    case["errors"] = [
        f"{a.get('errorKind')}: {a.get('errorMessage')}" for a in ordered if a["status"] == "ERROR"
    ]
    case["durationMs"] = sum(a.get("durationMs", 0) for a in ordered)
    case["metadata"] = {"prompt": info.get("prompt")}
    case["taxonomy"] = list(contract.get("taxonomy") or []) if contract else []
    if stability is not None:
        case["judgeStability"] = stability
    if info.get("tags"):
        case["tags"] = list(info["tags"])
    if ordered and ordered[0].get("model"):
        case["model"] = ordered[0]["model"]
    return case


def strip_raw(case: Mapping[str, Any]) -> dict[str, Any]:
    """The case without raw model text (run.json and baselines never hold it); the case
    itself when no attempt has any (callers never change what they get)."""
    if isinstance(case, dict) and not any(
        name in a for a in case["attempts"] for name in RAW_FIELDS
    ):
        return case
    out = dict(case)
    out["attempts"] = [
        {k: v for k, v in a.items() if k not in RAW_FIELDS} for a in case["attempts"]
    ]
    return out


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

    def add(self, case: Mapping[str, Any]) -> None:
        self.cases_total += 1
        s = case["status"]
        if s == "PASS":
            self.cases_passed += 1
        elif s == "FAIL":
            self.cases_failed += 1
        elif s == "SKIPPED":
            self.cases_skipped += 1
        else:
            self.cases_error += 1
        for a in case["attempts"]:
            self.attempts_total += 1
            s = a["status"]
            if s == "PASS":
                self.attempts_passed += 1
            elif s == "FAIL":
                self.attempts_failed += 1
            elif s == "SKIPPED":
                self.attempts_skipped += 1
            else:
                self.attempts_error += 1

    def dump(self) -> dict[str, int]:
        values = (
            self.cases_total,
            self.cases_passed,
            self.cases_failed,
            self.cases_skipped,
            self.cases_error,
            self.attempts_total,
            self.attempts_passed,
            self.attempts_failed,
            self.attempts_skipped,
            self.attempts_error,
        )
        return dict(zip(COUNTER_KEYS, values, strict=True))


def count(cases: Iterable[Mapping[str, Any]]) -> Counters:
    c = Counters()
    for case in cases:
        c.add(case)
    return c
