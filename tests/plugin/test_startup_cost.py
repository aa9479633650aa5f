"""What a session loads and keeps is what it uses (issue 19: overhead near pytest's floor).

A fixture-mode run calls no model, checks no JSON schema and renders no prompt template, so
it must not import httpx, jsonschema or Jinja2 (or our modules built on them); listing items
records nothing, so it must not load the run store, the verdict or the reports at all.
Figures: benchmarks/bench_scale.py and docs/performance.md. The garbage collector's freeze of
the session's long-lived objects is undone when the session ends.
"""

from __future__ import annotations

import gc
import json
import sys
from pathlib import Path

import pytest

MODULES_CONFTEST = """
import gc, json, sys

def pytest_runtest_setup(item):
    with open("frozen.json", "w") as fh:
        json.dump(gc.get_freeze_count(), fh)

def pytest_unconfigure(config):
    with open("modules.json", "w") as fh:
        json.dump(sorted(sys.modules), fh)
"""

#: Loaded only when a row, a mode or an option needs them.
ON_DEMAND = (
    "httpx",
    "jsonschema",
    "referencing",
    "goldeval.providers.http",
    "goldeval.providers.embeddings",
    "goldeval.graders.json_schema_check",
)


def _modules(path: Path) -> set[str]:
    return set(json.loads((path / "modules.json").read_text()))


def test_fixture_run_loads_no_model_client_or_schema_library(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    pytester.makeconftest(MODULES_CONFTEST)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:html", "--golden=generation-v1"
    )
    assert result.ret == 0, result.stdout.str()[-2000:]
    loaded = _modules(golden_project)
    assert "goldeval.pytest_plugin.controller" in loaded  # the probe saw our session
    assert "goldeval.store" in loaded  # a run records
    assert sorted(m for m in ON_DEMAND if m in loaded) == []
    # The dataset has no prompt templates: the template engine stays unloaded.
    assert "jinja2.sandbox" not in loaded
    # While items ran, the session's long-lived objects were frozen out of the collector.
    assert json.loads((golden_project / "frozen.json").read_text()) > 0


def test_listing_items_loads_no_store_and_reads_none(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    pytester.makeconftest(MODULES_CONFTEST)
    store = golden_project / ".goldeval" / "goldeval.sqlite3"
    store.parent.mkdir()
    store.write_bytes(b"not a database")  # a run would refuse it (usage error)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--golden=generation-v1", "--collect-only", "-q"
    )
    assert result.ret == 0, result.stdout.str()[-2000:]
    assert "test_golden[" in result.stdout.str()
    loaded = _modules(golden_project)
    assert "goldeval.dataset.rows" in loaded  # the probe saw our session
    # Nothing of a run: no store, no controller, no verdict, no reports.
    run_side = (
        "goldeval.store",
        "goldeval.verdict",
        "goldeval.reports",
        "goldeval.pytest_plugin.controller",
    )
    assert sorted(m for m in loaded if m.startswith(run_side)) == []
    assert store.read_bytes() == b"not a database"
    assert not (golden_project / ".goldeval" / "runs").exists()
    # The same store does stop a real run, before anything runs.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--golden=generation-v1")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "not a usable goldeval store" in result.stderr.str() + result.stdout.str()


def test_freeze_is_undone_when_an_in_process_session_ends(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    before = gc.get_freeze_count()
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1")
    assert result.ret == 0
    assert gc.get_freeze_count() == before


GC_CONFTEST = """
import gc, json

SEEN = {"collecting": [], "frozen": []}

def pytest_itemcollected(item):
    SEEN["collecting"].append(gc.isenabled())

def pytest_runtest_setup(item):
    SEEN["frozen"].append(gc.get_freeze_count())

def pytest_unconfigure(config):
    with open("gc.json", "w") as fh:
        json.dump(SEEN, fh)
"""


def test_long_lived_objects_are_frozen_batch_by_batch_and_nothing_stays_frozen(
    pytester: pytest.Pytester, golden_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Collection runs without automatic full collections; while items run, every BATCH
    reports the survivors are frozen (after a collection, so no garbage is frozen); the
    collector is back as it was when the session ends."""
    import importlib

    # Through sys.modules, as the plugin looks it up: after an earlier in-process run the
    # package attribute may be a stale copy of the module.
    long_lived = importlib.import_module("goldeval.pytest_plugin.long_lived")
    monkeypatch.setattr(long_lived, "BATCH", 2)
    pytester.makeconftest(GC_CONFTEST)
    enabled, before = gc.isenabled(), gc.get_freeze_count()
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1")
    assert result.ret == 0, result.stdout.str()[-2000:]
    seen = json.loads((golden_project / "gc.json").read_text())
    assert seen["collecting"] and not any(seen["collecting"])  # no automatic collections
    frozen = seen["frozen"]
    assert len(frozen) >= 6
    assert frozen[0] > before  # collection's objects frozen before the first item
    # Frozen again after every second item: the count grows batch by batch.
    steps = zip(frozen[::2], frozen[2::2], strict=False)
    assert all(later > earlier for earlier, later in steps), frozen
    assert gc.isenabled() == enabled
    assert gc.get_freeze_count() == before


def test_garbage_cycles_are_collected_not_frozen() -> None:
    """A step collects before it freezes: a cycle dropped before the step is freed, one still
    referenced is frozen (and unfrozen at the end of the session)."""
    import weakref

    from goldeval.pytest_plugin.long_lived import LongLivedObjects

    class Node:
        pass

    def cycle() -> Node:
        a, b = Node(), Node()
        a.other, b.other = b, a  # type: ignore[attr-defined]
        return a

    assert gc.get_freeze_count() == 0  # nothing else in this process froze objects
    objects = LongLivedObjects()
    dropped = weakref.ref(cycle())
    kept = cycle()
    try:
        objects.settle()
        assert dropped() is None
        assert gc.get_freeze_count() > 0
    finally:
        objects.pytest_unconfigure(None)  # type: ignore[arg-type]
    assert gc.get_freeze_count() == 0
    assert kept.other.other is kept  # type: ignore[attr-defined]


EXIT_CONFTEST = """
import atexit, gc, json

# Registered before the plugin's handler (a conftest loads first), so it runs after it.
def _record_exit():
    with open("exit.json", "w") as fh:
        json.dump({"frozen": gc.get_freeze_count()}, fh)

atexit.register(_record_exit)
"""


@pytest.mark.parametrize(
    ("args", "frozen_at_exit"),
    [
        (("--golden=generation-v1",), True),
        (("--golden=generation-v1", "--collect-only", "-q"), True),
        (("--golden=generation-v1", "-o", "golden_collect_at_exit=true"), False),
        ((), False),  # not a golden session: the interpreter's exit is left alone
    ],
)
def test_a_golden_session_freezes_everything_at_interpreter_exit(
    pytester: pytest.Pytester, golden_project: Path, args: tuple[str, ...], frozen_at_exit: bool
) -> None:
    """CPython's exit-time full collections walk every object left (seconds after a large
    session): a golden session freezes them first, unless the ini file asks for CPython's
    way (docs/performance.md)."""
    pytester.makeconftest(EXIT_CONFTEST)
    pytester.makepyfile(test_other="def test_other():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    assert result.ret == 0, result.stdout.str()[-2000:]
    frozen = json.loads((golden_project / "exit.json").read_text())["frozen"]
    if frozen_at_exit:
        assert frozen > 10_000  # the modules, the session, its items and reports
    else:
        assert frozen == 0


NESTED_SESSIONS = """
import atexit, gc, json, sys

import pytest

def _record_exit():
    with open("exit.json", "w") as fh:
        json.dump({"frozen": gc.get_freeze_count()}, fh)

atexit.register(_record_exit)  # before any session, so it runs after the plugin's handler
for args in json.loads(sys.argv[1]):
    code = pytest.main(["-q", "-p", "no:cacheprovider", *args])
    assert code == 0, (args, code)
"""


@pytest.mark.parametrize(
    ("sessions", "frozen_at_exit"),
    [
        # A golden session run in-process by a host that is not one leaves the handler there.
        ([["--golden=generation-v1"], ["test_other.py"]], True),
        # A later golden session that asks for CPython's way takes it out again.
        (
            [
                ["--golden=generation-v1"],
                ["--golden=generation-v1", "-o", "golden_collect_at_exit=true"],
            ],
            False,
        ),
        ([["--golden=generation-v1"], ["--golden=generation-v1"]], True),
    ],
)
def test_the_last_golden_session_of_a_process_decides_the_exit_freeze(
    pytester: pytest.Pytester,
    golden_project: Path,
    sessions: list[list[str]],
    frozen_at_exit: bool,
) -> None:
    """Sessions run by ``pytest.main`` in one process (pytester in-process, scripts): the exit
    handler is process-wide, registered once, and ``golden_collect_at_exit = true`` undoes an
    earlier session's registration (docs/performance.md)."""
    pytester.makepyfile(test_other="def test_other():\n    pass\n")
    script = golden_project / "nested.py"
    script.write_text(NESTED_SESSIONS)
    result = pytester.run(sys.executable, str(script), json.dumps(sessions))
    assert result.ret == 0, (result.stdout.str() + result.stderr.str())[-2000:]
    frozen = json.loads((golden_project / "exit.json").read_text())["frozen"]
    if frozen_at_exit:
        assert frozen > 10_000
    else:
        assert frozen == 0
