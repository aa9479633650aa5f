"""``variantComparison`` of a run document (issue 35) as typed models: two variants of one
session compared on the cases both graded (written by goldeval.results.variant_comparison,
labelled by goldeval.verdict.variants). Re-exported by goldeval.results.documents."""

from __future__ import annotations

from pydantic import Field

from goldeval.results.document_base import Doc, IntervalDoc, PassAtKRowDoc

__all__ = [
    "DiffSegmentDoc",
    "McNemarDoc",
    "PairFiguresDoc",
    "PairedFigureDoc",
    "ParetoDoc",
    "ParetoRowDoc",
    "PassAtKCurveDoc",
    "SideBySideDoc",
    "VariantComparisonDoc",
    "VariantCostDoc",
    "VariantCostsDoc",
    "VariantPairDoc",
    "VariantPairsDoc",
]


class McNemarDoc(Doc):
    """The exact McNemar test of a variant comparison (goldeval.results.sampling.McNemar)."""

    rule: str
    cases: int
    control_only: int = Field(alias="controlOnly")
    candidate_only: int = Field(alias="candidateOnly")
    p_value: float | None = Field(default=None, alias="pValue")


class VariantCostDoc(Doc):
    """What one variant's whole run cost (every case, not only the paired ones); null when
    unknown."""

    #: int | float: report.md shows the number as written (``12 ms``, not ``12.0 ms``).
    median_ms: int | float | None = Field(default=None, alias="medianMs")
    p95_ms: int | float | None = Field(default=None, alias="p95Ms")
    total_tokens: int | None = Field(default=None, alias="totalTokens")
    estimated_cost: float | None = Field(default=None, alias="estimatedCost")


class VariantCostsDoc(Doc):
    """``variantComparison.costs``: the control's and the candidate's :class:`VariantCostDoc`."""

    control: VariantCostDoc | None = None
    candidate: VariantCostDoc | None = None


class PairedFigureDoc(Doc):
    """One figure of ``pairedCosts`` (goldeval.results.variant_costs): per case means on the
    paired cases both sides measured, and the mean difference (candidate − control)."""

    #: Paired cases where both sides measured the figure.
    cases: int
    #: candidate − control, the mean over the cases, with its 95% case-bootstrap interval.
    difference: float
    ci95: IntervalDoc | None = None
    #: difference / control (null when the control's mean is 0).
    relative: float | None = None
    #: The control's and the candidate's mean per case (of each case's graded attempts).
    control: float
    candidate: float


class ParetoRowDoc(Doc):
    """One variant of ``pareto``: its figures, the variants that dominate it, on the front or
    not."""

    variant: str
    model: str | None = None
    pass_rate: float | None = Field(default=None, alias="passRate")
    graded_attempts: int = Field(alias="gradedAttempts")
    p95_ms: int | float | None = Field(default=None, alias="p95Ms")
    total_tokens: int | None = Field(default=None, alias="totalTokens")
    estimated_cost: float | None = Field(default=None, alias="estimatedCost")
    cost: int | float | None = None
    dominated_by: list[str] = Field(default_factory=list, alias="dominatedBy")
    front: bool


class ParetoDoc(Doc):
    """``pareto``: the session's variants, pass rate vs cost vs p95 latency."""

    #: ``estimatedCost`` when every variant has a price, else ``totalTokens``.
    cost_basis: str = Field(alias="costBasis")
    rows: list[ParetoRowDoc]


class MatrixCellDoc(Doc):
    """One variant's cell of a matrix row: its attempts' statuses in order, and its mean
    latency and tokens over its graded attempts (null: not measured, or not run)."""

    statuses: list[str] = Field(default_factory=list)
    latency_ms: float | None = Field(default=None, alias="latencyMs")
    total_tokens: float | None = Field(default=None, alias="totalTokens")
    #: The beginning of its lowest attempt's answer (null: no answer kept, or not run).
    excerpt: str | None = None


class MatrixRowDoc(Doc):
    case_id: str = Field(alias="caseId")
    cells: list[MatrixCellDoc]


class VariantMatrixDoc(Doc):
    """``matrix``: rows × variants (goldeval.results.variant_matrix); flipped cases first,
    at most 100 rows, ``more`` the cases left out."""

    variants: list[str]
    rows: list[MatrixRowDoc]
    more: int = 0


class DiffSegmentDoc(Doc):
    """One run of words of a word diff: ``=`` both, ``-`` control only, ``+`` candidate only."""

    op: str
    text: str


class SideBySideDoc(Doc):
    """One flipped case of ``answers`` (goldeval.results.variant_answers)."""

    case_id: str = Field(alias="caseId")
    #: ``worse``: the candidate fails where the control passes; ``better``: the other way.
    direction: str
    control: str | None = None
    candidate: str | None = None
    #: An excerpt reached the ``answer_excerpt_chars`` limit: the diff covers the beginning.
    truncated: bool = False
    diff: list[DiffSegmentDoc] = Field(default_factory=list)


class PassAtKCurveDoc(Doc):
    """One variant's pass@k and pass^k by k (goldeval.results.variant_curves)."""

    variant: str
    cases: int
    by_k: list[PassAtKRowDoc] = Field(default_factory=list, alias="byK")


class PairFiguresDoc(Doc):
    """What every compared pair of variants has: the two variants, the cases both graded,
    their pass rates and difference with its interval, and the non-inferiority statistic at
    the manifest's margin (PASS / FAIL / UNDERPOWERED, non_inferiority.NonInferiority)."""

    control: str
    candidate: str
    control_model: str | None = Field(default=None, alias="controlModel")
    candidate_model: str | None = Field(default=None, alias="candidateModel")
    cases: int
    unpaired: int = 0
    control_pass_rate: float | None = Field(default=None, alias="controlPassRate")
    candidate_pass_rate: float | None = Field(default=None, alias="candidatePassRate")
    difference: float | None = None
    ci95: IntervalDoc | None = None
    non_inferiority: str = Field(alias="nonInferiority")
    more_cases: int | None = Field(default=None, alias="moreCases")


class VariantPairDoc(PairFiguresDoc):
    """One pair of ``pairs`` (goldeval.results.variant_pairs): the gated comparison's figures
    on the cases both sides graded, and the McNemar p-value adjusted over the pairs (Holm).
    ``nonInferiority`` is a figure here, not a verdict: only the gated pair's is decided."""

    #: The pair gate.compare names (the only one that gates, through goldeval.verdict).
    gated: bool = False
    control_only: int = Field(alias="controlOnly")
    candidate_only: int = Field(alias="candidateOnly")
    p_value: float | None = Field(default=None, alias="pValue")
    adjusted_p_value: float | None = Field(default=None, alias="adjustedPValue")


class VariantPairsDoc(Doc):
    """``pairs``: each variant against the control (``mode: control``) or all pairs."""

    mode: str
    correction: str
    margin: float
    outcome_rule: str = Field(alias="outcomeRule")
    rows: list[VariantPairDoc]


class VariantComparisonDoc(PairFiguresDoc):
    """``variantComparison``: two variants of one session on the cases both graded
    (goldeval.results.variant_comparison); ``decision`` and ``reason`` are the verdict's
    (goldeval.verdict.variants), which a regate recomputes from the figures."""

    outcome_rule: str = Field(alias="outcomeRule")
    margin: float
    #: Each side's attempts that are no quality outcome (ERROR, SKIPPED): not weighed.
    ungraded_attempts: dict[str, int] | None = Field(default=None, alias="ungradedAttempts")
    #: Cases both sides hold with a different number of attempts (a partial selection).
    uneven_cases: int = Field(default=0, alias="unevenCases")
    mcnemar: McNemarDoc
    flipped_worse: list[str] = Field(default_factory=list, alias="flippedWorse")
    flipped_better: list[str] = Field(default_factory=list, alias="flippedBetter")
    discordance: float | None = None
    minimum_detectable_difference: float | None = Field(
        default=None, alias="minimumDetectableDifference"
    )
    resamples: int
    seed: int
    confidence: float
    #: Each variant's whole-run latency (medianMs, p95Ms), totalTokens and estimatedCost.
    costs: VariantCostsDoc | None = None
    #: latencyMs, totalTokens, estimatedCost compared case by case (null: not measured).
    paired_costs: dict[str, PairedFigureDoc | None] | None = Field(
        default=None, alias="pairedCosts"
    )
    pareto: ParetoDoc | None = None
    matrix: VariantMatrixDoc | None = None
    #: Every pair the session compares (the gated one included), reported, not gated.
    pairs: VariantPairsDoc | None = None
    #: The flipped cases' answers side by side with a word diff (at most 20).
    answers: list[SideBySideDoc] | None = None
    #: Every variant's pass@k / pass^k by k (runs with more than one attempt per case).
    pass_at_k: list[PassAtKCurveDoc] | None = Field(default=None, alias="passAtK")
    decision: str | None = None
    reason: str | None = None
