"""Baseline comparison: comparability, per-case classes, metric deltas and McNemar.

Pure functions over JSON-plain run documents (``run.json`` and baselines are the same document,
reference section 5.1), no pytest imports. The quality gate (``goldeval.verdict.gate``) builds on
this.

Comparability
    Two documents that both carry our ``protocol`` object are comparable when every protocol key
    agrees (:data:`PROTOCOL_KEYS`; ``selectedCaseIds`` compared as sets). ``provider``, ``model``,
    ``judgeEnabled`` and ``judgeModel`` take part only when both runs are LIVE, and
    ``judgeModel`` only when either side has the judge on. A document without ``protocol`` (for
    example a reference baseline) is checked with the reference rules of section 5.2
    (``datasetVersion``, ``datasetHash``, ``packDatasetVersion``/``packHash`` when both present,
    judge, ``configuration.mode``/``repetitions``/``includeRed``). Unlike the reference, which
    stops at the first failing check, every differing key is reported.

Per-case classes (section 5.3), over the union of case ids, baseline order first:
    ``ADDED`` (only in the candidate), ``REMOVED`` (only in the baseline); either side ERROR →
    ``UNCHANGED_ERROR`` / ``NEW_ERROR`` / ``INFRA_RESOLVED``; neither side PASS/FAIL →
    ``UNCHANGED_SKIPPED`` (both SKIPPED) else ``UNCHANGED_FAIL``; PASS/PASS ``UNCHANGED_PASS``,
    FAIL/FAIL ``UNCHANGED_FAIL``, PASS→FAIL and PASS→SKIPPED ``NEW_FAILURE``, FAIL→PASS and
    SKIPPED→PASS ``RECOVERED``; anything else ``UNCHANGED_FAIL``.

Metric deltas: the 9 reference rates, ``latencyAvgMs`` and every ``grader.<name>`` present on
both sides; ``hallucinationRate`` and latency are lower-is-better; |Δ| < 1e-12 is UNCHANGED; an
undefined side gives ``delta`` null and UNCHANGED. ``latencyAvgMs`` is undefined when the run has
no latency samples (the reference would compare its placeholder 0).

McNemar (section 5.4) is informational only: ``n01`` = NEW_FAILURE count, ``n10`` = RECOVERED
count, χ² without continuity correction and the exact two-sided binomial p-value computed with
integers and fractions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from fractions import Fraction
from typing import Any, NamedTuple

from pydantic import Field

from goldeval.core.models import Rate, Record
from goldeval.core.rates import GRADER_PREFIX, LATENCY_METRIC, LOWER_IS_BETTER, RATE_NAMES
from goldeval.core.stats import binomial_two_sided
from goldeval.results.documents import Case, Metrics, RateDoc, RunDocument

#: Tolerance of every comparison of rates (reference: 1e-12).
EPSILON = 1e-12

#: The reference's nine rates, in the reference's order.
REFERENCE_RATES: tuple[str, ...] = RATE_NAMES

#: Keys of our ``protocol`` object, in report order.
PROTOCOL_KEYS: tuple[str, ...] = (
    "datasetId",
    "datasetHash",
    "packId",
    "packHash",
    "mode",
    "attempts",
    "selectedAttempts",
    "selectedCaseIds",
    "graderConfigHash",
    "provider",
    "model",
    "judgeEnabled",
    "judgeModel",
)
#: Protocol keys that only take part in comparability when both runs are LIVE.
LIVE_ONLY_KEYS: tuple[str, ...] = ("provider", "model", "judgeEnabled", "judgeModel")
#: Configuration fields never listed as configuration differences (reference 5.2).
IGNORED_CONFIGURATION_KEYS: frozenset[str] = frozenset({"outputDir", "artifactMode", "javaVersion"})

#: How many case ids a selectedCaseIds message shows per side before "+N more".
MAX_IDS_SHOWN = 5

DATASET_VERSIONING_DOC = "docs/dataset-versioning.md"

QUALITY_STATUSES = frozenset({"PASS", "FAIL"})


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
        """JSON-plain camelCase dict; unlike run records, nulls are kept (``"delta": null``)."""
        return self.model_dump(by_alias=True, mode="json")

    def case_ids(self, case_class: CaseClass) -> list[str]:
        """Ids of the cases in one class, in union order."""
        return [c.case_id for c in self.cases if c.case_class is case_class]

    def metric(self, name: str) -> MetricDelta | None:
        for m in self.metrics:
            if m.name == name:
                return m
        return None


# ------------------------------------------------------------------------------------------
# Reading run documents


class AttemptCounts(NamedTuple):
    total: int
    passed: int
    failed: int
    skipped: int
    error: int

    @property
    def quality(self) -> int:
        """PASS + FAIL attempts: the ones that say something about quality."""
        return self.passed + self.failed


def attempt_counts(run: RunDocument) -> AttemptCounts:
    """Attempt counters of a run: the document's counters, else counted from ``cases[]``."""
    passed, failed = run.attempts_passed, run.attempts_failed
    skipped, error = run.attempts_skipped, run.attempts_error
    if passed is not None and failed is not None and skipped is not None and error is not None:
        total = run.attempts_total
        if total is None:
            total = passed + failed + skipped + error
        return AttemptCounts(total, passed, failed, skipped, error)
    counted = {"PASS": 0, "FAIL": 0, "SKIPPED": 0, "ERROR": 0}
    total = 0
    for case in run.cases:
        for attempt in case.attempts:
            total += 1
            if attempt.status in counted:
                counted[attempt.status] += 1
    return AttemptCounts(
        total, counted["PASS"], counted["FAIL"], counted["SKIPPED"], counted["ERROR"]
    )


def cases_total(run: RunDocument) -> int:
    """``casesTotal`` of a run, else the length of ``cases[]``."""
    return run.cases_total if run.cases_total is not None else len(run.cases)


def _as_rate(value: RateDoc | None) -> Rate | None:
    return Rate(hits=value.hits, total=value.total) if value is not None else None


def _extra_rate(value: Any) -> Rate | None:
    """A rate under a key the typed :class:`Metrics` does not name (a newer writer's)."""
    if not isinstance(value, Mapping):
        return None
    hits, total = value.get("hits"), value.get("total")
    if any(isinstance(v, bool) or not isinstance(v, int) for v in (hits, total)):
        return None
    return Rate(hits=hits, total=total)


#: JSON name of a ``metrics`` field → its attribute on :class:`Metrics`.
_METRIC_FIELDS = {(info.alias or name): name for name, info in Metrics.model_fields.items()}


def rate_of(run: RunDocument | None, name: str) -> Rate | None:
    """The ``{hits,total}`` of a reference rate or ``grader.<name>``; None when absent.

    A present rate may still be undefined (``total == 0``); ``Rate.rate`` is then None. An
    optional ``"rate"`` key next to hits/total is ignored: the value is always recomputed.
    """
    if run is None or run.metrics is None:
        return None
    metrics = run.metrics
    if name.startswith(GRADER_PREFIX):
        if metrics.graders is None:
            return None
        return _as_rate(metrics.graders.get(name[len(GRADER_PREFIX) :]))
    field = _METRIC_FIELDS.get(name)
    if field is None:
        return _extra_rate((metrics.model_extra or {}).get(name))
    value = getattr(metrics, field)
    return _as_rate(value) if isinstance(value, RateDoc) else None


def grader_names(run: RunDocument | None) -> list[str]:
    """Names of the general graders with a rate in ``metrics.graders`` (document order)."""
    if run is None or run.metrics is None or run.metrics.graders is None:
        return []
    return list(run.metrics.graders)


def metric_value(run: RunDocument | None, name: str) -> float | None:
    """Value of a rate, ``grader.<name>`` or ``latencyAvgMs``; None when absent or undefined."""
    if run is None:
        return None
    if name == LATENCY_METRIC:
        latency = run.metrics.latency if run.metrics is not None else None
        if latency is None:
            return None
        avg = latency.get("avgMs")
        if isinstance(avg, bool) or not isinstance(avg, (int, float)):
            return None
        if latency.get("samples") == 0:
            return None
        return float(avg)
    rate = rate_of(run, name)
    return rate.rate if rate is not None else None


def _protocol(doc: RunDocument) -> dict[str, Any] | None:
    """The ``protocol`` object as JSON: comparability is key by key, extra keys included
    (``selectedAttempts``), and a key absent differs from one present."""
    return doc.protocol.dump() if doc.protocol is not None else None


def _configuration(doc: RunDocument) -> dict[str, Any] | None:
    """The ``configuration`` object as JSON (every key takes part in its differences)."""
    return doc.configuration.dump() if doc.configuration is not None else None


def normal_mode(mode: Any) -> str | None:
    """DETERMINISTIC or LIVE (BENCHMARK counts as LIVE); anything else is unknown (None)."""
    if not isinstance(mode, str):
        return None
    upper = mode.upper()
    if upper in ("LIVE", "BENCHMARK"):
        return "LIVE"
    if upper in ("DETERMINISTIC", "FIXTURE"):
        return "DETERMINISTIC"
    return None


def run_mode(doc: RunDocument) -> str | None:
    """``protocol.mode`` or ``configuration.mode`` normalised to DETERMINISTIC/LIVE, else None."""
    if doc.protocol is not None and normal_mode(doc.protocol.mode) is not None:
        return normal_mode(doc.protocol.mode)
    configuration = doc.configuration
    return normal_mode(configuration.mode) if configuration is not None else None


def _critical_categories(case: Case) -> list[str]:
    """Categories of CRITICAL violations in a case's taxonomy or any contract taxonomy."""
    taxonomies: list[Any] = [case.taxonomy]
    if case.contract is not None:
        taxonomies.append(case.contract.get("taxonomy"))
    for attempt in case.attempts:
        if attempt.contract is not None:
            taxonomies.append(attempt.contract.get("taxonomy"))
    found: list[str] = []
    for taxonomy in taxonomies:
        if not isinstance(taxonomy, list):
            continue
        for violation in taxonomy:
            if isinstance(violation, Mapping) and violation.get("severity") == "CRITICAL":
                category = str(violation.get("category") or "CRITICAL")
                if category not in found:
                    found.append(category)
    return found


def _success(case: Case) -> Rate:
    rate = _as_rate(case.success_rate)
    if rate is not None:
        return rate
    statuses = [a.status for a in case.attempts]
    return Rate(
        hits=sum(1 for s in statuses if s == "PASS"),
        total=sum(1 for s in statuses if s in QUALITY_STATUSES),
    )


# ------------------------------------------------------------------------------------------
# Comparability


def _fmt(value: Any) -> str:
    """A value as the reference prints it: null, true/false, plain strings."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value)


def _ids_text(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:MAX_IDS_SHOWN])
    more = len(ids) - MAX_IDS_SHOWN
    return f"{shown}, … +{more} more" if more > 0 else shown


def _mismatch(key: str, baseline: Any, candidate: Any) -> ProtocolDifference:
    return ProtocolDifference(
        key=key,
        baseline=baseline,
        candidate=candidate,
        message=f"{key} mismatch: baseline {_fmt(baseline)} vs candidate {_fmt(candidate)}",
    )


def _version_bump(
    id_key: str, dataset_id: Any, hash_key: str, baseline: Any, candidate: Any
) -> ProtocolDifference:
    return ProtocolDifference(
        key=hash_key,
        baseline=baseline,
        candidate=candidate,
        message=(
            f"dataset changed without a version bump: {id_key} {_fmt(dataset_id)} has hash "
            f"{_fmt(baseline)} in the baseline and {_fmt(candidate)} now; bump `version` in the "
            f"manifest (see {DATASET_VERSIONING_DOC})"
        ),
    )


def _id_list(value: Any) -> list[str] | None:
    if not isinstance(value, (list, tuple)):
        return None
    return [str(v) for v in value]


def _selected_ids_difference(baseline: Any, candidate: Any) -> ProtocolDifference | None:
    b_ids, c_ids = _id_list(baseline), _id_list(candidate)
    if b_ids is None or c_ids is None:
        if b_ids is None and c_ids is None and baseline == candidate:
            return None
        return _mismatch("selectedCaseIds", baseline, candidate)
    b_set, c_set = set(b_ids), set(c_ids)
    if b_set == c_set:
        return None
    only_b = sorted(b_set - c_set)
    only_c = sorted(c_set - b_set)
    parts = []
    if only_b:
        parts.append(f"{len(only_b)} only in the baseline ({_ids_text(only_b)})")
    if only_c:
        parts.append(f"{len(only_c)} only in the candidate ({_ids_text(only_c)})")
    return ProtocolDifference(
        key="selectedCaseIds",
        baseline=sorted(b_set),
        candidate=sorted(c_set),
        message=(
            f"selectedCaseIds mismatch: baseline {len(b_set)} cases vs candidate "
            f"{len(c_set)} cases; " + ", ".join(parts)
        ),
    )


def _attempts_text(value: Any) -> str:
    if not isinstance(value, dict):
        return "every attempt of every case"
    runs = sum(len(v) for v in value.values() if isinstance(v, list))
    return f"{runs} attempts of {len(value)} cases (a partial attempt selection)"


def _attempts_difference(baseline: Any, candidate: Any) -> ProtocolDifference:
    """selectedAttempts (absent = every attempt): summarised, never the whole map."""
    return ProtocolDifference(
        key="selectedAttempts",
        baseline=baseline,
        candidate=candidate,
        message=(
            f"selectedAttempts mismatch: baseline {_attempts_text(baseline)} vs candidate "
            f"{_attempts_text(candidate)}"
        ),
    )


def _live_keys_in_play(b: Mapping[str, Any], c: Mapping[str, Any]) -> set[str]:
    """The live-only keys that take part in comparability for these two protocols."""
    if not (normal_mode(b.get("mode")) == "LIVE" and normal_mode(c.get("mode")) == "LIVE"):
        return set()
    keys = {"provider", "model", "judgeEnabled"}
    if b.get("judgeEnabled") is True or c.get("judgeEnabled") is True:
        keys.add("judgeModel")
    return keys


def _protocol_differences(b: Mapping[str, Any], c: Mapping[str, Any]) -> list[ProtocolDifference]:
    live_keys = _live_keys_in_play(b, c)
    diffs: list[ProtocolDifference] = []
    for key in PROTOCOL_KEYS:
        if key in LIVE_ONLY_KEYS and key not in live_keys:
            continue
        bv, cv = b.get(key), c.get(key)
        if key == "selectedCaseIds":
            diff = _selected_ids_difference(bv, cv)
            if diff is not None:
                diffs.append(diff)
            continue
        if key == "selectedAttempts":
            if bv != cv:
                diffs.append(_attempts_difference(bv, cv))
            continue
        if key == "mode":
            bm, cm = normal_mode(bv) or bv, normal_mode(cv) or cv
            if bm != cm:
                diffs.append(_mismatch(key, bv, cv))
            continue
        if bv == cv and type(bv) is type(cv):
            continue
        if key == "datasetHash" and b.get("datasetId") == c.get("datasetId"):
            diffs.append(_version_bump("datasetId", b.get("datasetId"), key, bv, cv))
        else:
            diffs.append(_mismatch(key, bv, cv))
    return diffs


def _reference_view(doc: RunDocument) -> dict[str, Any]:
    """The reference's comparability fields, filled from ``protocol`` where a run lacks them."""
    protocol = _protocol(doc) or {}
    configuration = _configuration(doc) or {}
    if not configuration and protocol:
        configuration = {
            "mode": protocol.get("mode"),
            "repetitions": protocol.get("attempts"),
            "judgeEnabled": protocol.get("judgeEnabled"),
            "judgeModel": protocol.get("judgeModel"),
        }
    has_configuration = bool(configuration)

    def pick(top: str | None, proto: str) -> Any:
        return top if top is not None else protocol.get(proto)

    return {
        "datasetVersion": pick(doc.dataset_version, "datasetId"),
        "datasetHash": pick(doc.dataset_hash, "datasetHash"),
        "packDatasetVersion": pick(doc.pack_dataset_version, "packId"),
        "packHash": pick(doc.pack_hash, "packHash"),
        "configuration": configuration if has_configuration else None,
    }


def _reference_differences(
    baseline: RunDocument, candidate: RunDocument
) -> list[ProtocolDifference]:
    """Reference section 5.2 checks 2–7, every failing one reported."""
    b, c = _reference_view(baseline), _reference_view(candidate)
    diffs: list[ProtocolDifference] = []
    bv, cv = b["datasetVersion"], c["datasetVersion"]
    if bv is None or cv is None or bv != cv:
        diffs.append(_mismatch("datasetVersion", bv, cv))
    if b["datasetHash"] != c["datasetHash"]:
        if bv is not None and bv == cv:
            diffs.append(
                _version_bump(
                    "datasetVersion", bv, "datasetHash", b["datasetHash"], c["datasetHash"]
                )
            )
        else:
            diffs.append(_mismatch("datasetHash", b["datasetHash"], c["datasetHash"]))
    for key in ("packDatasetVersion", "packHash"):
        if b[key] is not None and c[key] is not None and b[key] != c[key]:
            diffs.append(_mismatch(key, b[key], c[key]))
    bc, cc = b["configuration"], c["configuration"]
    if bc is not None and cc is not None:
        if bc.get("judgeEnabled") is True or cc.get("judgeEnabled") is True:
            for key in ("judgeEnabled", "judgeModel"):
                if bc.get(key) != cc.get(key):
                    diffs.append(_mismatch(key, bc.get(key), cc.get(key)))
        bm, cm = normal_mode(bc.get("mode")), normal_mode(cc.get("mode"))
        if bm is not None and cm is not None and bm != cm:
            diffs.append(_mismatch("mode", bc.get("mode"), cc.get("mode")))
        for key in ("repetitions", "includeRed"):
            # A key absent on one side (a protocol-only run has no includeRed) is not compared.
            if key in bc and key in cc and bc.get(key) != cc.get(key):
                diffs.append(_mismatch(key, bc.get(key), cc.get(key)))
    return diffs


def protocol_differences(baseline: RunDocument, candidate: RunDocument) -> list[ProtocolDifference]:
    """Every key on which the two runs are not comparable; empty when they are comparable.

    With a ``protocol`` on both sides the protocol keys decide; otherwise the reference's
    section 5.2 checks apply (values missing at the top level are taken from ``protocol``).
    """
    b, c = _protocol(baseline), _protocol(candidate)
    if b is not None and c is not None:
        return _protocol_differences(b, c)
    return _reference_differences(baseline, candidate)


def configuration_differences(
    baseline: RunDocument,
    candidate: RunDocument,
    exclude: Iterable[str] = (),
) -> list[str]:
    """Informational ``k: a vs b`` lines for settings that may differ between comparable runs.

    The live-only protocol keys when they do not take part (e.g. model/provider of a fixture
    run), then ``configuration`` fields other than outputDir/artifactMode/javaVersion. Keys in
    ``exclude`` (already reported as protocol differences) are left out.
    """
    skip = set(exclude) | IGNORED_CONFIGURATION_KEYS
    if "attempts" in skip:
        skip.add("repetitions")  # configuration's name for the protocol's attempts
    lines: dict[str, str] = {}
    b, c = _protocol(baseline), _protocol(candidate)
    if b is not None and c is not None:
        in_play = _live_keys_in_play(b, c)
        for key in LIVE_ONLY_KEYS:
            if key not in in_play and key not in skip and b.get(key) != c.get(key):
                lines[key] = f"{key}: {_fmt(b.get(key))} vs {_fmt(c.get(key))}"
    bc, cc = _configuration(baseline), _configuration(candidate)
    if bc is not None and cc is not None:
        keys = list(bc) + [k for k in cc if k not in bc]
        for key in keys:
            if key in skip or key in lines:
                continue
            if bc.get(key) != cc.get(key):
                lines[key] = f"{key}: {_fmt(bc.get(key))} vs {_fmt(cc.get(key))}"
    return list(lines.values())


# ------------------------------------------------------------------------------------------
# Per-case classes, metric deltas, McNemar


def classify(baseline_status: str | None, candidate_status: str | None) -> CaseClass:
    """Class of one case from its two statuses (None = the case is absent on that side)."""
    b, c = baseline_status, candidate_status
    if b is None:
        return CaseClass.ADDED
    if c is None:
        return CaseClass.REMOVED
    if b == "ERROR" or c == "ERROR":
        if b == c:
            return CaseClass.UNCHANGED_ERROR
        return CaseClass.NEW_ERROR if c == "ERROR" else CaseClass.INFRA_RESOLVED
    b_quality, c_quality = b in QUALITY_STATUSES, c in QUALITY_STATUSES
    if not b_quality and not c_quality:
        both_skipped = b == "SKIPPED" and c == "SKIPPED"
        return CaseClass.UNCHANGED_SKIPPED if both_skipped else CaseClass.UNCHANGED_FAIL
    if b_quality and c_quality:
        if b == c:
            return CaseClass.UNCHANGED_PASS if b == "PASS" else CaseClass.UNCHANGED_FAIL
        return CaseClass.NEW_FAILURE if b == "PASS" else CaseClass.RECOVERED
    if b == "PASS" and c == "SKIPPED":
        return CaseClass.NEW_FAILURE
    if c == "PASS":
        return CaseClass.RECOVERED
    return CaseClass.UNCHANGED_FAIL


def compare_cases(baseline: RunDocument, candidate: RunDocument) -> list[CaseComparison]:
    """Per-case pairs over the union of case ids, baseline order first (section 5.3)."""
    b_cases = {c.case_id: c for c in baseline.cases}
    c_cases = {c.case_id: c for c in candidate.cases}
    order = list(b_cases) + [cid for cid in c_cases if cid not in b_cases]
    pairs: list[CaseComparison] = []
    for cid in order:
        b, c = b_cases.get(cid), c_cases.get(cid)
        b_status = b.status if b is not None else None
        c_status = c.status if c is not None else None
        critical = _critical_categories(c) if c is not None else []
        pairs.append(
            CaseComparison.model_validate(
                {
                    "caseId": cid,
                    "class": classify(b_status, c_status),
                    "baselineStatus": b_status,
                    "candidateStatus": c_status,
                    "baselineSuccess": _success(b) if b is not None else None,
                    "candidateSuccess": _success(c) if c is not None else None,
                    "critical": bool(critical),
                    "criticalCategories": critical,
                }
            )
        )
    return pairs


def metric_delta(name: str, baseline: float | None, candidate: float | None) -> MetricDelta:
    inverted = name in LOWER_IS_BETTER
    if baseline is None or candidate is None:
        return MetricDelta(name=name, baseline=baseline, candidate=candidate, inverted=inverted)
    delta = candidate - baseline
    if abs(delta) < EPSILON:
        direction = Direction.UNCHANGED
    elif (delta > 0) != inverted:
        direction = Direction.IMPROVED
    else:
        direction = Direction.REGRESSED
    return MetricDelta(
        name=name,
        baseline=baseline,
        candidate=candidate,
        delta=delta,
        direction=direction,
        inverted=inverted,
    )


def metric_deltas(baseline: RunDocument, candidate: RunDocument) -> list[MetricDelta]:
    """Deltas of the 9 rates, ``latencyAvgMs`` and every grader rate present on both sides."""
    names: list[str] = [*REFERENCE_RATES, LATENCY_METRIC]
    candidate_graders = set(grader_names(candidate))
    names += sorted(GRADER_PREFIX + g for g in grader_names(baseline) if g in candidate_graders)
    return [metric_delta(n, metric_value(baseline, n), metric_value(candidate, n)) for n in names]


def mcnemar(n01: int, n10: int) -> McNemar:
    """McNemar on the discordant pairs; exact two-sided binomial p (section 5.4).

    ``p = min(1, 2·Σ_{i=0..min(n01, n−n01)} C(n,i)·0.5ⁿ)``, computed exactly with integers.
    """
    n = n01 + n10
    if n == 0:
        return McNemar(n01=0, n10=0, chi_square=0.0, p_value=None, note="no discordant pairs")
    chi_square = Fraction((n01 - n10) ** 2, n)
    p_value = binomial_two_sided(n, min(n01, n - n01))
    return McNemar(
        n01=n01,
        n10=n10,
        chi_square=float(chi_square),
        p_value=float(p_value),
        note="exact two-sided binomial test on discordant pairs; informational, never a gate",
    )


def _class_counts(pairs: Iterable[CaseComparison]) -> dict[str, int]:
    counts = {cls.value: 0 for cls in CaseClass}
    for pair in pairs:
        counts[pair.case_class.value] += 1
    return counts


def _run_id(doc: RunDocument | None) -> str | None:
    return doc.run_id if doc is not None else None


def compare(baseline: RunDocument | None, candidate: RunDocument | None) -> ComparisonResult:
    """Compare a candidate run with a baseline.

    Not comparable → ``COMPARISON_INVALID`` with every reason and no deltas or classes (no
    invented percentages). Comparable → NO_REGRESSION with per-case classes, metric deltas and
    McNemar; a gate attached later (``goldeval.verdict.gate.attach_gate``) may turn it into
    REGRESSION.
    """
    if baseline is None or candidate is None:
        return ComparisonResult(
            decision=Decision.COMPARISON_INVALID,
            invalid_reasons=["baseline and candidate are required"],
            baseline_run_id=_run_id(baseline),
            candidate_run_id=_run_id(candidate),
        )
    diffs = protocol_differences(baseline, candidate)
    common: dict[str, Any] = {
        "protocol_differences": diffs,
        "configuration_differences": configuration_differences(
            baseline, candidate, exclude=[d.key for d in diffs]
        ),
        "baseline_run_id": _run_id(baseline),
        "candidate_run_id": _run_id(candidate),
    }
    if diffs:
        return ComparisonResult(
            decision=Decision.COMPARISON_INVALID,
            invalid_reasons=[d.message for d in diffs],
            **common,
        )
    pairs = compare_cases(baseline, candidate)
    counts = _class_counts(pairs)
    return ComparisonResult(
        decision=Decision.NO_REGRESSION,
        cases=pairs,
        counts=counts,
        unchanged_pass=counts[CaseClass.UNCHANGED_PASS.value],
        unchanged_fail=counts[CaseClass.UNCHANGED_FAIL.value],
        regressions=counts[CaseClass.NEW_FAILURE.value],
        improvements=counts[CaseClass.RECOVERED.value],
        metrics=metric_deltas(baseline, candidate),
        mcnemar=mcnemar(counts[CaseClass.NEW_FAILURE.value], counts[CaseClass.RECOVERED.value]),
        **common,
    )


#: The label of a comparable comparison that found new failures the gate did not weigh.
NEW_FAILURES_NOT_GATED = "NEW_FAILURES_NOT_GATED"


def comparison_label(cmp: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """What every surface shows for a comparison (dumped form): a label and, when the label
    needs one, a sentence saying why.

    Never ``NO_REGRESSION`` when the comparison found new failures: a gate of thresholds only
    (or no gate) does not weigh them, so the label says what the comparison found, that the
    gate does not weigh it, and how to make it (``allowedRegression``).
    """
    if not cmp:
        return "no baseline", None
    decision = str(cmp.get("decision") or "")
    if decision != Decision.NO_REGRESSION.value:
        return decision, None
    counts = cmp.get("counts") or {}
    new = counts.get(CaseClass.NEW_FAILURE.value, 0) if isinstance(counts, Mapping) else 0
    if not new:
        return decision, None
    gated = cmp.get("qualityGate") is not None
    return NEW_FAILURES_NOT_GATED, (
        f"the comparison found {new} new failure{'s' if new != 1 else ''}; "
        + ("the gate does not weigh them" if gated else "no gate weighs them")
        + " (add allowedRegression: 0.0 to the mode's gate in dataset.yaml to fail on them)"
    )
