"""The verdict's functions for tests that write run documents as JSON dicts (run.json shape).

The verdict reads typed documents (:class:`goldeval.results.documents.RunDocument`); every
caller types a run once where it enters (``typed_run``). These wrappers do the same for test
documents, so a test states a run as the JSON a user's file holds, and the check that the
JSON is a valid run document is part of what it exercises.
"""

from __future__ import annotations

from typing import Any

from goldeval.results.documents import RunDocument, typed_run
from goldeval.verdict import comparison as _comparison
from goldeval.verdict import decide as _decide
from goldeval.verdict import gate as _gate
from goldeval.verdict.comparison import ComparisonResult, MetricDelta, ProtocolDifference
from goldeval.verdict.decide import Verdict
from goldeval.verdict.gate import GateResult, GateRule, PolicyLike


def typed(doc: Any) -> RunDocument:
    return typed_run(doc)


def maybe(doc: Any) -> RunDocument | None:
    return typed_run(doc) if doc is not None else None


def compare(baseline: Any, candidate: Any) -> ComparisonResult:
    return _comparison.compare(maybe(baseline), maybe(candidate))


def protocol_differences(baseline: Any, candidate: Any) -> list[ProtocolDifference]:
    return _comparison.protocol_differences(typed(baseline), typed(candidate))


def metric_value(run: Any, name: str) -> float | None:
    return _comparison.metric_value(maybe(run), name)


def metric_deltas(baseline: Any, candidate: Any) -> list[MetricDelta]:
    return _comparison.metric_deltas(typed(baseline), typed(candidate))


def evaluate(
    run: Any,
    policy: PolicyLike,
    baseline: Any = None,
    comparison: ComparisonResult | None = None,
    *,
    live: bool = False,
) -> GateResult:
    return _gate.evaluate(typed(run), policy, maybe(baseline), comparison, live=live)


def evaluate_fixture(
    run: Any, policy: PolicyLike, baseline: Any = None, comparison: ComparisonResult | None = None
) -> GateResult:
    return _gate.evaluate_fixture(typed(run), policy, maybe(baseline), comparison)


def evaluate_live(
    run: Any, policy: PolicyLike, baseline: Any, comparison: ComparisonResult | None = None
) -> GateResult:
    return _gate.evaluate_live(typed(run), policy, maybe(baseline), comparison)


def incomplete_rule(run: Any) -> GateRule:
    return _gate.incomplete_rule(typed(run))


def decide(run: Any, *, baseline: Any, **kwargs: Any) -> Verdict:
    return _decide.decide(typed(run), baseline=maybe(baseline), **kwargs)
