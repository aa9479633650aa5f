"""Streamed tool-call arguments assembled linearly: time to assemble N MiB of 100-character
pieces at 4, 8 and 16 MiB, side by side in one run (a probe: with ``+=`` on the growing string,
8 MiB took 10 s and 30 MiB minutes; linear assembly doubles its time when the size doubles).

    python benchmarks/bench_stream_assembly.py

Prints one line per size and the ratio of each size's time to the 4 MiB time (about 2 and 4
when linear; the quadratic ``+=`` gave about 3 at 8 MiB).
"""

from __future__ import annotations

import time

from goldeval.providers.http.openai import _add_call_pieces, _joined_call

PIECE = "x" * 100


def assemble(mib: int) -> float:
    pieces = (mib << 20) // len(PIECE)
    calls: dict[int, dict] = {}  # type: ignore[type-arg]
    start = time.perf_counter()
    for _ in range(pieces):
        _add_call_pieces(calls, [{"index": 0, "function": {"arguments": PIECE}}])
    joined = _joined_call(calls[0])
    took = time.perf_counter() - start
    assert len(joined["function"]["arguments"]) == pieces * len(PIECE)
    return took


def main() -> None:
    sizes = (4, 8, 16)
    took = {mib: assemble(mib) for mib in sizes}
    for mib in sizes:
        print(f"{mib:>3} MiB: {took[mib]:.2f} s ({took[mib] / took[sizes[0]]:.2f}x the 4 MiB time)")


if __name__ == "__main__":
    main()
