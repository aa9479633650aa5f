"""Live concurrency: N attempts against the local test server with latency L at concurrency C.

    python benchmarks/bench_live.py [--n 400] [--latency 0.2] [--concurrency 16]

Wall time of ``pytest --golden-mode=live`` (serial and -n 2) next to the ideal N·L/C
(for -n 2, each worker has its own pool of C: ideal N·L/(2C)). Target: within 1.25× of ideal
for N=400, L=200 ms, C=16. The "live phase" is the live wall time minus the wall time of the
same command in fixture mode (process and xdist start-up, collection, grading, artifacts), so
it is the time the model calls add; both totals are printed too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _measure import pytest_cmd, run, table
from generate import generate

from goldeval.testing.llm_server import FakeLLMServer, fixture_responder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs each")
    parser.add_argument(
        "--concurrency-mode",
        choices=("adaptive", "fixed"),
        default="adaptive",
        help="--golden-concurrency-mode of the live runs",
    )
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/goldeval-bench-live"))
    args = parser.parse_args()
    root = generate(args.n, args.workdir)
    rows: list[tuple[str, str, str, str, str]] = []
    env = {"PYTHONDONTWRITEBYTECODE": ""}
    with FakeLLMServer(latency=args.latency) as srv:
        for label, extra, pools in (
            ("serial", [], 1),
            ("-n 2", ["-n", "2"], 2),
            ("-n 2 --dist load", ["-n", "2", "--dist", "load"], 2),
        ):
            live_cmd = pytest_cmd(
                "--golden=bench-v1",
                "--golden-mode=live",
                "--golden-model=m",
                f"--golden-base-url={srv.base_url}",
                "--golden-no-gate",
                f"--golden-concurrency={args.concurrency}",
                f"--golden-concurrency-mode={args.concurrency_mode}",
                "--golden-artifacts=never",
                *extra,
            )
            fixture_cmd = pytest_cmd(
                "--golden=bench-v1", "--golden-no-gate", "--golden-artifacts=never", *extra
            )
            best_live = best_fixture = None
            calls: list[int] = []
            in_flight = 0
            for _ in range(args.repeat):
                fixture = run(fixture_cmd, root, env)
                srv.reset()
                srv.responder = fixture_responder(root / "golden" / "bench")
                srv.latency = args.latency
                live = run(live_cmd, root, env)
                calls.append(len(srv.requests))
                in_flight = max(in_flight, srv.max_in_flight)
                if best_live is None or live.wall < best_live.wall:
                    best_live = live
                if best_fixture is None or fixture.wall < best_fixture.wall:
                    best_fixture = fixture
            assert best_live is not None and best_fixture is not None
            ideal = args.n * args.latency / (args.concurrency * pools)
            phase = best_live.wall - best_fixture.wall
            rows.append(
                (
                    f"live {label}: N={args.n} L={args.latency * 1000:.0f}ms C={args.concurrency}"
                    f" {args.concurrency_mode} (live phase)",
                    f"{phase:.1f} s (rc {best_live.rc})",
                    f"ideal {ideal:.1f} s",
                    f"{phase / ideal:.2f}x",
                    "<= 1.25x",
                )
            )
            rows.append(
                (
                    f"  total wall {label}: live vs same command in fixture mode",
                    f"{best_live.wall:.1f} s",
                    f"{best_fixture.wall:.1f} s",
                    "",
                    "",
                )
            )
            rows.append(
                (
                    f"  model calls made ({label}), per run",
                    ", ".join(map(str, calls)),
                    f"N = {args.n}",
                    "",
                    "extra = stolen items",
                )
            )
            rows.append((f"  peak in flight ({label})", str(in_flight), "", "", ""))
    print(table(rows))


if __name__ == "__main__":
    main()
