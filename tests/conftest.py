"""Shared fixtures for the project's own tests (the plugin is tested black-box with pytester)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

# pytester's in-process runs restore sys.modules afterwards: a library first imported inside
# such a run would be imported again later with new exception classes, which the modules that
# already hold the old ones no longer catch. Import them once, up front. (This conftest is also
# loaded by `pytest --golden=...` at the project root, where the test extra may be missing.)
import httpcore  # noqa: F401
import httpx  # noqa: F401
import pytest

from tests.helpers import ROOT, RunFiles

# Every subprocess the suite starts (xdist workers, `goldeval` commands, services, their pytest
# runs, runpytest_subprocess) that is a pytest session has pytest rewrite the plugin's modules
# (an entry-point plugin). Under PYTHONDONTWRITEBYTECODE nothing is cached, so each session
# rewrote and compiled them again: a fixture session of generation-v1 took 0.95-1.02 s of CPU,
# 0.63-0.71 s with the bytecode cached (4 runs each, 2026-12-06). The bytecode goes to a cache
# outside the source tree and the tests' projects, so no `__pycache__` appears where a test
# looks (the spirit of the setting); benchmarks/bench_*.py also let their subprocesses cache.
# This process itself is unchanged (the flag was read at its start).
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = str(ROOT / ".pytest_cache" / "subprocess-pycache")

try:
    import psycopg  # noqa: F401

    import goldeval.store.postgres  # noqa: F401
except ImportError:  # without the test extra only the main job runs from this checkout
    pass


#: The end-to-end tier, left out of the fast tier `pytest -m "not e2e" -n 2` (README): folders
#: and modules (relative to tests/) whose tests run whole pytest sessions, `goldeval serve`,
#: Chromium, a model server or every documented command, chosen by `--durations` (issue 34).
#: Every package keeps unit tests in the fast tier (tests/unit/test_test_tiers.py checks it).
E2E_PATHS = (
    "reliability/",
    "live/",
    "examples/",
    # every module here starts whole `goldeval serve` / `goldeval worker` processes: 249 s of
    # the fast tier's ~460 s serially (2026-12-06, `--durations`), before they moved here
    "server/",
    "docs/test_doc_commands.py",
    "store/test_plugin_store.py",
    "store/test_store_views.py",
    "cli/test_project_root.py",
    "reports/test_html.py",
    "plugin/",
)
#: Kept in the fast tier from an e2e folder above: the plugin's spine, serially; the service's
#: queue, in-process (no server process).
FAST_PATHS = ("plugin/test_spine.py", "server/test_queue.py")
TESTS = Path(__file__).parent


def is_e2e(relative: str, params: dict[str, object]) -> bool:
    """Whether a test (its path relative to tests/, its parameters) is in the e2e tier; the
    `-n 2` twin of a black-box test (`plugin_args`, id `xdist2`) always is."""
    if params.get("plugin_args"):
        return True
    return relative.startswith(E2E_PATHS) and not relative.startswith(FAST_PATHS)


def pytest_collection_modifyitems(items: Sequence[pytest.Item]) -> None:
    for item in items:
        path = item.path
        if not path.is_relative_to(TESTS):  # golden rows (`pytest --golden=...` at the root)
            continue
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        if is_e2e(path.relative_to(TESTS).as_posix(), params):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(autouse=True)
def _clean_xdist_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # A test run under xdist must not leak its worker identity into pytester runs.
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    for name in (
        "OLLAMA_HOST",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "OLLAMA_USER",
        "OLLAMA_PASSWORD",
        "OLLAMA_TIMEOUT_MINUTES",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(params=[[], ["-n", "2"]], ids=["serial", "xdist2"])
def plugin_args(request: pytest.FixtureRequest) -> list[str]:
    """Run each black-box test serially and with two xdist workers."""
    return list(request.param)


@pytest.fixture
def golden_project(pytester: pytest.Pytester) -> Path:
    """A throwaway project holding a copy of our example datasets, pack and baselines."""
    for name in ("golden", "pack", "baselines"):
        shutil.copytree(ROOT / name, pytester.path / name)
    pytester.makeini("[pytest]\n")
    return pytester.path


@pytest.fixture
def run_files(golden_project: Path) -> RunFiles:
    return RunFiles(golden_project)


@pytest.fixture
def rows_file(golden_project: Path) -> Callable[[str], Path]:
    def find(dataset: str = "generation") -> Path:
        return next((golden_project / "golden" / dataset).glob("*.jsonl"))

    return find


@pytest.fixture
def no_network() -> Iterator[None]:
    yield
