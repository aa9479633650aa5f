"""The private pytest/xdist internals the plugin still uses, each because no public way exists.

Each test fails loudly when a pytest or xdist release changes what the plugin relies on, instead
of a golden run degrading silently (see the comment at each use):

* ``item._request`` (pytest_plugin.attempts.session_fixtures): the session fixtures before setup;
* ``session._fixturemanager.getfixturedefs`` (pytest_plugin.fixtures): whether a conftest
  overrides ``golden_case``;
* ``TestReport._to_json`` / ``_from_json`` (pytest_plugin.xdist): reports crossing xdist;
* ``WorkerInteractor.torun`` / ``nextitem_index`` (pytest_plugin.prefetch): a worker's queue;
* ``_pytest.junitxml.xml_key`` (the JUnit glue): the LogXML object of ``--junitxml``;
* golden node ids parse back to their param (pytest_plugin.params.parse_golden_nodeid).
"""

from __future__ import annotations

import inspect

import pytest

from goldeval.pytest_plugin.params import is_golden_nodeid, parse_golden_nodeid


def test_item_fixture_request_serves_fixtures(pytester: pytest.Pytester) -> None:
    # As the prefetch does: while one item runs, the next item's request serves a fixture.
    pytester.makeconftest(
        """
import pytest

@pytest.fixture(scope="session")
def f():
    return 41

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    nxt = item.session.items[-1]
    request = getattr(nxt, "_request", None)
    assert isinstance(request, pytest.FixtureRequest)
    assert request.getfixturevalue("f") == 41
"""
    )
    pytester.makepyfile("def test_a(): pass\ndef test_b(f): pass\n")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_fixture_manager_lists_the_definitions_of_a_fixture(pytester: pytest.Pytester) -> None:
    # As ItemFixtures._overridden does: one definition, or more once a conftest overrides it.
    pytester.makeconftest(
        """
import pytest

class Plugin:
    @pytest.fixture
    def thing(self):
        return 1

def pytest_configure(config):
    config.pluginmanager.register(Plugin(), "thing-plugin")

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    defs = item.session._fixturemanager.getfixturedefs("thing", item)
    expected = 2 if "override" in item.name else 1
    assert defs is not None and len(defs) == expected, defs
"""
    )
    pytester.makepyfile(test_plain="def test_plain(): pass\n")
    pytester.makepyfile(
        test_override="import pytest\n@pytest.fixture\ndef thing(thing):\n    return 2\n"
        "def test_override(): pass\n"
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=2)


def test_report_json_round_trip(pytester: pytest.Pytester) -> None:
    item = pytester.getitem("def test_func(): pass")
    report = pytest.TestReport.from_item_and_call(
        item, pytest.CallInfo.from_call(lambda: None, "call")
    )
    data = report._to_json()
    assert data["nodeid"] == item.nodeid
    again = pytest.TestReport._from_json(data)
    assert (again.nodeid, again.outcome, again.when) == (report.nodeid, "passed", "call")


def test_xdist_worker_queue_attributes() -> None:
    remote = pytest.importorskip("xdist.remote")
    source = inspect.getsource(remote.WorkerInteractor)
    assert "self.torun" in source
    assert "nextitem_index" in source


def test_junitxml_stash_key() -> None:
    from _pytest.junitxml import xml_key

    assert isinstance(xml_key, pytest.StashKey)


GOLDEN_ROWS = '{"id": "c-1", "prompt": "p", "expect": {"contains": ["x"]}}\n'


def test_golden_node_ids_parse_back_to_their_param(pytester: pytest.Pytester) -> None:
    golden = pytester.path / "golden" / "demo-v1"
    golden.mkdir(parents=True)
    (golden / "dataset.yaml").write_text("version: demo-v1\n")
    (golden / "rows.jsonl").write_text(GOLDEN_ROWS)
    fixtures = golden / "fixtures"
    fixtures.mkdir()
    (fixtures / "c-1.out.md").write_text("x\n")
    result = pytester.runpytest(
        "--golden=demo-v1", "--golden-attempts=2", "--collect-only", "-q", "-p", "no:cacheprovider"
    )
    ids = [line for line in result.outlines if "::" in line]
    assert len(ids) == 2, result.outlines
    for n, nodeid in enumerate(sorted(ids), 1):
        assert is_golden_nodeid(nodeid)
        assert parse_golden_nodeid(nodeid) == ("c-1", n, None)
    assert not is_golden_nodeid("tests/test_x.py::test_golden_other[1]")
    assert parse_golden_nodeid("tests/test_x.py::test_y[c-1-attempt1]") is None


@pytest.mark.parametrize(
    ("param_id", "parsed"),
    [
        # a case id may itself hold "-attempt<n>": the item's attempt is the last one
        ("login-attempt3-attempt1-candidate", ("login-attempt3", 1, "candidate")),
        ("a-attempt3-x-attempt2", ("a-attempt3-x", 2, None)),
        ("c-attempt1-qwen2.5-coder:7b", ("c", 1, "qwen2.5-coder:7b")),
        ("c-1-attempt12", ("c-1", 12, None)),
    ],
)
def test_a_case_id_holding_attempt_parses_back(param_id: str, parsed: tuple[object, ...]) -> None:
    assert parse_golden_nodeid(f"golden/g/g.jsonl::test_golden[{param_id}]") == parsed
