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
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/goldeval-bench-live"))
    args = parser.parse_args()
    root = generate(args.n, args.workdir)
    rows: list[tuple[str, str, str, str, str]] = []
    with FakeLLMServer(latency=args.latency) as srv:
        srv.responder = fixture_responder(root / "golden" / "bench")
        for label, extra, pools in (
            ("serial", [], 1),
            ("-n 2", ["-n", "2"], 2),
            ("-n 2 --dist load", ["-n", "2", "--dist", "load"], 2),
        ):
            srv.reset()
            srv.responder = fixture_responder(root / "golden" / "bench")
            srv.latency = args.latency
            cmd = pytest_cmd(
                "--golden=bench-v1",
                "--golden-mode=live",
                "--golden-model=m",
                f"--golden-base-url={srv.base_url}",
                "--golden-no-gate",
                f"--golden-concurrency={args.concurrency}",
                "--golden-artifacts=never",
                *extra,
            )
            env = {"PYTHONDONTWRITEBYTECODE": ""}
            fixture = run(
                pytest_cmd("--golden=bench-v1", "--golden-no-gate", "--golden-artifacts=never",
                           *extra),
                root, env,
            )
            m = run(cmd, root, env)
            ideal = args.n * args.latency / (args.concurrency * pools)
            phase = m.wall - fixture.wall
            rows.append((
                f"live {label}: N={args.n} L={args.latency * 1000:.0f}ms C={args.concurrency}"
                " (live phase)",
                f"{phase:.1f} s (rc {m.rc})", f"ideal {ideal:.1f} s", f"{phase / ideal:.2f}x",
                "<= 1.25x",
            ))
            rows.append((f"  total wall {label}: live vs same command in fixture mode",
                         f"{m.wall:.1f} s", f"{fixture.wall:.1f} s", "", ""))
            rows.append((f"  peak in flight ({label})", str(srv.max_in_flight), "", "", ""))
    print(table(rows))


if __name__ == "__main__":
    main()
