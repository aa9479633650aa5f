"""How the reports name a metric: one short label per rate of :mod:`goldeval.core.rates`.

The rate names and their order come from ``core.rates`` (``RATE_NAMES``); this module only
adds the words a reader sees. A rate added there without a label here fails
``tests/reports/test_templates.py`` (and ``report.md`` raises a KeyError on it).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from goldeval.core.rates import LOWER_IS_BETTER

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
