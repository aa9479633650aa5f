"""A run's memory does not grow with its failing answers (issue: bounded by construction).

A failing attempt keeps its answer for the case files, and an answer may be as long as a
provider body. Two holders kept every one of them until the end of the run: the failure's
traceback (its frames held the answer and the record while anything kept the failure, as
pytest-rerunfailures keeps every item's) and the controller's attempt records. Checked here
as the items have all run: the session holds less than half the answers' size of what it
allocated, serial and under xdist (in the controller, which holds the records, and in the
workers, whose reports pytest keeps), and the case files still hold each answer whole.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ANSWER_CHARS = 4 * 1024 * 1024
ROWS = 6

# Keeps every failure's ExceptionInfo, as pytest-rerunfailures does, then measures, once every
# item has run and before the run is written, the memory the session still holds that it
# allocated since this conftest was imported (tracemalloc: any holder, tracked by the garbage
# collector or not, such as a dict of strings).
CONFTEST = """
import gc, os, tracemalloc
import pytest

tracemalloc.start()
KEPT = []

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    if call.excinfo is not None:
        KEPT.append(call.excinfo)
    return (yield)

@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    result = yield
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    process = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(f"held-{process}.txt", "w") as out:
        out.write(f"{held} {len(KEPT)}")
    return result
"""


def _project(root: Path) -> None:
    ds = root / "golden" / "long"
    (ds / "fixtures").mkdir(parents=True)
    (ds / "dataset.yaml").write_text("version: long-v1\nname: long\npack: none\n", encoding="utf-8")
    rows = [
        {"id": f"c{i}", "prompt": f"say {i}", "expect": {"contains_any": ["NEEDLE"]}}
        for i in range(ROWS)
    ]
    (ds / "long.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    for i in range(ROWS):
        text = (f"answer {i} " + "x" * ANSWER_CHARS)[:ANSWER_CHARS]
        (ds / "fixtures" / f"c{i}.out.md").write_text(text, encoding="utf-8")
    (root / "conftest.py").write_text(CONFTEST, encoding="utf-8")


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_failing_long_answers_are_not_held_until_the_run_is_written(
    pytester: pytest.Pytester, workers: list[str]
) -> None:
    _project(pytester.path)
    # A process of its own: tracemalloc measures the whole process.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--golden=long-v1", *workers)
    assert result.ret == 1, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines([f"*{ROWS} failed*"])
    # What a session holds besides the answers (the items, the dataset, imports: about 8 MB)
    # is well under half the answers; holding each failing answer is all of them, or twice.
    # Each process says (the controller, and the workers that run the items under xdist).
    held = {
        path.name: [int(x) for x in path.read_text().split()]
        for path in pytester.path.glob("held-*.txt")
    }
    assert sorted(held) == (
        ["held-gw0.txt", "held-gw1.txt", "held-main.txt"] if workers else ["held-main.txt"]
    )
    for name, (size, _kept) in held.items():
        assert size < ROWS * ANSWER_CHARS // 2, (name, size)
    if not workers:
        assert held["held-main.txt"][1] == ROWS  # every failure was kept
    run_dir = (pytester.path / ".goldeval" / "runs" / "LATEST").read_text().strip()
    cases = pytester.path / ".goldeval" / "runs" / run_dir / "cases"
    for i in range(ROWS):
        kept = (cases / f"c{i}" / "output.md").read_text(encoding="utf-8")
        assert kept == (f"answer {i} " + "x" * ANSWER_CHARS)[:ANSWER_CHARS]
