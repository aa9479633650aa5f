"""Side-by-side measurement helpers: wall time and peak RSS of a child process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent


@dataclass
class Measure:
    wall: float
    rss_mb: float
    rc: int
    #: user + system CPU seconds of the child: steadier than wall time on a shared machine
    cpu: float = 0.0


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> Measure:
    """Run ``cmd`` and return wall seconds and the child's peak RSS (ru_maxrss of wait4)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Measure(wall, usage.ru_maxrss / 1024, proc.returncode, usage.ru_utime + usage.ru_stime)


def best_of(
    n: int, *cmds: tuple[str, list[str]], cwd: Path, env: dict[str, str] | None = None
) -> dict[str, Measure]:
    """Run the commands alternately ``n`` times; keep each one's fastest run (and its RSS)."""
    best: dict[str, Measure] = {}
    for _ in range(n):
        for name, cmd in cmds:
            m = run(cmd, cwd, env)
            if m.rc not in (0,):
                raise SystemExit(f"{name} exited {m.rc}: {' '.join(cmd)}")
            if name not in best or m.wall < best[name].wall:
                best[name] = m
    return best


def table(rows: list[tuple[str, str, str, str, str]]) -> str:
    head = ("figure", "ours", "reference", "ratio", "target")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(5)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(head, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def pytest_cmd(*args: str) -> list[str]:
    return [str(BIN / "pytest"), "-q", "-p", "no:cacheprovider", *args]
