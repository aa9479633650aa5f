"""Two variants on two servers in one session vs each alone (issue 35).

    python benchmarks/bench_variants.py [--rows 200] [--attempts 5] [--slow 0.2] [--fast 0.1]

Two fake model servers on 127.0.0.1 with different latency; the generated bench dataset gets
two variants, ``fast`` (Ollama protocol, the first server) and ``slow`` (OpenAI protocol, the
second). Wall time of ``pytest --golden-mode=live`` running each variant alone
(``--golden-variants=fast``, then ``slow``) and both together, best of ``--repeat``. Target:
both within 1.1× of the slower alone (not their sum): the variants' items are interleaved and
the prefetch pool gives each server its ``--golden-concurrency``.
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
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--fast", type=float, default=0.1, help="latency of the fast server, s")
    parser.add_argument("--slow", type=float, default=0.2, help="latency of the slow server, s")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2, help="best of this many runs each")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/goldeval-bench-variants"))
    args = parser.parse_args()
    root = generate(args.rows, args.workdir)
    dataset = root / "golden" / "bench"
    with FakeLLMServer() as fast, FakeLLMServer() as slow:
        manifest = dataset / "dataset.yaml"
        manifest.write_text(
            manifest.read_text(encoding="utf-8")
            + "variants:\n"
            + "  - {name: fast, model: m-fast}\n"
            + f"  - {{name: slow, provider: openai, baseUrl: '{slow.base_url}', model: m-slow}}\n",
            encoding="utf-8",
        )
        walls: dict[str, float] = {}
        calls: dict[str, str] = {}
        for label, extra in (
            ("fast alone", ["--golden-variants=fast"]),
            ("slow alone", ["--golden-variants=slow"]),
            ("both", []),
        ):
            cmd = pytest_cmd(
                "--golden=bench-v1",
                "--golden-mode=live",
                f"--golden-base-url={fast.base_url}",
                f"--golden-attempts={args.attempts}",
                f"--golden-concurrency={args.concurrency}",
                "--golden-concurrency-mode=fixed",
                "--golden-no-gate",
                "--golden-artifacts=never",
                *extra,
            )
            best = None
            for _ in range(args.repeat):
                for srv, latency in ((fast, args.fast), (slow, args.slow)):
                    srv.reset()
                    srv.responder = fixture_responder(dataset)
                    srv.latency = latency
                result = run(cmd, root, {"OPENAI_API_KEY": "sk-bench"})
                if result.rc not in (0, 1):
                    raise SystemExit(f"{label}: pytest exited {result.rc}")
                if best is None or result.wall < best:
                    best = result.wall
                calls[label] = f"{len(fast.requests)} + {len(slow.requests)}"
            assert best is not None
            walls[label] = best
    slower = max(walls["fast alone"], walls["slow alone"])
    total = walls["fast alone"] + walls["slow alone"]
    n = args.rows * args.attempts
    rows = [
        (
            f"variants: {args.rows} rows x {args.attempts} attempts, C={args.concurrency}, "
            f"L={args.fast * 1000:.0f}/{args.slow * 1000:.0f} ms",
            "",
            "",
            "",
            "",
        ),
        (
            "  fast alone",
            f"{walls['fast alone']:.1f} s",
            f"calls {calls['fast alone']}",
            f"ideal {n * args.fast / args.concurrency:.1f} s",
            "",
        ),
        (
            "  slow alone",
            f"{walls['slow alone']:.1f} s",
            f"calls {calls['slow alone']}",
            f"ideal {n * args.slow / args.concurrency:.1f} s",
            "",
        ),
        (
            "  both in one session",
            f"{walls['both']:.1f} s",
            f"calls {calls['both']}",
            f"{walls['both'] / slower:.2f}x the slower alone "
            f"({walls['both'] / total:.2f}x the sum)",
            "<= 1.1x",
        ),
    ]
    print(table(rows))


if __name__ == "__main__":
    main()
