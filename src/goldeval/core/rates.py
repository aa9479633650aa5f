"""The names of a run's metrics, in one place.

Metrics (``results.metrics``), the comparison and the gate (``verdict``), the manifest's gate
thresholds (``dataset.manifest``) and the reports all read these names from here, so a rate
cannot be added to one list and forgotten in another.
"""

from __future__ import annotations

#: The reference's nine attempt-weighted rates, in the reference's order (reference 4.4).
RATE_NAMES: tuple[str, ...] = (
    "overallPassRate",
    "contractPassRate",
    "judgeAcceptRate",
    "retrievalPassRate",
    "negativeCasePassRate",
    "hallucinationRate",
    "refusalAccuracy",
    "layerAccuracy",
    "ragAccuracy",
)
#: The judge is a soft signal: its rate is reported and compared, never gated.
NEVER_GATED: frozenset[str] = frozenset({"judgeAcceptRate"})
#: The gate's absolute and delta rules, in the reference's gate order (hallucination last).
GATED_RATES: tuple[str, ...] = (
    *(name for name in RATE_NAMES if name not in NEVER_GATED and name != "hallucinationRate"),
    "hallucinationRate",
)
LATENCY_METRIC = "latencyAvgMs"
#: Prefix of the per-grader pass rates (``grader.json_schema``).
GRADER_PREFIX = "grader."
#: Metrics where a smaller value is the better one.
LOWER_IS_BETTER: frozenset[str] = frozenset({"hallucinationRate", LATENCY_METRIC})
