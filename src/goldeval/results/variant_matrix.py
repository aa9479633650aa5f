"""The rows × variants matrix of a variant session (issue 35): for each case, every selected
variant's attempt statuses and its mean latency and tokens over its graded attempts.

Written as ``variantComparison.matrix`` and shown in report.md. Cases that flipped between
the compared pair come first, then cases any variant did not pass, then the rest, each group
in dataset order; at most :data:`MAX_MATRIX_ROWS` rows are kept (``more`` counts the others),
so a 100,000-row dataset does not copy itself into every run.json. Figures only; nothing here
gates.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from goldeval.results.documents import RunDocument
from goldeval.results.variant_costs import CaseFigures

#: Rows the matrix keeps; the cases that differ are listed first, so they are the ones kept.
MAX_MATRIX_ROWS = 100


def variant_matrix(
    runs: Sequence[tuple[str, RunDocument]],
    figures: Mapping[str, CaseFigures],
    flipped: Sequence[str] = (),
    excerpt: Callable[[str, str], str | None] | None = None,
) -> dict[str, Any]:
    """``matrix``: ``variants`` (names, in the order selected), ``rows`` (``caseId`` and one
    cell per variant: ``statuses`` of its attempts in order, ``latencyMs`` and
    ``totalTokens``, each the mean over its graded attempts, null when not measured or not
    run) and ``more`` (cases left out past :data:`MAX_MATRIX_ROWS`). ``figures``: each
    variant's :func:`goldeval.results.variant_costs.case_figures`; ``flipped``: the compared
    pair's flipped case ids, listed first; ``excerpt(variant, case_id)``: the answer excerpt
    the run kept (goldeval.results.run_document.RunCollector.excerpt), a cell's ``excerpt``."""
    statuses = {
        name: {case.case_id: [a.status for a in case.attempts] for case in run.cases}
        for name, run in runs
    }
    order: list[str] = []
    for _, run in runs:
        order.extend(case.case_id for case in run.cases)
    order = list(dict.fromkeys(order))
    first = [cid for cid in dict.fromkeys(flipped) if cid in set(order)]
    listed = set(first)
    not_passed = [
        cid
        for cid in order
        if cid not in listed
        and any(set(statuses[name].get(cid, ["MISSING"])) != {"PASS"} for name, _ in runs)
    ]
    listed.update(not_passed)
    ranked = first + not_passed + [cid for cid in order if cid not in listed]
    rows = [
        {
            "caseId": cid,
            "cells": [
                {
                    **_cell(statuses[name].get(cid), figures.get(name), cid),
                    "excerpt": excerpt(name, cid) if excerpt is not None else None,
                }
                for name, _ in runs
            ],
        }
        for cid in ranked[:MAX_MATRIX_ROWS]
    ]
    return {
        "variants": [name for name, _ in runs],
        "rows": rows,
        "more": max(0, len(ranked) - MAX_MATRIX_ROWS),
    }


def _cell(statuses: list[str] | None, figures: CaseFigures | None, case_id: str) -> dict[str, Any]:
    def mean(name: str) -> float | None:
        return (figures or {}).get(name, {}).get(case_id)

    return {
        "statuses": statuses or [],
        "latencyMs": mean("latencyMs"),
        "totalTokens": mean("totalTokens"),
    }
