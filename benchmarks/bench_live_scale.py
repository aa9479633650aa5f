"""Live calls at provider scale: adaptive concurrency vs a sweep of fixed ones, and a server that
answers 429 above R requests per second.

    python benchmarks/bench_live_scale.py [--calls 120] [--latency 0.1] [--slots 4]

Both figures drive the HTTP provider the way the prefetch pool does (``--golden-concurrency``
threads calling one provider) against the local test server (goldeval.testing.llm_server):

1. **Capacity mode** (``--capacity C``: C requests served at a time, the rest queue, as a
   llama.cpp server with C slots): throughput and timeouts for fixed concurrency 1, 2, 4, 8,
   16 and for the adaptive pool (maximum 16), with a read timeout that fixed 8 exceeds.
   Target: adaptive >= 0.9x the best fixed throughput, 0 timeouts.
2. **Rate-limit mode** (``--rate-limit R``: 429 with Retry-After above R requests/s): 400
   calls, adaptive pool. Target: >= 0.9 R sustained, 0 ERROR attempts.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _measure import table

from goldeval.core.errors import ProviderError
from goldeval.core.settings import ProviderSettings
from goldeval.dataset.case import GoldenCase
from goldeval.providers.base import ProviderRequest
from goldeval.providers.http import HTTPProvider, make_http_provider
from goldeval.testing.llm_server import FakeLLMServer

CASE = GoldenCase(id="bench", prompt="q", expect={})


def drive(
    srv: FakeLLMServer, calls: int, threads: int, *, adaptive: bool, timeout: float, retries: int
) -> tuple[float, int, int, float]:
    """(wall seconds, answered, ERROR attempts, final limit)."""
    settings = ProviderSettings(
        name="ollama",
        model="m",
        base_url=srv.base_url,
        read_timeout=timeout,
        retries=retries,
        backoff_base=0.05,
        backoff_max=5.0,
        max_concurrency=threads,
        adaptive=adaptive,
    )
    provider = make_http_provider(settings)
    assert isinstance(provider, HTTPProvider)

    def one(i: int) -> bool:
        request = ProviderRequest(
            case=CASE, attempt=1, system="s", user=f"q{i}", model=None, retrieved=[]
        )
        try:
            provider.complete(request)
        except ProviderError:
            return False
        return True

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        answered = sum(pool.map(one, range(calls)))
    wall = time.perf_counter() - start
    errors = calls - answered
    limit = provider.limiter.limit if provider.limiter is not None else float(threads)
    provider.close()
    return wall, answered, errors, limit


def drain(srv: FakeLLMServer) -> None:
    """Abandoned calls are still served (as a real server does): wait for the queue to empty."""
    deadline = time.monotonic() + 60
    while srv.in_flight and time.monotonic() < deadline:
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=120)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--rate-calls", type=int, default=400)
    args = parser.parse_args()
    rows: list[tuple[str, str, str, str, str]] = []

    # Fixed 8 on C slots waits 8/C service times: the read timeout sits 10% below.
    timeout = args.latency * (8 / args.slots) * 0.9
    sweep: dict[str, tuple[float, int, int, float]] = {}
    with FakeLLMServer(latency=args.latency, capacity=args.slots) as srv:
        for label, threads, adaptive in [
            ("fixed 1", 1, False),
            ("fixed 2", 2, False),
            ("fixed 4", 4, False),
            ("fixed 8", 8, False),
            ("fixed 16", 16, False),
            ("adaptive (max 16)", 16, True),
        ]:
            srv.reset()
            srv.latency = args.latency
            srv.capacity = args.slots
            # retries=0: a timeout is an ERROR attempt, so the count is visible as such
            sweep[label] = drive(
                srv, args.calls, threads, adaptive=adaptive, timeout=timeout, retries=0
            )
            drain(srv)
    ideal = args.slots / args.latency
    best_fixed = max(
        (answered / wall, label)
        for label, (wall, answered, errors, _l) in sweep.items()
        if label.startswith("fixed") and errors == 0
    )
    for label, (wall, answered, errors, limit) in sweep.items():
        rate = answered / wall
        adaptive = label.startswith("adaptive")
        rows.append(
            (
                f"capacity {args.slots} slots, L={args.latency * 1000:.0f}ms, "
                f"timeout {timeout * 1000:.0f}ms: {label}",
                f"{rate:.1f} calls/s, {errors} timed out"
                + (f", final limit {limit:.1f}" if adaptive else ""),
                f"best fixed {best_fixed[0]:.1f}/s ({best_fixed[1]}); server max {ideal:.0f}/s",
                f"{rate / best_fixed[0]:.2f}x",
                ">= 0.9x, 0 timeouts" if adaptive else "",
            )
        )

    with FakeLLMServer(latency=0.02, rate_limit=args.rate) as srv:
        wall, answered, errors, limit = drive(
            srv, args.rate_calls, 16, adaptive=True, timeout=5.0, retries=10
        )
        rate = answered / wall
        rows.append(
            (
                f"429 above R={args.rate:g}/s, {args.rate_calls} calls, adaptive (max 16)",
                f"{rate:.1f} calls/s, {errors} ERROR, {srv.rejected} x 429",
                f"R = {args.rate:g}/s",
                f"{rate / args.rate:.2f}x",
                ">= 0.9x, 0 ERROR",
            )
        )
    print(table(rows))


if __name__ == "__main__":
    main()
