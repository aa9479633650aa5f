"""Every pair a variant session compares (issue 35): each selected variant against the
control (``gate.compare.pairs: control``, the default), or every pair (``pairs: all``).

``variantComparison.pairs`` of run.json. Each pair gets the figures of the gated comparison on
the cases both sides graded (goldeval.results.variant_comparison.pair_statistics: difference,
its interval, exact McNemar, the non-inferiority statistic at the manifest's margin), plus the
McNemar p-value adjusted for the number of pairs by Holm's step-down method: with k pairs
tested at 5%, the chance that at least one shows a difference that is not there grows to
about 1 − 0.95^k without it. Figures only: the one pair named by ``gate.compare`` is gated, by
goldeval.verdict.variants; no other pair decides anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any, Literal

from goldeval.core.limits import LimitExceeded, default
from goldeval.results.documents import RunDocument
from goldeval.results.sampling import DEFAULT_RESAMPLES, DEFAULT_SEED, OutcomeRule
from goldeval.results.variant_comparison import case_tallies, pair_statistics

PairsMode = Literal["control", "all"]


def pair_names(names: Sequence[str], control: str, mode: PairsMode) -> list[tuple[str, str]]:
    """(control side, candidate side) of each pair, in the order the variants were selected.
    ``control``: every other variant against the control. ``all``: every pair; a pair with
    the control has it as its control side, any other pair the variant selected first.
    More pairs than the ``variant_pairs`` limit is a LimitExceeded (each pair is a bootstrap
    over every case)."""
    if mode == "control":
        pairs = [(control, name) for name in names if name != control]
    else:
        pairs = [(b, a) if b == control else (a, b) for a, b in combinations(names, 2)]
    limit = int(default("variant_pairs"))
    if len(pairs) > limit:
        raise LimitExceeded(
            "variant_pairs",
            f"gate.compare.pairs: {mode} over {len(names)} variants makes {len(pairs)} pairs, "
            f"at most {limit}",
            hint="select fewer variants with --golden-variants=A,B,... or compare each against "
            "the control (`pairs: control`)",
        )
    return pairs


def holm_adjusted(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment: sort the m p-values, multiply the i-th smallest (from 0)
    by m − i, keep the running maximum, cap at 1. A pair with no discordant case has no
    p-value (None, kept None) but counts as p = 1 among the m, which only makes the others'
    adjustment more cautious."""
    m = len(p_values)
    counted = [1.0 if p is None else p for p in p_values]
    adjusted: list[float | None] = [None] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=counted.__getitem__)):
        running = max(running, min(1.0, (m - rank) * counted[i]))
        adjusted[i] = None if p_values[i] is None else running
    return adjusted


def variant_pairs(
    runs: Sequence[tuple[str, RunDocument | None]],
    *,
    control: str,
    candidate: str,
    mode: PairsMode,
    margin: float,
    rule: OutcomeRule = "majority",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict[str, Any]:
    """``pairs``: ``mode``, ``correction`` ("holm") and one row per pair (the gated one is
    marked ``gated``). ``runs``: every selected variant in the order selected; a variant that
    recorded nothing (None) pairs no case."""
    by_name = dict(runs)
    tallies = {name: case_tallies(run) for name, run in runs}
    rows: list[dict[str, Any]] = []
    for left, right in pair_names([name for name, _ in runs], control, mode):
        stats = pair_statistics(
            tallies[left], tallies[right], margin, rule=rule, resamples=resamples, seed=seed
        )
        rows.append(
            {
                "control": left,
                "candidate": right,
                "controlModel": _model(by_name[left]),
                "candidateModel": _model(by_name[right]),
                "gated": (left, right) == (control, candidate),
                **stats.summary(),
            }
        )
    for row, adjusted in zip(rows, holm_adjusted([r["pValue"] for r in rows]), strict=True):
        row["adjustedPValue"] = adjusted
    return {"mode": mode, "correction": "holm", "margin": margin, "outcomeRule": rule, "rows": rows}


def _model(run: RunDocument | None) -> str | None:
    return run.model if run is not None else None
