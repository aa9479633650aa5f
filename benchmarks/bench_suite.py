"""Wall time of the project's two test tiers: the fast tier and the full suite (issue 34).

    python benchmarks/bench_suite.py              # both: about 3 + 10 minutes, quiet 2 cores
    python benchmarks/bench_suite.py --fast-only

Runs, from the project root, one after the other:

* the fast tier, ``pytest -m "not e2e" -n 2`` (the edit loop: every package's unit tests,
  without the end-to-end tests marked ``e2e`` in tests/conftest.py);
* the full suite, ``pytest -n 2`` (README command 2, what CI runs).

and prints each command's wall time (``time.monotonic`` around the child), its exit status and
pytest's summary line. The target (issue 34) is at most 3 minutes for the fast tier and 10 for
the full suite on a quiet 2-core machine; on a shared machine the figures vary a lot, so run it
when nothing else runs and record the figures in docs/performance.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TIERS = {
    "fast tier": ["-m", "not e2e", "-n", "2"],
    "full suite": ["-n", "2"],
}


def summary_line(output: str) -> str:
    """pytest's last line ("=== 1234 passed in 150.2s ==="), or the last line at all."""
    lines = [line.strip("= ") for line in output.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def run_tier(args: list[str]) -> tuple[float, int, str]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    return time.monotonic() - start, proc.returncode, summary_line(proc.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast-only", action="store_true", help="measure the fast tier only")
    options = parser.parse_args(argv)
    tiers = {"fast tier": TIERS["fast tier"]} if options.fast_only else TIERS
    worst = 0
    print(f"{'tier':<11} {'command':<30} {'wall':>9}  exit  pytest")
    for name, args in tiers.items():
        wall, rc, summary = run_tier(args)
        command = "pytest " + " ".join(f'"{a}"' if " " in a else a for a in args)
        print(f"{name:<11} {command:<30} {wall:8.1f}s  {rc:>4}  {summary}", flush=True)
        worst = max(worst, rc)
    return worst


if __name__ == "__main__":
    sys.exit(main())
