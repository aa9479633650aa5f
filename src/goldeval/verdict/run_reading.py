"""Reading run documents for a comparison and the gate: attempt counters, rates, metric values.

Pure functions over the typed run document (``run.json`` and baselines are the same document,
reference section 5.1). ``latencyAvgMs`` is undefined when the run has no latency samples (the
reference would compare its placeholder 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from goldeval.core.models import Rate
from goldeval.core.rates import GRADER_PREFIX, LATENCY_METRIC
from goldeval.results.documents import Metrics, RateDoc, RunDocument


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


def as_rate(value: RateDoc | None) -> Rate | None:
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
        return as_rate(metrics.graders.get(name[len(GRADER_PREFIX) :]))
    field = _METRIC_FIELDS.get(name)
    if field is None:
        return _extra_rate((metrics.model_extra or {}).get(name))
    value = getattr(metrics, field)
    return as_rate(value) if isinstance(value, RateDoc) else None


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
