"""Metrics, comparison and gate over 1,000,000 attempt records vs loading them from JSON.

    python benchmarks/bench_aggregate.py [--attempts 1000000] [--per-case 5]

Builds a run document of N attempt records (per-case groups of --per-case attempts) in
memory, writes it as JSON, then times side by side: ``json.loads`` of that text (the cost of
merely loading the records) against metrics + comparison (with itself as baseline) + gate
over the loaded records. Target: aggregation cheaper than loading.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _measure import table

from goldeval.results.metrics import compute_metrics
from goldeval.results.rollup import count
from goldeval.verdict.comparison import compare
from goldeval.verdict.gate import evaluate


def make_run(attempts: int, per_case: int, seed: int) -> dict:
    rng = random.Random(seed)
    cases = []
    for c in range(attempts // per_case):
        status_list = ["PASS" if rng.random() < 0.9 else "FAIL" for _ in range(per_case)]
        atts = []
        for i, s in enumerate(status_list, start=1):
            ok = s == "PASS"
            atts.append(
                {
                    "index": i,
                    "status": s,
                    "durationMs": rng.randint(50, 900),
                    "contract": {
                        "passed": ok,
                        "violations": [] if ok else ["x missing 'y'"],
                        "refuseChecked": False,
                        "refuseOk": False,
                        "ragChecked": True,
                        "ragOk": ok,
                        "layerChecked": True,
                        "layerOk": True,
                        "hallucinationHit": False,
                        "taxonomy": [],
                    },
                    "tokens": {"inputTokens": 900, "outputTokens": 120, "totalTokens": 1020},
                }
            )
        hits = status_list.count("PASS")
        cases.append(
            {
                "caseId": f"case-{c:07d}",
                "status": "PASS" if hits == per_case else "FAIL",
                "kinds": ["GENERATION", "RAG", "RETRIEVAL", "LAYER"]
                + (["NEGATIVE"] if c % 3 == 0 else []),
                "attempts": atts,
                "retrieval": {"applicable": True, "passed": True},
                "successRate": {"hits": hits, "total": per_case},
            }
        )
    run = {
        "protocol": {
            "datasetId": "bench",
            "datasetHash": "h",
            "mode": "LIVE",
            "attempts": per_case,
            "selectedCaseIds": [c["caseId"] for c in cases],
            "graderConfigHash": "g",
            "provider": "p",
            "model": "m",
            "judgeEnabled": False,
        },
        "cases": cases,
    }
    run.update(count(cases).dump())
    run["metrics"] = compute_metrics(cases)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--attempts", type=int, default=1_000_000)
    parser.add_argument("--per-case", type=int, default=5)
    args = parser.parse_args()
    baseline = make_run(args.attempts, args.per_case, 1)
    candidate = make_run(args.attempts, args.per_case, 2)
    text = json.dumps(candidate)
    t0 = time.perf_counter()
    loaded = json.loads(text)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    metrics = compute_metrics(loaded["cases"])
    cmp = compare(baseline, loaded)
    gate = evaluate(
        loaded,
        {"thresholds": {"overallPassRate": 0.5}, "allowedRegression": 0.0},
        baseline,
        cmp,
        live=True,
    )
    agg_s = time.perf_counter() - t0
    print(
        f"{args.attempts:,} attempts: overall {metrics['overallPassRate']['rate']:.4f}, "
        f"comparison {cmp.decision.value}, gate {gate.verdict}"
    )
    print(
        table(
            [
                (
                    f"metrics+comparison+gate over {args.attempts:,} attempts",
                    f"{agg_s:.2f} s",
                    f"json.loads {load_s:.2f} s",
                    f"{agg_s / load_s:.2f}x",
                    "< 1x",
                )
            ]
        )
    )


if __name__ == "__main__":
    main()
