"""pytest hooks of pytest-goldeval. Thin on purpose: logic lives in the modules it calls.

Importing this module must stay cheap and free of side effects: it is loaded by every pytest
run in any project that has the plugin installed. Heavy imports happen only once ``--golden``
is given.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from goldeval.session import GoldenSession

_MODES = ("fixture", "live", "record")
#: goldeval.item_fixtures.PARAM_ARG, repeated so that this module imports nothing heavy.
_PARAM_ARG = "golden_case"


def pytest_addoption(parser: pytest.Parser) -> None:
    from goldeval.options import add_options

    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from goldeval import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


#: The session's run state. Defined here, not in goldeval.session, so that asking "is the
#: plugin active?" never imports the heavy modules in a project that does not use it.
STATE_KEY = pytest.StashKey["GoldenSession"]()


def _state(config: pytest.Config) -> GoldenSession | None:
    return config.stash.get(STATE_KEY, None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "red: golden row known to fail live (expect.red)")
    if not config.getoption("golden", default=None):
        return
    from goldeval import builtin
    from goldeval.session import GoldenSession

    if not config.pluginmanager.is_registered(builtin):
        config.pluginmanager.register(builtin, "goldeval-builtin")
    state = GoldenSession(config)
    config.stash[STATE_KEY] = state
    from goldeval.item_fixtures import ItemFixtures

    config.pluginmanager.register(ItemFixtures(state), "goldeval-item-fixtures")
    if not state.is_worker:
        from goldeval.finish import Controller

        config.pluginmanager.register(Controller(state), "goldeval-controller")
        if state.settings.mode.value != "fixture":
            from goldeval.concurrency import WorkStealingForLive

            config.pluginmanager.register(WorkStealingForLive(), "goldeval-live-scheduling")
    from goldeval import transport

    transport.register(config)
    from goldeval.integrations import html as _h
    from goldeval.integrations import junit as _j

    _j.register(config, state)
    _h.register(config, state)
    # `pytest --golden=ID` evaluates that dataset only; explicit paths are kept alongside it.
    target = str(state.target)
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        if target not in config.args:
            config.args.append(target)
    else:
        config.args[:] = [target]


def pytest_collect_file(file_path: Any, parent: pytest.Collector) -> pytest.Collector | None:
    state = _state(parent.config)
    if state is None or file_path != state.target:
        return None
    from goldeval.collect import GoldenModule

    return GoldenModule.from_parent(parent, path=file_path)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Only the dataset's own test function: a user's test asking for golden_case is not a
    # golden attempt (it would add records to the run) and gets a clear error instead.
    if metafunc.module.__name__ != "goldeval.golden_test":
        return
    state = _state(metafunc.config)
    if state is None:
        return
    from goldeval.collect import parametrize

    parametrize(metafunc, state)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    state = _state(config)
    if state is None or not state.settings.run_key:
        return
    from goldeval.collect import deselect_graded

    deselect_graded(config, state, items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, Any]:
    report = yield
    state = _state(item.config)
    callspec = getattr(item, "callspec", None)
    if state is not None and callspec is not None and _PARAM_ARG in callspec.params:
        from goldeval.collect import attach_record

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
