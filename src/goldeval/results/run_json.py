"""The run document while it is written: :data:`RunJson`, a TypedDict of the JSON that
becomes run.json (goldeval.results.run_document.build_run makes it, the plugin's finishing
steps add the verdict's fields, goldeval.results.run_folder and the store write it).

The readers take the typed models of goldeval.results.documents (``RunDocument``); the writers
build the JSON itself, key by key, so its keys are these and nothing else: a test holds this
TypedDict and ``RunDocument``'s field names to the same set, so a writer cannot add a field
the readers do not know. Nested objects stay JSON here (``dict[str, Any]``): they are typed
where they are read.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

__all__ = ["RUN_JSON_KEYS", "RunJson", "as_run_json"]


class RunJson(TypedDict, total=False):
    runId: str
    runKey: str
    timestamp: str
    status: str
    datasetVersion: str
    packDatasetVersion: str | None
    datasetHash: str
    packHash: str | None
    gitCommit: str | None
    configFingerprint: str
    model: str | None
    baselinePath: str | None
    projectRoot: str
    goldenRoot: str
    metrics: dict[str, Any]
    qualityGate: dict[str, Any] | None
    exitDecision: dict[str, Any]
    notes: list[str]
    incomplete: bool
    durationMs: int | float
    casesTotal: int
    casesPassed: int
    casesFailed: int
    casesSkipped: int
    casesError: int
    attemptsTotal: int
    attemptsPassed: int
    attemptsFailed: int
    attemptsSkipped: int
    attemptsError: int
    notStartedBeforeDeadline: int
    notStartedOverBudget: int
    adaptiveAttempts: dict[str, Any]
    attemptsNotStarted: int
    stoppedEarly: dict[str, Any]
    duplicateAttempts: list[str]
    interruptedBy: str
    storeError: str
    storeConflict: str
    rerunCommand: str
    finalisationFault: dict[str, Any]
    pytestStatus: int
    otherFailures: int
    judgeModel: str | None
    experimentId: str | None
    judgeErrors: int
    judgeSelfPreference: bool
    protocol: dict[str, Any]
    configuration: dict[str, Any]
    cases: list[dict[str, Any]]
    comparison: dict[str, Any] | None
    environment: dict[str, Any]
    variant: str
    variantComparison: dict[str, Any]


#: Every key a run document may have (the TypedDict's, which a test holds to RunDocument's).
RUN_JSON_KEYS = frozenset(RunJson.__annotations__)


def as_run_json(doc: dict[str, Any]) -> RunJson:
    """``doc`` as a :data:`RunJson`, once its keys are checked: where the JSON is assembled
    from parts (identity, counters, extras), a key outside the document is a writer's bug,
    raised here rather than written."""
    unknown = sorted(set(doc) - RUN_JSON_KEYS)
    if unknown:
        raise ValueError(f"not a field of the run document: {', '.join(unknown)}")
    return cast(RunJson, doc)
