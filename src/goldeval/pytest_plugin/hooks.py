"""pytest hooks of pytest-goldeval. Thin on purpose: logic lives in the modules it calls.

Importing this module must stay cheap and free of side effects: it is loaded by every pytest
run in any project that has the plugin installed. Heavy imports happen only once ``--golden``
is given.
"""

from __future__ import annotations

import importlib
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from goldeval.pytest_plugin.config_keys import STATE_KEY, IniMarkers, is_listing

if TYPE_CHECKING:
    from goldeval.pytest_plugin.state import GoldenSession

_MODES = ("fixture", "live", "record")
#: goldeval.pytest_plugin.params.PARAM_ARG, repeated so that this module imports nothing heavy.
_PARAM_ARG = "golden_answer"


def _submodule(name: str) -> Any:
    """``goldeval.pytest_plugin.<name>``, looked up in ``sys.modules``.

    Not ``from goldeval.pytest_plugin import <name>``: that reads the package's attribute, which
    outlives ``sys.modules`` entries when a test harness (pytester's in-process runs) drops the
    modules a run imported; this module and the package stay loaded, so the attribute would hand
    a later run the stale module, bound to the previous run's classes.
    """
    return importlib.import_module(f"goldeval.pytest_plugin.{name}")


def pytest_addoption(parser: pytest.Parser) -> None:
    from goldeval.pytest_plugin.options import add_options

    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    hookspecs = _submodule("hookspecs")

    pluginmanager.add_hookspecs(hookspecs)
    if not pluginmanager.has_plugin("goldeval-ini-markers"):
        pluginmanager.register(IniMarkers(), "goldeval-ini-markers")


def _state(config: pytest.Config) -> GoldenSession | None:
    return config.stash.get(STATE_KEY, None)


def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # LAST_SESSION: "began, no end yet", before anything can refuse the session.
    if early_config.known_args_namespace.__dict__.get("golden"):
        _submodule("session_begun").mark_session_begun(early_config)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "red: golden row known to fail live (expect.red)")
    _submodule("options").refuse_bad_values(config)  # after LAST_SESSION says it began
    if not config.getoption("golden", default=None):
        return
    if not is_listing(config.option):
        _submodule("run_settings").refuse_cache_selection(config)
    builtin = _submodule("builtins")
    from goldeval.pytest_plugin.state import GoldenSession

    if not config.pluginmanager.is_registered(builtin):
        config.pluginmanager.register(builtin, "goldeval-builtin")
    state = GoldenSession(config)
    config.stash[STATE_KEY] = state
    # SIGTERM/SIGINT: a stop between items, not an exception inside other plugins' hooks.
    _submodule("stopping").register(config, state)
    _submodule("report_masking").register(config, state)  # printed keys out of every report
    from goldeval.pytest_plugin.fixtures import ItemFixtures

    config.pluginmanager.register(ItemFixtures(state), "goldeval-item-fixtures")
    # The collector's view of the session's long-lived objects (items, reports): frozen batch
    # by batch, unfrozen at unconfigure, and everything frozen at interpreter exit.
    long_lived = _submodule("long_lived")
    config.pluginmanager.register(long_lived.LongLivedObjects(), "goldeval-long-lived")
    long_lived.set_exit_collection(bool(config.getini("golden_collect_at_exit")))
    if not state.is_worker:
        # Listing items (--collect-only) is not a run: nothing is recorded, compared or
        # refused, so the controller and what it needs (verdict, reports, run documents) are
        # not even imported (docs/performance.md).
        if not is_listing(config.option):
            from goldeval.pytest_plugin.controller import Controller

            config.pluginmanager.register(Controller(state), "goldeval-controller")
            # A later project hook cannot turn the decided failure into exit 0.
            exit_guard = _submodule("exit_guard").ExitGuard()
            config.pluginmanager.register(exit_guard, exit_guard.NAME)
            retry_hint = _submodule("retry").RetryHint(state)
            config.pluginmanager.register(retry_hint, "goldeval-retry-hint")
        from goldeval.pytest_plugin.collection import CollectionGuard

        config.pluginmanager.register(CollectionGuard(state), "goldeval-collection-guard")
        if state.settings.mode.value != "fixture":
            from goldeval.pytest_plugin.prefetch import WorkStealingForLive

            config.pluginmanager.register(WorkStealingForLive(), "goldeval-live-scheduling")
    transport = _submodule("xdist")

    transport.register(config)
    if state.adaptive is not None:  # --golden-attempts=auto:MAX under xdist: rounds in order
        _submodule("adaptive").register_rounds(config, state)
    if not is_listing(config.option):  # a listing writes no run, so no JUnit run either
        _submodule("junit").register(config, state)
    # The HTML glue (and Jinja2 behind it) only when pytest-html writes a report.
    if config.pluginmanager.hasplugin("html") and config.getoption("htmlpath", None):
        _submodule("html").register(config, state)
    # `pytest --golden=ID` evaluates that dataset only; explicit paths are kept alongside it.
    # A node id of the dataset file (pasted from a FAILED line) narrows the run to those items:
    # appending the whole file as well would run every row (every model call, in live mode).
    target = str(state.target)
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        if not any(_names_target(arg, state.target, config) for arg in config.args):
            config.args.append(target)
    else:
        config.args[:] = [target]


def _names_target(arg: str, target: Any, config: pytest.Config) -> bool:
    """Whether a command-line argument is the dataset's rows file or a node id inside it."""
    from pathlib import Path

    path = arg.split("::", 1)[0]
    if not path:
        return False
    try:
        wanted = Path(target).resolve()
        for base in (config.invocation_params.dir, config.rootpath):
            if (Path(base) / path).resolve() == wanted:
                return True
    except (OSError, RuntimeError, ValueError):
        return False
    return False


def pytest_collect_file(file_path: Any, parent: pytest.Collector) -> pytest.Collector | None:
    state = _state(parent.config)
    if state is None or file_path != state.target:
        return None
    from goldeval.pytest_plugin.collection import GoldenModule

    return GoldenModule.from_parent(parent, path=file_path)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Only the dataset's own test function: a user's test asking for golden_case is not a
    # golden attempt (it would add records to the run) and gets a clear error instead.
    if metafunc.module.__name__ != "goldeval.pytest_plugin.golden_test":
        return
    state = _state(metafunc.config)
    if state is None:
        return
    from goldeval.pytest_plugin.collection import parametrize

    parametrize(metafunc, state)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    # trylast: after -k / -m deselected their items, so only the selected rows are checked.
    state = _state(config)
    if state is None:
        return
    from goldeval.pytest_plugin.collection import check_selected_fixtures, deselect_graded
    from goldeval.pytest_plugin.params import param_of

    if state.settings.run_key:
        deselect_graded(config, state, items)
    check_selected_fixtures(session, state, items)
    if state.adaptive is not None:
        from goldeval.pytest_plugin.adaptive import check_whole_cases

        check_whole_cases(state, [param_of(item) for item in items])
        # auto:MAX runs in rounds: every case's attempt 1 (all variants), then attempt 2, ...
        items.sort(key=lambda item: getattr(param_of(item), "attempt", 0))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    # A plain `pytest` in a project with datasets collects nothing from them (exit 5): say how
    # to run them. Only then, so a normal run pays nothing; no heavy import, nothing written.
    if exitstatus != pytest.ExitCode.NO_TESTS_COLLECTED or _state(config) is not None:
        return
    if config.getoption("golden", default=None):
        return
    line = _datasets_hint(config)
    if line:
        terminalreporter.write_line(line, yellow=True)


_MANIFESTS = ("dataset.yaml", "dataset.yml", "dataset.json")


def _datasets_hint(config: pytest.Config) -> str | None:
    """``goldeval: datasets under golden/: a, b; run them with --golden=ID`` or None.

    Reads only the ``version`` line of each manifest (no YAML parser, no pydantic), never
    follows links out of the golden folder and never opens anything but a regular file.
    """
    import json
    import os
    import re
    import stat
    from pathlib import Path

    root_opt = config.getini("golden_root") or "golden"
    root = Path(root_opt)
    if not root.is_absolute():
        root = Path(config.rootpath) / root
    if not root.is_dir():
        return None
    version_line = re.compile(r"""^version\s*:\s*["']?([^"'#\s]+)""", re.MULTILINE)
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if not d.startswith(".") and d not in ("fixtures", "__pycache__")
        )
        name = next((m for m in _MANIFESTS if m in filenames), None)
        if name is None or Path(dirpath) == root:
            continue
        path = Path(dirpath) / name
        version = Path(dirpath).name
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                with open(path, "rb") as handle:
                    text = handle.read(65536).decode("utf-8-sig", "replace")
                if name.endswith(".json"):
                    data = json.loads(text)
                    if isinstance(data, dict) and isinstance(data.get("version"), str):
                        version = data["version"]
                else:
                    match = version_line.search(text)
                    if match:
                        version = match.group(1)
        except (OSError, ValueError, RecursionError):  # deep JSON: the folder's name stands
            pass
        found.append(version)
    if not found:
        return None
    try:
        shown = root.relative_to(config.invocation_params.dir)
    except ValueError:
        shown = root
    listing = ", ".join(sorted(dict.fromkeys(found)))
    return f"goldeval: datasets under {shown}/: {listing}; run them with --golden=ID"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, Any]:
    report = yield
    if call.when == "teardown" or (call.when == "setup" and report.passed):
        # Nothing to attach (see attach_record): the call report carries the attempt, or a
        # setup that failed or skipped does. Two of an item's three reports stop here.
        return report
    state = _state(item.config)
    callspec = getattr(item, "callspec", None)
    if state is not None and callspec is not None and _PARAM_ARG in callspec.params:
        from goldeval.pytest_plugin.collection import attach_record

        attach_record(item, call, report)
    return report


# -- fixtures (overridable in a conftest) --------------------------------------------------


@pytest.fixture(scope="session")
def golden_provider(request: pytest.FixtureRequest) -> Any:
    """The provider: fixtures replay in fixture mode, the HTTP model in live mode.

    Override it in a conftest with a Provider or a plain callable ``case -> str``.
    """
    state = _state(request.config)
    if state is None:
        pytest.skip("pytest-goldeval is not active (pass --golden=ID)")
    provider = state.default_provider()
    yield provider
    provider.close()


@pytest.fixture(scope="session")
def golden_retriever(request: pytest.FixtureRequest) -> Any:
    """The retriever over the dataset's pack (LexicalRetriever by default)."""
    state = _state(request.config)
    if state is None:
        pytest.skip("pytest-goldeval is not active (pass --golden=ID)")
    return state.default_retriever()


@pytest.fixture(scope="session")
def golden_graders(request: pytest.FixtureRequest) -> list[Any]:
    """The graders for every attempt (registered through pytest_goldeval_register_graders)."""
    state = _state(request.config)
    if state is None:
        pytest.skip("pytest-goldeval is not active (pass --golden=ID)")
    state.load()
    return list(state.graders or [])
