"""The per-item fixtures and the plugin objects registered per run (black box)."""

from __future__ import annotations

from pathlib import Path

import pytest

from goldeval.pytest_plugin import hooks as plugin
from goldeval.pytest_plugin.params import PARAM_ARG
from tests.helpers import SERIAL_ONLY


def test_plugin_module_names_the_param_argument_without_importing_it() -> None:
    assert plugin._PARAM_ARG == PARAM_ARG


def test_each_item_sets_up_one_fixture_and_no_request(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    """Each fixture in an item's chain is set up per item, and `request` costs pytest a new
    fixture definition each time it is asked for: an item's chain is golden_answer (the
    parametrised one) alone, as a plain parametrised test has one fixture per item."""
    result = pytester.runpytest(
        "--golden=generation-v1", "--golden-no-gate", "--setup-show", "-v", "-k", "e2e-login-happy"
    )
    text = result.stdout.str()
    item_lines = [ln for ln in result.stdout.lines if "(fixtures used:" in ln]
    assert len(item_lines) == 1
    assert "(fixtures used: golden_answer)" in item_lines[0]
    assert "SETUP    F golden_answer[" in text
    assert "golden_case" not in text and "golden_param" not in text
    assert "request" not in item_lines[0]


def test_an_overriding_golden_case_joins_the_chain_only_when_defined(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def golden_case(golden_case):  # extends ours: same case, another prompt
            import dataclasses
            return dataclasses.replace(golden_case, prompt=golden_case.prompt + " ")
        """
    )
    result = pytester.runpytest(
        "--golden=generation-v1", "--setup-show", "-k", "e2e-login-happy", "--golden-no-gate"
    )
    text = result.stdout.str()
    assert "SETUP    F golden_case" in text, text[-3000:]
    assert result.ret == 0, text[-3000:]


@SERIAL_ONLY
def test_overriding_golden_case_with_param_and_attempt(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    log = golden_project / "seen.txt"
    pytester.makeconftest(
        f"""
        import dataclasses
        import pytest

        @pytest.fixture
        def golden_case(golden_param, golden_attempt):
            with open({str(log)!r}, "a", encoding="utf-8") as fh:
                fh.write(f"{{golden_param.case.id}} {{golden_attempt}}\\n")
            # drop the prompt's words: the retriever then finds nothing for RAG rows
            return dataclasses.replace(golden_param.case, prompt="zzz")
        """
    )
    # --golden-no-gate: two attempts are not the committed baseline's protocol (refused early)
    result = pytester.runpytest(
        "--golden=generation-v1", "--golden-attempts=2", "--golden-no-gate", *plugin_args
    )
    seen = sorted(log.read_text(encoding="utf-8").split("\n")[:-1])
    assert len(seen) == 20 and {s.rsplit(" ", 1)[1] for s in seen} == {"1", "2"}
    # the overriding case is the one graded: retrieval of "zzz" misses the expected chunks
    result.stdout.fnmatch_lines(["*RetrievalGrader: retrieved*"])
    assert result.ret != 0


def test_asking_for_golden_case_outside_the_dataset_is_a_clear_error(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    pytester.makepyfile(test_mine="def test_mine(golden_case):\n    pass\n")
    result = pytester.runpytest("--golden=generation-v1", "test_mine.py")
    result.stdout.fnmatch_lines(["*golden_case/golden_param/golden_answer serve the golden items*"])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(
    ("args", "ini", "expected"),
    [
        ([], "", {"goldeval-html": False, "goldeval-junit-properties": False}),
        (["--html=r.html"], "", {"goldeval-html": True, "goldeval-junit-properties": False}),
        ([], "golden_junit_properties = true\n", {"goldeval-junit-properties": True}),
    ],
    ids=["neither", "html", "junit-properties"],
)
def test_report_hook_wrappers_are_registered_only_when_used(
    pytester: pytest.Pytester,
    golden_project: Path,
    args: list[str],
    ini: str,
    expected: dict[str, bool],
) -> None:
    """Each report hook wrapper costs every item of every run."""
    pytester.makeini("[pytest]\n" + ini)
    pytester.makeconftest(
        """
        def pytest_sessionstart(session):
            pm = session.config.pluginmanager
            for name in ("goldeval-html", "goldeval-junit-properties"):
                print(f"PLUGIN {name} {pm.has_plugin(name)}")
        """
    )
    result = pytester.runpytest("--golden=generation-v1", "-s", *args)
    assert result.ret == 0
    for name, present in expected.items():
        result.stdout.fnmatch_lines([f"PLUGIN {name} {present}"])
