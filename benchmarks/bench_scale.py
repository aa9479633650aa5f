"""Collection and fixture-mode run against plain parametrised pytest, side by side.

    python benchmarks/bench_scale.py --rows 10000 [--rows 100000] [--repeat 5] [--xdist]

For each size it generates a synthetic dataset (benchmarks/generate.py) and measures, in the
same run and alternately (best of --repeat by wall time, and the median of the ratios within
each round of the alternation, which is steadier when the machine's speed drifts):
  * collection: ``pytest --golden=bench-v1 --collect-only`` vs ``pytest plain/test_plain_collect.py
    --collect-only`` (a plain @pytest.mark.parametrize over the same JSONL): targets (issue 19)
    ≤ 1.15× wall, ≤ 1.1× peak RSS;
  * fixture mode end to end: ``pytest --golden=bench-v1`` with its defaults (run folder and
    SQLite store written: they are part of our side) vs ``plain/test_plain_grade.py`` (the same
    grading functions called from a plain parametrised test): ≤ 1.2× wall, ≤ 1.15× peak RSS.
The CPU seconds (user + system) of the same runs are printed beside wall time: on a shared
machine they vary less, so they show whether a swing in wall time is ours or the machine's.
pytest's own clock ("passed in S s") is printed too: it leaves out interpreter start and
exit, where a golden session saves time (it skips CPython's exit-time collections), so it
shows the per-item cost of the session alone.
  * with --xdist: ``-n 2`` against serial on the golden run (speed-up, identical metrics).
Figures are printed as a table; nothing is asserted (this is a benchmark, not a test).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _measure import alternate, best_of, median_ratio, pytest_cmd, table
from _measure import run as run_once
from generate import generate


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def metrics_of(root: Path) -> dict:
    run_dir = Path((root / ".goldeval/runs/LATEST").read_text().strip())
    doc = json.loads((run_dir / "run.json").read_text())
    return {k: v for k, v in doc["metrics"].items() if k != "latency"}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, action="append")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--xdist", action="store_true")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    rows_list = args.rows or [10_000]
    base = args.workdir or Path(tempfile.mkdtemp(prefix="goldeval-bench-"))
    out: list[tuple[str, str, str, str, str]] = []
    for rows in rows_list:
        root = generate(rows, base / f"rows-{rows}")
        env = {"PYTHONDONTWRITEBYTECODE": "", "PYTHONHASHSEED": "0"}
        collect, collect_rounds = alternate(
            args.repeat,
            ("ours", pytest_cmd("--golden=bench-v1", "--collect-only")),
            ("plain", pytest_cmd("plain/test_plain_collect.py", "--collect-only")),
            cwd=root,
            env=env,
        )
        run, run_rounds = alternate(
            args.repeat,
            ("ours", pytest_cmd("--golden=bench-v1")),
            ("plain", pytest_cmd("plain/test_plain_grade.py")),
            cwd=root,
            env=env,
        )
        targets = {"collect": ("<= 1.15x", "<= 1.1x"), "fixture run": ("<= 1.2x", "<= 1.15x")}
        for label, m, rounds in (
            ("collect", collect, collect_rounds),
            ("fixture run", run, run_rounds),
        ):
            o, p = m["ours"], m["plain"]
            wall_target, rss_target = targets[label]
            out.append(
                (
                    f"{label} {rows:,} rows wall",
                    f"{o.wall:.1f} s",
                    f"{p.wall:.1f} s",
                    f"{o.wall / p.wall:.2f}x",
                    wall_target,
                )
            )
            out.append(
                (
                    f"{label} {rows:,} rows wall, median of paired ratios",
                    f"{len(rounds)} rounds",
                    "",
                    _ratio(median_ratio(rounds, "ours", "plain")),
                    wall_target,
                )
            )
            # pytest's own clock leaves out interpreter start and exit: the per-item cost of
            # the session alone (our exit is shorter: docs/performance.md, sixth round).
            out.append(
                (
                    f"{label} {rows:,} rows in-session (pytest's clock), median ratio",
                    f"{o.session} s" if o.session is not None else "n/a",
                    f"{p.session} s" if p.session is not None else "n/a",
                    _ratio(median_ratio(rounds, "ours", "plain", field="session")),
                    "(context)",
                )
            )
            out.append(
                (
                    f"{label} {rows:,} rows CPU (same runs)",
                    f"{o.cpu:.1f} s",
                    f"{p.cpu:.1f} s",
                    f"{o.cpu / p.cpu:.2f}x",
                    "(context)",
                )
            )
            out.append(
                (
                    f"{label} {rows:,} rows peak RSS",
                    f"{o.rss_mb:.0f} MB",
                    f"{p.rss_mb:.0f} MB",
                    f"{o.rss_mb / p.rss_mb:.2f}x",
                    rss_target,
                )
            )
        if args.xdist:
            serial_metrics = metrics_of(root)
            par = best_of(
                args.repeat,
                ("n2", pytest_cmd("--golden=bench-v1", "--golden-artifacts=never", "-n", "2")),
                ("plain n2", pytest_cmd("plain/test_plain_grade.py", "-n", "2")),
                cwd=root,
                env=env,
            )
            same = metrics_of(root) == serial_metrics
            out.append(
                (
                    f"-n 2 vs serial {rows:,} rows wall",
                    f"{par['n2'].wall:.1f} s",
                    f"{run['ours'].wall:.1f} s",
                    f"{run['ours'].wall / par['n2'].wall:.2f}x speed-up",
                    "> 1x, same metrics: " + ("yes" if same else "NO"),
                )
            )
            # Context: what xdist itself gives the plain reference on this machine.
            out.append(
                (
                    f"  plain reference -n 2 vs serial {rows:,} rows",
                    f"{par['plain n2'].wall:.1f} s",
                    f"{run['plain'].wall:.1f} s",
                    f"{run['plain'].wall / par['plain n2'].wall:.2f}x speed-up",
                    "(context)",
                )
            )
            # Where the CPU goes under xdist: seconds per process, ours and the plain reference.
            for label, cmd in (
                ("ours", ("--golden=bench-v1", "--golden-artifacts=never")),
                ("plain", ("plain/test_plain_grade.py",)),
            ):
                cpu_file = root / f".cpu-{label}.txt"
                cpu_file.unlink(missing_ok=True)
                probe_env = {
                    **env,
                    "GOLDEVAL_BENCH_CPU": str(cpu_file),
                    "PYTHONPATH": str(Path(__file__).parent),
                }
                for n_args in ([], ["-n", "2"]):
                    run_once(pytest_cmd(*cmd, "-p", "_cpuprobe", *n_args), root, probe_env)
                lines = cpu_file.read_text().split("\n")
                serial_cpu = lines[0].split()[1]
                split = ", ".join(ln.replace(" ", " ") + " s" for ln in lines[1:] if ln)
                out.append(
                    (
                        f"  CPU seconds per process, {label}",
                        f"-n 2: {split}",
                        f"serial {serial_cpu} s",
                        "",
                        "",
                    )
                )
        print(table(out), flush=True)


if __name__ == "__main__":
    main()
