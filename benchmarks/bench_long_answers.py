"""Peak memory of a fixture run whose every attempt fails with a long answer, at two row counts
side by side in one run: the peak should not grow with the rows (the answers wait on disk and
no failure's traceback keeps one), only with the longest answer.

    python benchmarks/bench_long_answers.py [--rows 10,40] [--answer-mb 8]

Each session runs in its own child process (serial, then ``-n 2``); its peak RSS is the
child's ``ru_maxrss`` (``os.wait4``: the largest of the process and the children it waited
for). Before the answers were spooled (goldeval.results.text_spool) and failures were raised
from a frame without the answer, 60 failing rows of 15 MB peaked at 2.8 GB (1.9 GB with the
traceback fixed alone), and at 182 MB with both; measured with ``/usr/bin/time -v``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def write_project(root: Path, rows: int, answer_chars: int) -> None:
    ds = root / "golden" / "long"
    (ds / "fixtures").mkdir(parents=True)
    (ds / "dataset.yaml").write_text("version: long-v1\nname: long\npack: none\n", "utf-8")
    lines = [
        json.dumps({"id": f"c{i}", "prompt": f"say {i}", "expect": {"contains_any": ["NEEDLE"]}})
        for i in range(rows)
    ]
    (ds / "long.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    for i in range(rows):
        text = (f"answer {i} " + "x" * answer_chars)[:answer_chars]
        (ds / "fixtures" / f"c{i}.out.md").write_text(text, "utf-8")
    (root / "pytest.ini").write_text("[pytest]\n", "utf-8")


def peak_mb(args: list[str], cwd: Path) -> float:
    """Peak RSS in MB of the child running ``args`` (a failing run: exit 1 expected)."""
    child = subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 1:
        stderr = child.stderr.read().decode() if child.stderr else ""
        raise SystemExit(f"{' '.join(args)} exited {code}, not 1: {stderr[-500:]}")
    return usage.ru_maxrss / 1024  # kilobytes on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="10,40", help="row counts, comma-separated")
    parser.add_argument("--answer-mb", type=float, default=8.0, help="each answer's size")
    args = parser.parse_args()
    answer_chars = int(args.answer_mb * 1024 * 1024)
    print(f"every attempt FAILs with a {args.answer_mb:g} MB answer; peak RSS of the session")
    print(f"{'rows':>6} {'answers MB':>11} {'serial MB':>10} {'-n 2 MB':>9}")
    for rows in (int(x) for x in args.rows.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            write_project(root, rows, answer_chars)
            run = [
                sys.executable,
                "-m",
                "pytest",
                "--golden=long-v1",
                "-q",
                "-p",
                "no:cacheprovider",
            ]
            serial = peak_mb(run, root)
            xdist = peak_mb([*run, "-n", "2"], root)
            total = rows * answer_chars / 2**20
            print(f"{rows:>6} {total:>11.0f} {serial:>10.0f} {xdist:>9.0f}")


if __name__ == "__main__":
    main()
