"""Side-by-side measurement helpers: wall time and peak RSS of a child process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
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
    #: pytest's own clock ("N passed in S s"): the session without interpreter start and exit
    session: float | None = None


#: The last "in 12.34s" of pytest's summary line.
_SESSION_SECONDS = re.compile(rb" in (\d+(?:\.\d+)?)s\b")


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> Measure:
    """Run ``cmd`` and return wall seconds and the child's peak RSS (ru_maxrss of wait4)."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
        )
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        out.seek(max(0, out.seek(0, os.SEEK_END) - 4096))
        found = _SESSION_SECONDS.findall(out.read())
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Measure(
        wall,
        usage.ru_maxrss / 1024,
        proc.returncode,
        usage.ru_utime + usage.ru_stime,
        float(found[-1]) if found else None,
    )


def best_of(
    n: int, *cmds: tuple[str, list[str]], cwd: Path, env: dict[str, str] | None = None
) -> dict[str, Measure]:
    """Run the commands alternately ``n`` times; keep each one's fastest run (and its RSS)."""
    best, _ = alternate(n, *cmds, cwd=cwd, env=env)
    return best


def alternate(
    n: int, *cmds: tuple[str, list[str]], cwd: Path, env: dict[str, str] | None = None
) -> tuple[dict[str, Measure], list[dict[str, Measure]]]:
    """Run the commands alternately ``n`` times: each one's fastest run, and every round.

    The rounds give paired ratios: on a shared machine whose speed drifts over seconds, the
    median of ``ours / reference`` within a round is steadier than the ratio of two minima.
    Every other round runs the commands in reverse order (A B, B A, A B...), so that running
    first or second (a page cache the previous run filled or emptied, a machine slowing down
    over a round) falls on each side equally. Each run is printed to stderr as it ends.
    """
    best: dict[str, Measure] = {}
    rounds: list[dict[str, Measure]] = []
    for i in range(n):
        this: dict[str, Measure] = {}
        for name, cmd in cmds if i % 2 == 0 else cmds[::-1]:
            m = run(cmd, cwd, env)
            if m.rc not in (0,):
                raise SystemExit(f"{name} exited {m.rc}: {' '.join(cmd)}")
            this[name] = m
            print(
                f"  round {i + 1} {name}: {m.wall:.1f} s wall, {m.cpu:.1f} s CPU,"
                f" {m.rss_mb:.0f} MB, pytest's clock {m.session} s",
                file=sys.stderr,
                flush=True,
            )
            if name not in best or m.wall < best[name].wall:
                best[name] = m
        rounds.append(this)
    return best, rounds


def median_ratio(
    rounds: list[dict[str, Measure]], ours: str, reference: str, *, field: str = "wall"
) -> float | None:
    """The median over rounds of ``ours.wall / reference.wall`` (paired, same round), or of
    another figure of the runs (``field="session"``: pytest's own clock). Rounds where either
    run lacks the figure (pytest printed no clock) are left out; ``None`` if none is left."""
    ratios = []
    for r in rounds:
        mine, theirs = getattr(r[ours], field), getattr(r[reference], field)
        if mine is not None and theirs:
            ratios.append(mine / theirs)
    if not ratios:
        return None
    ratios.sort()
    mid = len(ratios) // 2
    return ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2


def table(rows: list[tuple[str, str, str, str, str]]) -> str:
    head = ("figure", "ours", "reference", "ratio", "target")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(5)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(head, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def pytest_cmd(*args: str) -> list[str]:
    return [str(BIN / "pytest"), "-q", "-p", "no:cacheprovider", *args]
