"""Black-box tests of the fixture-mode pipeline, serial and with ``-n 2``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import SERIAL_ONLY, RunFiles, strip_timings


def test_main_job_runs_dataset_only(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, plugin_args: list[str]
) -> None:
    (golden_project / "test_other.py").write_text("def test_unrelated():\n    pass\n")
    result = pytester.runpytest("--golden=generation-v1", *plugin_args)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=10)
    result.stdout.fnmatch_lines(
        [
            "*goldeval: generation-v1 (fixture)*",
            "*Overall*100.0% (10 / 10)*",
            "*Hallucination (fail rate)*0.0% (0 / 2)*",
            "*goldeval decision: exit 0*",
        ]
    )
    run = run_files.latest()
    assert run["status"] == "COMPLETED"
    assert run["casesTotal"] == 10 and run["attemptsPassed"] == 10
    assert run["metrics"]["overallPassRate"] == {
        "hits": 10,
        "total": 10,
        "rate": 1.0,
        "ci95": run["metrics"]["overallPassRate"]["ci95"],
    }
    assert run["protocol"]["datasetId"] == "generation-v1"
    assert len(run["protocol"]["selectedCaseIds"]) == 10
    assert run["comparison"]["decision"] == "NO_REGRESSION"
    assert run["qualityGate"]["verdict"] == "PASS"
    summary = json.loads((run_files.latest_dir() / "summary.json").read_text())
    assert summary["metrics"]["overallPassRate"]["rate"] == 1.0
    assert "# AI eval report" in (run_files.latest_dir() / "report.md").read_text()
    assert (run_files.latest_dir() / "cases").is_dir()
    assert all("output" not in a for c in run["cases"] for a in c["attempts"])


def test_serial_and_xdist_give_identical_records(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    docs = []
    for args in ([], ["-n", "2"]):
        result = pytester.runpytest(
            "--golden=generation-v1", "--golden-attempts=2", "--golden-no-gate", *args
        )
        assert result.ret == 0, result.stdout.str()
        docs.append(strip_timings(run_files.latest()))
    assert docs[0]["metrics"] == docs[1]["metrics"]
    assert docs[0]["cases"] == docs[1]["cases"]
    assert docs[0]["protocol"] == docs[1]["protocol"]


@SERIAL_ONLY
def test_not_red_deselects_rows_entirely(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, plugin_args: list[str]
) -> None:
    result = pytester.runpytest(
        "--golden=generation-v1", "-m", "not red", "--strict-markers", *plugin_args
    )
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=7, deselected=None if plugin_args else 3)
    run = run_files.latest()
    assert run["casesTotal"] == 7
    ids = run["protocol"]["selectedCaseIds"]
    assert "hallucinate-form-invalid-password" not in ids and len(ids) == 7
    assert run["metrics"]["hallucinationRate"]["rate"] is None
    assert run["configuration"]["includeRed"] is False
    # the default lookup found the baseline saved for this selection
    assert run["baselinePath"].endswith("generation-v1-not-red.json")


def test_tags_are_registered_markers(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    result = pytester.runpytest(
        "--golden=generation-v1", "-m", "smoke", "--strict-markers", "--golden-no-gate"
    )
    result.assert_outcomes(passed=2, deselected=8)
    result = pytester.runpytest("--golden=generation-v1", "--markers")
    result.stdout.fnmatch_lines(["*@pytest.mark.red:*"])


def test_attempts_make_one_item_each_with_stable_ids(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    result = pytester.runpytest(
        "--golden=holdout-v1", "--golden-attempts=3", "--collect-only", "-q", *plugin_args
    )
    out = result.stdout.str()
    assert (
        "golden/holdout/golden-holdout.jsonl::test_golden[holdout-e2e-unknown-user-attempt3]" in out
    )
    result = pytester.runpytest(
        "--golden=holdout-v1", "--golden-attempts=3", "--golden-no-gate", *plugin_args
    )
    result.assert_outcomes(passed=36)


def test_unknown_dataset_is_a_usage_error_listing_ids(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    result = pytester.runpytest("--golden=generation-v9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown dataset 'generation-v9'*generation-v1, holdout-v1*"])


def test_dataset_folder_path_works(pytester: pytest.Pytester, golden_project: Path) -> None:
    result = pytester.runpytest("--golden=golden/holdout")
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=12)


def test_failure_shows_violations_without_traceback(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, plugin_args: list[str]
) -> None:
    fixture = golden_project / "golden/generation/fixtures/e2e-login-happy-alice.out.md"
    fixture.write_text("RAG: po-chain, seed-account\nclass LoginTests {}\n", encoding="utf-8")
    result = pytester.runpytest("--golden=generation-v1", *plugin_args)
    assert result.ret == 1
    result.assert_outcomes(passed=9, failed=1)
    out = result.stdout.str()
    assert "[LAYER/HIGH] ContractGrader: e2e-login-happy-alice missing @Layer(e2e)" in out
    assert "Traceback" not in out and "golden_test.py" not in out
    result.stdout.fnmatch_lines(["*goldeval decision: exit 1 — GATE FAIL*overallPassRate*"])
    run = run_files.latest()
    case = next(c for c in run["cases"] if c["caseId"] == "e2e-login-happy-alice")
    assert case["status"] == "FAIL"
    assert run["comparison"]["cases"][3]["class"] in ("NEW_FAILURE", "UNCHANGED_PASS")
    classes = {c["caseId"]: c["class"] for c in run["comparison"]["cases"]}
    assert classes["e2e-login-happy-alice"] == "NEW_FAILURE"
    # failure artifacts only for the failed case
    cases_dir = run_files.latest_dir() / "cases"
    assert sorted(p.name for p in cases_dir.iterdir()) == ["e2e-login-happy-alice"]
    assert "class LoginTests" in (cases_dir / "e2e-login-happy-alice/output.md").read_text()


def test_a_rows_file_without_rows_is_a_clear_error(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    """It was INTERNALERROR (pytest's empty-parameter-set item has no golden param)."""
    rows = golden_project / "golden/generation/golden-generation.jsonl"
    rows.write_text("# no rows yet\n", encoding="utf-8")
    result = pytester.runpytest("--golden=generation-v1", "--golden-no-gate", *plugin_args)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, out[-2000:]
    assert "INTERNALERROR" not in out and "Traceback" not in out, out[-2000:]
    assert "golden-generation.jsonl: the rows file has no rows" in out, out[-2000:]


def test_an_xfail_marker_does_not_hide_a_fail_attempt(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, plugin_args: list[str]
) -> None:
    """A conftest marking golden items xfail made pytest exit 0 with a FAIL attempt, and the
    ungated run said "every graded attempt ok" with exit 0."""
    fixture = golden_project / "golden/generation/fixtures/e2e-login-happy-alice.out.md"
    fixture.write_text("RAG: po-chain, seed-account\nclass LoginTests {}\n", encoding="utf-8")
    pytester.makeconftest(
        """
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.xfail(reason="hide it"))
"""
    )
    result = pytester.runpytest("--golden=generation-v1", "--golden-no-gate", *plugin_args)
    assert result.ret == 1, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*goldeval decision: exit 1 — 1 FAIL attempt(s)*"])
    assert run_files.latest()["exitDecision"]["code"] == 1


@pytest.mark.parametrize(
    "hook",
    [
        "session.exitstatus = 0",
        "pytest.exit('done', returncode=0)",
    ],
)
def test_a_later_hook_cannot_turn_the_decided_failure_into_exit_0(
    pytester: pytest.Pytester,
    golden_project: Path,
    run_files: RunFiles,
    plugin_args: list[str],
    hook: str,
) -> None:
    """A project's ``trylast`` sessionfinish hook that set the status to 0 (or called
    ``pytest.exit(returncode=0)``) made a failed gate exit 0, and the service answered
    ``passed: true``. The decision is put back, and stderr says a hook changed it."""
    fixture = golden_project / "golden/generation/fixtures/e2e-login-happy-alice.out.md"
    fixture.write_text("RAG: po-chain, seed-account\nclass LoginTests {}\n", encoding="utf-8")
    pytester.makeconftest(
        f"""
import pytest

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    {hook}
"""
    )
    result = pytester.runpytest("--golden=generation-v1", *plugin_args)
    assert result.ret == 1, result.stdout.str()[-2000:]
    result.stderr.fnmatch_lines(
        [
            "*a pytest_sessionfinish hook set pytest's exit status to 0 after goldeval decided"
            " exit 1*; pytest exits 1"
        ]
    )
    assert run_files.latest()["exitDecision"]["code"] == 1


def test_sys_exit_0_from_a_later_unconfigure_hook_keeps_the_decided_failure(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    """``sys.exit(0)`` in a project's ``pytest_unconfigure`` ended pytest with 0 whatever its
    status (plain pytest does the same): a failed gate exited 0."""
    fixture = golden_project / "golden/generation/fixtures/e2e-login-happy-alice.out.md"
    fixture.write_text("RAG: po-chain, seed-account\nclass LoginTests {}\n", encoding="utf-8")
    pytester.makeconftest(
        """
import sys

def pytest_unconfigure(config):
    sys.exit(0)
"""
    )
    result = pytester.runpytest_subprocess("--golden=generation-v1", *plugin_args)
    assert result.ret == 1, result.stdout.str()[-2000:]
    assert "a pytest_unconfigure hook set pytest's exit status to 0" in result.stderr.str()


@pytest.mark.parametrize("where", ["unconfigure-status", "collected-conftest-wrapper"])
def test_hooks_registered_or_run_after_the_guard_cannot_exit_0_either(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str], where: str
) -> None:
    """A probe found two more: ``session.exitstatus = 0`` from ``pytest_unconfigure`` (pytest
    returns the status after unconfigure), and a ``tryfirst`` sessionfinish wrapper in a
    conftest.py that collection loads (registered after the guard, so called before it)."""
    fixture = golden_project / "golden/generation/fixtures/e2e-login-happy-alice.out.md"
    fixture.write_text("RAG: po-chain, seed-account\nclass LoginTests {}\n", encoding="utf-8")
    if where == "unconfigure-status":
        pytester.makeconftest(
            """
import pytest
SESSION = []

def pytest_sessionstart(session):
    SESSION.append(session)

def pytest_unconfigure(config):
    SESSION[0].exitstatus = 0
"""
        )
    else:
        (golden_project / "golden" / "conftest.py").write_text(
            """
import pytest

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session):
    yield
    session.exitstatus = 0
""",
            encoding="utf-8",
        )
    result = pytester.runpytest_subprocess("--golden=generation-v1", *plugin_args)
    assert result.ret == 1, result.stdout.str()[-2000:]
    # An xdist controller collects nothing, so it never loads golden/conftest.py.
    if where == "unconfigure-status" or "-n" not in plugin_args:
        assert "hook set pytest's exit status to 0" in result.stderr.str()


def test_a_later_hook_may_still_fail_a_passing_run(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str]
) -> None:
    """Only a green is refused: a hook failing a passing run (coverage under its threshold)
    keeps its status."""
    pytester.makeconftest(
        """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    session.exitstatus = 3
"""
    )
    result = pytester.runpytest("--golden=generation-v1", *plugin_args)
    assert result.ret == 3, result.stdout.str()[-2000:]
    assert "goldeval: a pytest_sessionfinish hook" not in result.stderr.str()


@pytest.mark.parametrize("mode,expected", [("always", 10), ("never", 0)])
def test_artifact_modes(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, mode: str, expected: int
) -> None:
    result = pytester.runpytest("--golden=generation-v1", f"--golden-artifacts={mode}")
    assert result.ret == 0
    assert len(list((run_files.latest_dir() / "cases").iterdir())) == expected


@SERIAL_ONLY
def test_provider_error_is_error_not_failure(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, plugin_args: list[str]
) -> None:
    pytester.makeconftest(
        """
        import pytest
        from pathlib import Path
        from goldeval import ProviderError

        @pytest.fixture(scope="session")
        def golden_provider():
            def app(case):
                if case.id.startswith("refuse"):
                    raise ProviderError("MODEL_UNAVAILABLE", "connection refused")
                return Path(f"golden/generation/fixtures/{case.id}.out.md").read_text()
            return app
        """
    )
    result = pytester.runpytest("--golden=generation-v1", *plugin_args)
    result.assert_outcomes(passed=8, errors=2)
    assert result.ret == 75, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["*ERROR MODEL_UNAVAILABLE*connection refused*", "*goldeval decision: exit 75*"]
    )
    run = run_files.latest()
    assert run["attemptsError"] == 2 and run["casesError"] == 2
    assert run["metrics"]["overallPassRate"]["total"] == 8


def test_every_attempt_error_gives_75_and_no_quality_figures(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    pytester.makeconftest(
        """
        import pytest
        from goldeval import ProviderError

        @pytest.fixture(scope="session")
        def golden_provider():
            def down(case):
                raise ProviderError("MODEL_UNAVAILABLE", "down")
            return down
        """
    )
    result = pytester.runpytest("--golden=generation-v1")
    assert result.ret == 75
    run = run_files.latest()
    for name in ("overallPassRate", "contractPassRate", "negativeCasePassRate"):
        assert run["metrics"][name]["rate"] is None
    result.stdout.fnmatch_lines(["*Overall*n/a*"])


def test_user_callable_provider_in_conftest(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def golden_provider():
            return lambda case: "Отказ. Нет." if case.expect.get("refuse") else "wrong"
        """
    )
    result = pytester.runpytest("--golden=generation-v1", "--golden-no-gate")
    result.assert_outcomes(passed=3, failed=7)
    assert result.ret == 1
    assert run_files.latest()["metrics"]["refusalAccuracy"]["rate"] == 1.0


def test_plain_pytest_without_golden_creates_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    before = set(pytester.path.rglob("*"))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    created = {p for p in set(pytester.path.rglob("*")) - before if "__pycache__" not in p.parts}
    assert created == set()


def test_help_lists_options(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--golden=ID*", "*--golden-mode=*", "*--golden-attempts=N*"])


def test_nothing_graded_is_never_green(pytester: pytest.Pytester, golden_project: Path) -> None:
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture(scope="session")
        def golden_provider():
            def skip(case):
                pytest.skip("not today")
            return skip
        """
    )
    result = pytester.runpytest("--golden=generation-v1")
    result.assert_outcomes(skipped=10)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*nothing was graded*"])
