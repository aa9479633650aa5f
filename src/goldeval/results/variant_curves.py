"""pass@k and pass^k of every variant of a session, side by side (issue 35):
``variantComparison.passAtK``, the figures the pass@k curve (goldeval.reports.variant_charts)
draws. Each variant's own ``metrics.passAtK`` (goldeval.results.sampling.pass_at_k_table),
copied so one run's document can show every variant's curve. Figures only."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from goldeval.results.documents import RunDocument


def pass_at_k_curves(runs: Sequence[tuple[str, RunDocument]]) -> list[dict[str, Any]] | None:
    """One entry per variant that repeated attempts (``variant``, ``cases``, ``byK``), in the
    order selected; None when no variant did (one attempt per case has no curve)."""
    curves = []
    for name, run in runs:
        table = run.metrics.pass_at_k if run.metrics is not None else None
        if table is not None and table.by_k:
            curves.append(
                {
                    "variant": name,
                    "cases": table.cases,
                    "byK": [row.dump() for row in table.by_k],
                }
            )
    return curves or None
