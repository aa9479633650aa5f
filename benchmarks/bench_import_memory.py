"""Peak memory of ``goldeval import`` of a CSV and a JSON-lines file, at two sizes side by side
in one run, against the peak of a process that only reads the same file whole (the floor of
holding it once).

    python benchmarks/bench_import_memory.py [--rows 20000,80000]

Each import runs in its own child process; its peak RSS is the child's ``ru_maxrss``
(``os.wait4``). Before the import read its file a line at a time and let its rows go before
reading the written dataset back, a 212 MB CSV of 190,000 rows peaked at 1.3 GB (1.0 GB for
the same rows as JSON lines); measured with ``/usr/bin/time -f %M``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROMPT = "q" * 600
ANSWER = "a" * 500


def write_sources(folder: Path, rows: int) -> tuple[Path, Path]:
    """A CSV and a Hugging Face JSON-lines folder of ``rows`` rows of about 1.1 KB each."""
    table = folder / "rows.csv"
    with table.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "prompt", "answer"])
        for i in range(rows):
            writer.writerow([f"r{i}", f"{PROMPT}{i}", ANSWER])
    hf = folder / "hf"
    hf.mkdir()
    with (hf / "data.jsonl").open("w", encoding="utf-8") as fh:
        for i in range(rows):
            fh.write(json.dumps({"id": f"r{i}", "prompt": f"{PROMPT}{i}", "answer": ANSWER}))
            fh.write("\n")
    return table, hf


def peak_mb(args: list[str], cwd: Path) -> float:
    """Peak RSS in MB of the child running ``args`` (which must exit 0)."""
    child = subprocess.Popen(args, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    stderr = child.stderr.read().decode() if child.stderr else ""
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {child.returncode}: {stderr[-500:]}")
    return usage.ru_maxrss / 1024  # kilobytes on Linux


def measure(rows: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        table, hf = write_sources(folder, rows)
        for label, source in (("CSV", table), ("JSON lines", hf / "data.jsonl")):
            size_mb = source.stat().st_size / 1e6
            floor = peak_mb([sys.executable, "-c", f"open({str(source)!r}, 'rb').read()"], folder)
            name = "csv" if label == "CSV" else "jsonl"
            target = table if label == "CSV" else hf
            imported = peak_mb(
                [sys.executable, "-m", "goldeval.cli.main", "import", str(target),
                 "--name", name, "--golden-root", str(folder / "golden")],
                folder,
            )  # fmt: skip
            print(
                f"{rows:>7,} rows {label:<10} file {size_mb:7.1f} MB: import peak "
                f"{imported:7.1f} MB ({imported / size_mb:.2f}x the file), reading it whole "
                f"{floor:7.1f} MB"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="20000,80000", help="row counts, comma-separated")
    for rows in (int(x) for x in parser.parse_args().rows.split(",")):
        measure(rows)


if __name__ == "__main__":
    main()
