"""How the reports name a metric: one short label per rate of :mod:`goldeval.core.rates`.

The rate names and their order come from ``core.rates`` (``RATE_NAMES``); this module only
adds the words a reader sees. A rate added there without a label here fails
``tests/reports/test_templates.py`` (and ``report.md`` raises a KeyError on it).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from goldeval.core.rates import LOWER_IS_BETTER, RATE_NAMES
from goldeval.dataset.profiles import JAVA_AUTOTEST, reported_rates
from goldeval.results.documents import RateDoc, RunDocument

#: Label of each rate in report.md, the pytest-html summary and the site's run pages.
RATE_LABELS: Mapping[str, str] = MappingProxyType(
    {
        "overallPassRate": "Overall",
        "contractPassRate": "Contract",
        "judgeAcceptRate": "Judge",
        "retrievalPassRate": "Retrieval",
        "negativeCasePassRate": "Negative",
        "hallucinationRate": "Hallucination (fail rate)",
        "refusalAccuracy": "Refusal",
        "layerAccuracy": "Layer",
        "ragAccuracy": "RAG",
        # Not a rate of RATE_NAMES: the share of cases whose attempts disagreed.
        "unstableCaseRate": "Unstable cases",
    }
)


def rate_label(name: str) -> str:
    """The label of a metric, or its name when it has none."""
    return RATE_LABELS.get(name, name)


#: Title of a trend chart on the history site (the metric's name when it has none).
CHART_LABELS: Mapping[str, str] = MappingProxyType(
    {
        "overallPassRate": "Overall pass rate",
        "contractPassRate": "Contract pass rate",
        "retrievalPassRate": "Retrieval pass rate",
        "hallucinationRate": "Hallucination rate",
    }
)


def chart_label(name: str) -> str:
    """A trend chart's title; a metric where smaller is better says so."""
    label = CHART_LABELS.get(name, name)
    return f"{label} (lower is better)" if name in LOWER_IS_BETTER else label


def run_profile(run: RunDocument) -> str:
    """The profile a run document ran under (one written before profiles: java-autotest)."""
    name = run.protocol.profile if run.protocol is not None else None
    return name if name is not None else JAVA_AUTOTEST


def shown_rates(run: RunDocument) -> tuple[str, ...]:
    """The rates a report shows for ``run``: the nine of java-autotest; for another profile
    its own (a generic run: overall, and the judge's only when the judge ran)."""
    profile = run_profile(run)
    if profile == JAVA_AUTOTEST:
        return RATE_NAMES
    metrics = run.metrics
    return tuple(
        name
        for name in reported_rates(profile)
        if name == "overallPassRate" or _counted(metrics.rate(name) if metrics else None)
    )


def _counted(rate: RateDoc | None) -> bool:
    return rate is not None and rate.total > 0


def shows_weighted_score(run: RunDocument) -> bool:
    """The weighted score mixes the reference's rates: only java-autotest reports show it."""
    return run_profile(run) == JAVA_AUTOTEST
