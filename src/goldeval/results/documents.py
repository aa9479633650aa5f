"""The run document, its summary and the baseline, as typed models with today's JSON names.

``run.json``, a committed baseline (the same document, reference 5.1) and ``summary.json`` are
written as plain JSON by :mod:`goldeval.results.run_document` and read back by the comparison,
the gate, the reports, the store views and ``goldeval gate``. These models say what each field
is. Every reader of a file a person may have edited validates it first
(:func:`validate_run_document`): a hand-edited ``cases: 5`` or ``protocol: "x"`` is refused with
the field named, instead of crashing three modules later.

The models are strict (no "5" for 5, no true for 1, no NaN/Infinity) and open: unknown keys are
kept as they are (a newer writer's fields), and dumping a validated document by alias with
``exclude_unset`` gives back the same JSON value (:meth:`_Doc.dump`; tests/unit/test_documents.py
checks every committed baseline). The writers keep writing the same JSON as before, so files
stay byte for byte what they were and committed baselines keep loading.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from goldeval.core.errors import BaselineError
from goldeval.results.document_base import Doc as _Doc
from goldeval.results.document_base import IntervalDoc, PassAtKRowDoc
from goldeval.results.variant_documents import (
    DiffSegmentDoc,
    MatrixCellDoc,
    McNemarDoc,
    PairedFigureDoc,
    ParetoDoc,
    ParetoRowDoc,
    PassAtKCurveDoc,
    SideBySideDoc,
    VariantComparisonDoc,
    VariantCostDoc,
    VariantCostsDoc,
    VariantMatrixDoc,
    VariantPairDoc,
    VariantPairsDoc,
)

__all__ = [
    "Attempt",
    "Case",
    "Comparison",
    "Configuration",
    "DiffSegmentDoc",
    "ExitDecisionDoc",
    "GateDoc",
    "IntervalDoc",
    "MatrixCellDoc",
    "McNemarDoc",
    "Metrics",
    "PairedFigureDoc",
    "ParetoDoc",
    "ParetoRowDoc",
    "PassAtKCurveDoc",
    "PassAtKDoc",
    "Protocol",
    "RateDoc",
    "RunDocument",
    "SideBySideDoc",
    "StoppedEarlyDoc",
    "Summary",
    "VariantComparisonDoc",
    "VariantCostDoc",
    "VariantCostsDoc",
    "VariantMatrixDoc",
    "VariantPairDoc",
    "VariantPairsDoc",
    "typed_run",
    "validate_run_document",
]


class RateDoc(_Doc):
    """An attempt-weighted rate: ``hits / total``, ``rate`` null when nothing was counted."""

    hits: int
    total: int
    rate: float | None = None
    #: The Wilson 95% interval (``results.metrics.rate_dict``), when the rate has one.
    ci95: IntervalDoc | None = None


class TokensDoc(_Doc):
    """Tokens of one attempt or of the run (``metrics.tokens``); null counts are unknown.

    ``estimated``: some counts are characters / 4 because the provider reported no usage
    (the budget counts them all the same); ``estimatedAttempts`` says how many attempts of
    the run. ``judge``: the judge calls' own totals (run level).
    """

    input_tokens: int | None = Field(default=None, alias="inputTokens")
    output_tokens: int | None = Field(default=None, alias="outputTokens")
    total_tokens: int | None = Field(default=None, alias="totalTokens")
    estimated_cost: float | None = Field(default=None, alias="estimatedCost")
    estimated: bool | None = None
    estimated_attempts: int | None = Field(default=None, alias="estimatedAttempts")
    judge: dict[str, Any] | None = None


class Attempt(_Doc):
    #: Absent in the reference's own baselines (the case carries it).
    case_id: str | None = Field(default=None, alias="caseId")
    index: int
    status: str
    model: str | None = None
    contract: dict[str, Any] | None = None
    retrieval: dict[str, Any] | None = None
    graders: list[dict[str, Any]] = Field(default_factory=list)
    tokens: TokensDoc | None = None
    #: The model the server said answered (its response's ``model`` field), when it said so.
    served_model: str | None = Field(default=None, alias="servedModel")
    duration_ms: float | None = Field(default=None, alias="durationMs")
    tries: int | None = None
    error_kind: str | None = Field(default=None, alias="errorKind")
    error_message: str | None = Field(default=None, alias="errorMessage")
    output: str | None = None
    judge: dict[str, Any] | None = None
    #: The messages sent, when the case used a template or a conversation.
    prompt_messages: list[dict[str, Any]] | None = Field(default=None, alias="promptMessages")
    skip_reason: str | None = Field(default=None, alias="skipReason")


class Case(_Doc):
    case_id: str = Field(alias="caseId")
    status: str
    kinds: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    attempts: list[Attempt] = Field(default_factory=list)
    success_rate: RateDoc | None = Field(default=None, alias="successRate")
    metadata: dict[str, Any] = Field(default_factory=dict)
    taxonomy: list[dict[str, Any]] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    contract: dict[str, Any] | None = None
    retrieval: dict[str, Any] | None = None
    duration_ms: float | None = Field(default=None, alias="durationMs")


class Protocol(_Doc):
    """What must match for two runs to be compared (reference 5.2)."""

    dataset_id: str = Field(alias="datasetId")
    dataset_hash: str | None = Field(default=None, alias="datasetHash")
    pack_id: str | None = Field(default=None, alias="packId")
    pack_hash: str | None = Field(default=None, alias="packHash")
    mode: str
    attempts: int
    selected_case_ids: list[str] = Field(default_factory=list, alias="selectedCaseIds")
    grader_config_hash: str | None = Field(default=None, alias="graderConfigHash")
    provider: str | None = None
    model: str | None = None
    judge_enabled: bool | None = Field(default=None, alias="judgeEnabled")
    judge_model: str | None = Field(default=None, alias="judgeModel")
    #: The dataset's profile (a run written before profiles has none: java-autotest).
    profile: str | None = None
    #: The manifest variant the run is (issue 35): its name and the fingerprint of the prompt
    #: templates it sent (None: neither it nor the manifest has one). Absent outside variants.
    variant: str | None = None
    prompt_hash: str | None = Field(default=None, alias="promptHash")
    #: The fingerprint of the variant's own request options (absent when it names none).
    options_hash: str | None = Field(default=None, alias="optionsHash")


class Configuration(_Doc):
    mode: str | None = None
    golden_mode: str | None = Field(default=None, alias="goldenMode")
    model: str | None = None
    #: The model every answering server named, when they all named the same one (the
    #: ``model`` above stays the name asked for: baselines compare on it).
    served_model: str | None = Field(default=None, alias="servedModel")
    #: The names, when the servers named several.
    served_models: list[str] | None = Field(default=None, alias="servedModels")
    judge_model: str | None = Field(default=None, alias="judgeModel")
    judge_enabled: bool | None = Field(default=None, alias="judgeEnabled")
    repetitions: int | None = None
    include_red: bool | None = Field(default=None, alias="includeRed")
    artifact_mode: str | None = Field(default=None, alias="artifactMode")
    output_dir: str | None = Field(default=None, alias="outputDir")
    provider: str | None = None
    provider_settings: dict[str, Any] | None = Field(default=None, alias="providerSettings")
    experiment_id: str | None = Field(default=None, alias="experimentId")
    concurrency: int | None = None
    deadline_seconds: float | None = Field(default=None, alias="deadlineSeconds")


class PassAtKDoc(_Doc):
    """``metrics.passAtK`` (runs with more than one attempt per case): the bootstrap's
    resamples and seed, so the intervals can be reproduced, and one row per k."""

    cases: int
    resamples: int
    seed: int
    confidence: float
    by_k: list[PassAtKRowDoc] = Field(default_factory=list, alias="byK")


class Metrics(_Doc):
    """The nine reference rates (``core.rates.RATE_NAMES``), per-grader rates and slices."""

    overall_pass_rate: RateDoc | None = Field(default=None, alias="overallPassRate")
    contract_pass_rate: RateDoc | None = Field(default=None, alias="contractPassRate")
    judge_accept_rate: RateDoc | None = Field(default=None, alias="judgeAcceptRate")
    retrieval_pass_rate: RateDoc | None = Field(default=None, alias="retrievalPassRate")
    negative_case_pass_rate: RateDoc | None = Field(default=None, alias="negativeCasePassRate")
    hallucination_rate: RateDoc | None = Field(default=None, alias="hallucinationRate")
    refusal_accuracy: RateDoc | None = Field(default=None, alias="refusalAccuracy")
    layer_accuracy: RateDoc | None = Field(default=None, alias="layerAccuracy")
    rag_accuracy: RateDoc | None = Field(default=None, alias="ragAccuracy")
    graders: dict[str, RateDoc] | None = None
    slices: dict[str, RateDoc] | None = None
    latency: dict[str, Any] | None = None
    tokens: TokensDoc | None = None
    unstable_case_rate: RateDoc | None = Field(default=None, alias="unstableCaseRate")
    pass_at_k: PassAtKDoc | None = Field(default=None, alias="passAtK")
    weighted_score: float | None = Field(default=None, alias="weightedScore")
    weighted_score_formula: str | None = Field(default=None, alias="weightedScoreFormula")
    # What the reports show besides the rates (results.metrics.MetricsAccumulator.dump).
    retries: dict[str, Any] | None = None
    judge: dict[str, Any] | None = None
    soft_scores: dict[str, dict[str, Any]] | None = Field(default=None, alias="softScores")
    queue_wait: dict[str, Any] | None = Field(default=None, alias="queueWait")
    time_to_first_token: dict[str, Any] | None = Field(default=None, alias="timeToFirstToken")

    def rate(self, name: str) -> RateDoc | None:
        """The rate named by its JSON name (``overallPassRate``), None when the run has none."""
        field = _METRIC_FIELDS.get(name)
        value = getattr(self, field) if field is not None else None
        return value if isinstance(value, RateDoc) else None


#: A metric's JSON name → its field in :class:`Metrics`.
_METRIC_FIELDS = {(f.alias or n): n for n, f in Metrics.model_fields.items()}


class GateRuleDoc(_Doc):
    name: str
    detail: str
    passed: bool
    actual: float | None = None
    threshold: float | None = None
    kind: str


class GateDoc(_Doc):
    passed: bool
    verdict: str
    rules: list[GateRuleDoc] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class Comparison(_Doc):
    #: The shown word (``goldeval.verdict.comparison_result.shown_decision``) and why.
    decision: str
    decision_why: str | None = Field(default=None, alias="decisionWhy")
    invalid_reasons: list[str] = Field(default_factory=list, alias="invalidReasons")
    protocol_differences: list[dict[str, Any]] = Field(
        default_factory=list, alias="protocolDifferences"
    )
    configuration_differences: list[str] = Field(
        default_factory=list, alias="configurationDifferences"
    )
    cases: list[dict[str, Any]] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    metrics: list[dict[str, Any]] = Field(default_factory=list)
    mcnemar: dict[str, Any] | None = None
    quality_gate: GateDoc | None = Field(default=None, alias="qualityGate")
    #: The baseline's run id, when the comparison was against a stored run (the service).
    baseline_run_id: str | None = Field(default=None, alias="baselineRunId")


class ExitDecisionDoc(_Doc):
    code: int
    reason: str


class StoppedEarlyDoc(_Doc):
    """``stoppedEarly``: the run loop stopped before every selected item ran (``-x``)."""

    reason: str | None = None
    attempts_not_run: int | None = Field(default=None, alias="attemptsNotRun")
    #: Selected cases with no graded attempt: what a resume of the run key must grade.
    cases_not_run: list[str] | None = Field(default=None, alias="casesNotRun")


class FinalisationFaultDoc(_Doc):
    """``finalisationFault``: writing the finished run failed (goldeval.results.finalise)."""

    reason: str
    path_refused: bool = Field(default=False, alias="pathRefused")


RunStatusWord = Literal["QUEUED", "RUNNING", "COMPLETED", "FAILED", "INTERRUPTED", "INCOMPLETE"]


class Summary(_Doc):
    """``summary.json``: the run without its cases (and what the store keeps of a run)."""

    run_id: str | None = Field(default=None, alias="runId")
    run_key: str | None = Field(default=None, alias="runKey")
    timestamp: str | None = None
    #: The statuses goldeval writes (a store row's, run.json's); another word is a damaged
    #: document, refused naming the field (it was gated as a run: a false green).
    status: RunStatusWord | None = None
    dataset_version: str | None = Field(default=None, alias="datasetVersion")
    pack_dataset_version: str | None = Field(default=None, alias="packDatasetVersion")
    dataset_hash: str | None = Field(default=None, alias="datasetHash")
    pack_hash: str | None = Field(default=None, alias="packHash")
    git_commit: str | None = Field(default=None, alias="gitCommit")
    config_fingerprint: str | None = Field(default=None, alias="configFingerprint")
    model: str | None = None
    baseline_path: str | None = Field(default=None, alias="baselinePath")
    project_root: str | None = Field(default=None, alias="projectRoot")
    golden_root: str | None = Field(default=None, alias="goldenRoot")
    metrics: Metrics | None = None
    quality_gate: GateDoc | None = Field(default=None, alias="qualityGate")
    exit_decision: ExitDecisionDoc | None = Field(default=None, alias="exitDecision")
    notes: list[str] = Field(default_factory=list)
    incomplete: bool | None = None
    #: int | float: report.md shows the number as written (``12 ms``, not ``12.0 ms``).
    duration_ms: int | float | None = Field(default=None, alias="durationMs")
    # The counters (results.rollup.Counters); absent in some reference-format documents.
    cases_total: int | None = Field(default=None, alias="casesTotal")
    cases_passed: int | None = Field(default=None, alias="casesPassed")
    cases_failed: int | None = Field(default=None, alias="casesFailed")
    cases_skipped: int | None = Field(default=None, alias="casesSkipped")
    cases_error: int | None = Field(default=None, alias="casesError")
    attempts_total: int | None = Field(default=None, alias="attemptsTotal")
    attempts_passed: int | None = Field(default=None, alias="attemptsPassed")
    attempts_failed: int | None = Field(default=None, alias="attemptsFailed")
    attempts_skipped: int | None = Field(default=None, alias="attemptsSkipped")
    attempts_error: int | None = Field(default=None, alias="attemptsError")
    # How the session ended (pytest_plugin.ending.record_ending): what RunOutcome.from_run
    # reads back, so a saved run regated later gets the session's own code and reason.
    not_started_before_deadline: int | None = Field(default=None, alias="notStartedBeforeDeadline")
    not_started_over_budget: int | None = Field(default=None, alias="notStartedOverBudget")
    #: --golden-attempts=auto:MAX: its rule, rounds, attempts per round and the attempts its
    #: rule left out (goldeval.pytest_plugin.adaptive).
    adaptive_attempts: dict[str, Any] | None = Field(default=None, alias="adaptiveAttempts")
    attempts_not_started: int | None = Field(default=None, alias="attemptsNotStarted")
    stopped_early: StoppedEarlyDoc | None = Field(default=None, alias="stoppedEarly")
    duplicate_attempts: list[str] | None = Field(default=None, alias="duplicateAttempts")
    interrupted_by: str | None = Field(default=None, alias="interruptedBy")
    store_error: str | None = Field(default=None, alias="storeError")
    store_conflict: str | None = Field(default=None, alias="storeConflict")
    rerun_command: str | None = Field(default=None, alias="rerunCommand")
    finalisation_fault: FinalisationFaultDoc | None = Field(default=None, alias="finalisationFault")
    pytest_status: int | None = Field(default=None, alias="pytestStatus")
    #: How many tests that are not golden items failed in the session.
    other_failures: int | None = Field(default=None, alias="otherFailures")
    judge_model: str | None = Field(default=None, alias="judgeModel")
    experiment_id: str | None = Field(default=None, alias="experimentId")
    #: Judge calls that failed (live runs with the judge on).
    judge_errors: int | None = Field(default=None, alias="judgeErrors")
    #: The judge model is the generator model (pytest_plugin.run_writing notes it).
    judge_self_preference: bool | None = Field(default=None, alias="judgeSelfPreference")


class RunDocument(Summary):
    """``run.json`` and a committed baseline: the summary plus protocol, configuration, cases
    and the comparison with the baseline."""

    protocol: Protocol | None = None
    configuration: Configuration | None = None
    cases: list[Case] = Field(default_factory=list)
    comparison: Comparison | None = None
    environment: dict[str, Any] | None = None
    #: The manifest variant this run is (issue 35), when the session ran variants.
    variant: str | None = None
    #: The paired comparison of the session's two compared variants (both runs carry it).
    variant_comparison: VariantComparisonDoc | None = Field(default=None, alias="variantComparison")


_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "float_type": "a number",
    "finite_number": "a number",
    "bool_type": "true or false",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "a list",
}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return "a number"


def _field(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def validate_run_document(doc: Any, path: Path) -> RunDocument:
    """The typed document, or BaselineError naming the first field of the wrong type.

    Used for baselines, for the run.json given to ``goldeval gate/compare`` (exit 65), and by
    ``goldeval site`` to skip such a file with a warning. A missing field is not an error here
    (older writers, reference-format baselines); the integrity check counts what must be there.
    """
    if not isinstance(doc, dict):
        raise BaselineError("a run document must be a JSON object", path=path)
    try:
        return RunDocument.model_validate(doc)
    except ValidationError as exc:
        errors = [e for e in exc.errors() if e["type"] != "missing"] or exc.errors()
        first = errors[0]
        # A union (``X | None``) reports the non-null branch: drop pydantic's branch names.
        loc = tuple(p for p in first["loc"] if p not in ("int", "float", "str", "bool"))
        loc = tuple(p for p in loc if not (isinstance(p, str) and p[:1].isupper()))
        if first["type"] == "missing":
            message = "missing"
        else:
            want = _EXPECTED.get(first["type"])
            value = first.get("input")
            message = f"must be {want}, got {_kind(value)}" if want is not None else first["msg"]
            if first["type"] == "finite_number":
                message = f"must be a number, got {value!r}"
        raise BaselineError(
            message,
            path=path,
            field=_field(loc),
            hint="hand-edited or damaged; re-save or re-run it",
        ) from None


#: How a document is named in an error when the caller has no file for it (a run built in
#: memory, a store row).
IN_MEMORY = Path("<run document>")


def typed_run(raw: Any, path: Path | str | None = None) -> RunDocument:
    """The run document typed once, at the edge where it enters the verdict.

    ``raw``: run.json's JSON object (a file read, a store view, the run pytest just built) or
    an already typed document (returned as it is). ``path`` names the file or the store row
    in the BaselineError a wrong field type raises (:func:`validate_run_document`); extra
    keys are kept, so older and newer run.json files still load.
    """
    if isinstance(raw, RunDocument):
        return raw
    return validate_run_document(raw, Path(path) if path is not None else IN_MEMORY)
