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
