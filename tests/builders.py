"""One builder of run documents for tests: run.json's JSON form, counters computed (issue 34).

Tests state a run as the JSON a user's file holds (``tests.verdict_json`` types it where the
verdict reads it), so the builder returns that JSON: camelCase keys, plain dicts and lists.
It writes only what every run needs (cases, their attempts, the summary counters) and what a
test asks for (protocol, metrics); a test module adds its own details (contracts, durations)
to the attempts it gets back, so what each test asserts stays visible in that module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from goldeval.verdict.comparison import REFERENCE_RATES

#: A run document in its JSON form (the shape of run.json and a committed baseline).
RunJson = dict[str, Any]
#: One attempt: its status (``"PASS"``, ``"FAIL"``, ``"ERROR"``, ``"SKIPPED"``), or the status
#: with its ``errorKind`` (``("ERROR", "TIMEOUT")``; ``None`` writes no errorKind).
AttemptSpec = str | tuple[str, str | None]

#: The protocol of a deterministic run; ``protocol=`` values override these.
DEFAULT_PROTOCOL: dict[str, Any] = {
    "datasetId": "demo-v1",
    "datasetHash": "h",
    "packId": None,
    "packHash": None,
    "mode": "DETERMINISTIC",
    "attempts": 1,
    "graderConfigHash": "g",
    "provider": None,
    "model": None,
    "judgeEnabled": False,
    "judgeModel": None,
}


def case_status(statuses: Sequence[str]) -> str:
    """A case's status from its attempts' (the rollup's rule): all skipped is SKIPPED; an
    error with no failed answer is ERROR; else PASS only when every answered attempt passed."""
    quality = [s for s in statuses if s in ("PASS", "FAIL")]
    if all(s == "SKIPPED" for s in statuses):
        return "SKIPPED"
    if "ERROR" in statuses and all(s == "PASS" for s in quality):
        return "ERROR"
    return "PASS" if all(s == "PASS" for s in quality) else "FAIL"


def _attempt(index: int, spec: AttemptSpec) -> dict[str, Any]:
    status, kind = (spec, None) if isinstance(spec, str) else spec
    attempt: dict[str, Any] = {"index": index, "status": status}
    if kind is not None:
        attempt["errorKind"] = kind
    return attempt


def run_document(
    cases: Mapping[str, str | Sequence[AttemptSpec]],
    *,
    protocol: Mapping[str, Any] | None = None,
    metrics: Mapping[str, Any] | None = None,
) -> RunJson:
    """A run of ``cases`` (case id → a list of its attempts, or one status), indexed from 1.

    Each case gets its status (:func:`case_status`) and successRate; the summary counters
    (cases*, attempts*) are counted from the attempts. ``protocol`` (even ``{}``) adds
    :data:`DEFAULT_PROTOCOL` with those overrides and ``selectedCaseIds``; without it the
    document has no protocol. ``metrics`` is written as given.
    """
    case_list: list[dict[str, Any]] = []
    for case_id, spec in cases.items():
        specs: list[AttemptSpec] = [spec] if isinstance(spec, str) else list(spec)
        attempts = [_attempt(i, s) for i, s in enumerate(specs, 1)]
        statuses = [a["status"] for a in attempts]
        quality = [s for s in statuses if s in ("PASS", "FAIL")]
        case_list.append(
            {
                "caseId": case_id,
                "status": case_status(statuses),
                "attempts": attempts,
                "successRate": {"hits": quality.count("PASS"), "total": len(quality)},
            }
        )
    case_statuses = [c["status"] for c in case_list]
    statuses = [a["status"] for c in case_list for a in c["attempts"]]
    doc: RunJson = {
        "casesTotal": len(case_list),
        "casesPassed": case_statuses.count("PASS"),
        "casesFailed": case_statuses.count("FAIL"),
        "casesSkipped": case_statuses.count("SKIPPED"),
        "casesError": case_statuses.count("ERROR"),
        "attemptsTotal": len(statuses),
        "attemptsPassed": statuses.count("PASS"),
        "attemptsFailed": statuses.count("FAIL"),
        "attemptsSkipped": statuses.count("SKIPPED"),
        "attemptsError": statuses.count("ERROR"),
        "cases": case_list,
    }
    if metrics is not None:
        doc["metrics"] = dict(metrics)
    if protocol is not None:
        doc["protocol"] = {
            **DEFAULT_PROTOCOL,
            "selectedCaseIds": sorted(cases),
            **protocol,
        }
    return doc


def reference_metrics(doc: RunJson) -> dict[str, Any]:
    """The reference rates of ``doc`` as a run of contract-only cases reports them: overall
    and contract pass rate over the answered attempts, every other reference rate empty."""
    passed, failed = doc["attemptsPassed"], doc["attemptsFailed"]
    metrics: dict[str, Any] = {name: {"hits": 0, "total": 0} for name in REFERENCE_RATES}
    metrics["overallPassRate"] = {"hits": passed, "total": passed + failed}
    metrics["contractPassRate"] = {"hits": passed, "total": passed + failed}
    return metrics
