"""pytest plugin for the benchmarks: each process (xdist controller and workers) appends its CPU
seconds to the file named by GOLDEVAL_BENCH_CPU when it ends. Load it with ``-p _cpuprobe``."""

from __future__ import annotations

import os
import time

import pytest


def pytest_unconfigure(config: pytest.Config) -> None:
    path = os.environ.get("GOLDEVAL_BENCH_CPU")
    if not path:
        return
    who = getattr(config, "workerinput", {}).get("workerid", "controller")
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{who} {time.process_time():.2f}\n")
