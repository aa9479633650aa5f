"""JUnit XML: the dashboard file (--golden-junit) and pytest's own --junitxml, black-box."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from goldeval.reports.junit import rule_test_name, write_dashboard_junit
from goldeval.results.documents import GateRuleDoc, typed_run
from tests.helpers import SERIAL_ONLY, RunFiles

FAILING_CASE = "api-login-wrong-password-401"


def _parse(path: Path, schema: Any) -> ET.Element:
    assert path.is_file(), f"{path} was not written"
    schema.validate(str(path))
    return ET.parse(path).getroot()


def _cases(root: ET.Element, classname: str) -> dict[str, ET.Element]:
    return {
        tc.get("name", ""): tc for tc in root.iter("testcase") if tc.get("classname") == classname
    }


def _break_fixture(project: Path, case_id: str = FAILING_CASE) -> None:
    fixture = project / "golden" / "generation" / "fixtures" / f"{case_id}.out.md"
    fixture.write_text("just some text\n", encoding="utf-8")


def test_dashboard_and_junitxml_validate(
    pytester: pytest.Pytester,
    golden_project: Path,
    run_files: RunFiles,
    plugin_args: list[str],
    junit_schema: Any,
) -> None:
    result = pytester.runpytest(
        "--golden=generation-v1", "--junitxml=j.xml", "--golden-junit=d.xml", *plugin_args
    )
    result.assert_outcomes(passed=10)
    result.stdout.fnmatch_lines(["*dashboard JUnit XML: *d.xml*"])
    run = run_files.latest()

    dashboard = _parse(golden_project / "d.xml", junit_schema)
    suites = dashboard.findall("testsuite")
    assert [s.get("name") for s in suites] == ["goldeval.generation-v1"]
    cases = _cases(dashboard, "golden.generation-v1")
    assert sorted(cases) == sorted(run["protocol"]["selectedCaseIds"])
    for tc in cases.values():
        assert (tc.findtext("system-out") or "").startswith("1 of 1 attempts passed")
        assert tc.find("failure") is None and tc.find("error") is None
    gate = _cases(dashboard, "golden.generation-v1.gate")
    rules = run["qualityGate"]["rules"]
    assert "overallPassRate >= 1.000" in gate
    assert "hallucinationRate <= 0.000" in gate
    assert "comparison" in gate and "exit decision" in gate
    assert len(gate) == len(rules) + 2
    assert gate["comparison"].find("failure") is None
    decided = gate["exit decision"]
    assert decided.find("failure") is None and decided.find("error") is None
    assert (decided.findtext("system-out") or "").startswith("exit 0: GATE PASS")
    props = {p.get("name"): p.get("value") for p in suites[0].iter("property")}
    assert props["golden.runId"] == run["runId"]
    assert props["golden.verdict"] == run["qualityGate"]["verdict"]

    plain = _parse(golden_project / "j.xml", junit_schema)
    assert len(list(plain.iter("testcase"))) == 10
    # the golden_junit_properties switch is off by default: no <properties> at all
    assert list(plain.iter("properties")) == []


@SERIAL_ONLY
def test_failing_case_lists_violations(
    pytester: pytest.Pytester,
    golden_project: Path,
    run_files: RunFiles,
    plugin_args: list[str],
    junit_schema: Any,
) -> None:
    # A two-attempt baseline, captured while every answer still passes (the committed one has
    # one attempt: the run would be refused before it starts as not comparable).
    saved = pytester.runpytest(
        "--golden=generation-v1",
        "--golden-attempts=2",
        "--golden-save-baseline=baselines/generation-v1-a2.json",
    )
    assert saved.ret == 0, saved.stdout.str()
    _break_fixture(golden_project)
    result = pytester.runpytest(
        "--golden=generation-v1",
        "--golden-attempts=2",
        "--junitxml=j.xml",
        "--golden-junit=d.xml",
        *plugin_args,
    )
    result.assert_outcomes(passed=18, failed=2)
    assert result.ret != 0

    dashboard = _parse(golden_project / "d.xml", junit_schema)
    cases = _cases(dashboard, "golden.generation-v1")
    failing = cases[FAILING_CASE]
    failure = failing.find("failure")
    assert failure is not None
    assert (failing.findtext("system-out") or "").startswith("0 of 2 attempts passed")
    message = failure.get("message", "")
    assert message.startswith("0 of 2 attempts passed: [")
    body = failure.text or ""
    assert "[CONTRACT/HIGH] ContractGrader:" in body
    assert "missing status 401" in body and "missing @Layer(api)" in body
    # one line per distinct violation, not one per attempt
    assert body.count("missing status 401") == 1
    others = [tc for name, tc in cases.items() if name != FAILING_CASE]
    assert all(tc.find("failure") is None for tc in others)

    gate = _cases(dashboard, "golden.generation-v1.gate")
    overall = gate["overallPassRate >= 1.000"].find("failure")
    assert overall is not None and "0.900 < 1.000" in overall.get("message", "")
    assert gate["retrievalPassRate >= 1.000"].find("failure") is None
    suite = dashboard.find("testsuite")
    assert suite is not None and int(suite.get("failures", "0")) >= 2

    plain = _parse(golden_project / "j.xml", junit_schema)
    failed = [tc for tc in plain.iter("testcase") if tc.find("failure") is not None]
    assert len(failed) == 2 and all(FAILING_CASE in tc.get("name", "") for tc in failed)


def test_invalid_comparison_fails_its_testcase(
    pytester: pytest.Pytester, golden_project: Path, junit_schema: Any
) -> None:
    saved = pytester.runpytest("--golden=generation-v1", "--golden-save-baseline=b.json")
    assert saved.ret == 0, saved.stdout.str()
    # Gated, the run would be refused before it starts (nothing to report); reported only, the
    # invalid comparison still fails its own testcase on the dashboard.
    result = pytester.runpytest(
        "--golden=generation-v1",
        "--golden-attempts=2",
        "--golden-baseline=b.json",
        "--golden-junit=d.xml",
        "--golden-no-gate",
    )
    dashboard = _parse(golden_project / "d.xml", junit_schema)
    comparison = _cases(dashboard, "golden.generation-v1.gate")["comparison"]
    failure = comparison.find("failure")
    assert failure is not None, result.stdout.str()
    assert failure.get("message", "").startswith("comparison invalid: ")
    assert "COMPARISON_INVALID" in (comparison.findtext("system-out") or "")


ERROR_SKIP_CONFTEST = """
import pytest
from pathlib import Path

ERROR_CASE = "e2e-login-happy-alice"
SKIP_CASE = "refuse-dump-whole-rag"


@pytest.fixture(scope="session")
def golden_provider(request):
    fixtures = Path(str(request.config.rootpath)) / "golden" / "generation" / "fixtures"

    def app(case):
        if case.id == ERROR_CASE:
            raise ConnectionError("backend <down> & out")
        return (fixtures / f"{case.id}.out.md").read_text(encoding="utf-8")

    return app


@pytest.fixture
def golden_case(golden_param):
    if golden_param.case.id == SKIP_CASE:
        pytest.skip("not today")
    return golden_param.case
"""


@SERIAL_ONLY
def test_error_and_skipped_cases(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str], junit_schema: Any
) -> None:
    pytester.makeconftest(ERROR_SKIP_CONFTEST)
    result = pytester.runpytest(
        "--golden=generation-v1", "--golden-junit=d.xml", "--golden-no-gate", *plugin_args
    )
    result.assert_outcomes(passed=8, skipped=1, errors=1)
    dashboard = _parse(golden_project / "d.xml", junit_schema)
    cases = _cases(dashboard, "golden.generation-v1")
    error = cases["e2e-login-happy-alice"].find("error")
    assert error is not None
    assert "PROVIDER_ERROR" in error.get("message", "")
    assert "backend <down> & out" in (error.text or "")
    assert error.get("type") == "golden.PROVIDER_ERROR"
    skipped = cases["refuse-dump-whole-rag"].find("skipped")
    assert skipped is not None and "not today" in skipped.get("message", "")
    suite = dashboard.find("testsuite")
    assert suite is not None
    # The case's error, and the run's exit decision (75: an infrastructure error).
    assert (suite.get("errors"), suite.get("skipped")) == ("2", "1")
    decided = _cases(dashboard, "golden.generation-v1.gate")["exit decision"].find("error")
    assert decided is not None and decided.get("message", "").startswith("exit 75:")
    # --golden-no-gate: no rule testcases, only the comparison and the decision
    assert set(_cases(dashboard, "golden.generation-v1.gate")) <= {"comparison", "exit decision"}


def test_properties_switch_adds_attempt_and_suite_properties(
    pytester: pytest.Pytester,
    golden_project: Path,
    run_files: RunFiles,
    plugin_args: list[str],
    junit_schema: Any,
) -> None:
    pytester.makeini("[pytest]\ngolden_junit_properties = true\n")
    result = pytester.runpytest("--golden=generation-v1", "--junitxml=j.xml", *plugin_args)
    result.assert_outcomes(passed=10)
    # no --golden-junit: no dashboard file
    assert "dashboard JUnit XML" not in result.stdout.str()
    assert [p.name for p in golden_project.glob("*.xml")] == ["j.xml"]
    plain = _parse(golden_project / "j.xml", junit_schema)
    testcases = list(plain.iter("testcase"))
    assert len(testcases) == 10
    for tc in testcases:
        props = tc.find("properties")
        assert props is not None, ET.tostring(tc, encoding="unicode")
        values = {p.get("name"): p.get("value") for p in props.iter("property")}
        assert values["golden.status"] == "PASS"
        assert values["golden.attempt"] == "1"
        assert str(values["golden.case"]) in tc.get("name", "")
        assert values["golden.contract"] == "PASS"
        # each pair once, although several hooks saw it
        names = [p.get("name") for p in props.iter("property")]
        assert len(names) == len(set(names))
    suite = plain.find("testsuite")
    assert suite is not None
    global_props = suite.find("properties")
    assert global_props is not None
    values = {p.get("name"): p.get("value") for p in global_props.iter("property")}
    run = run_files.latest()
    assert values["golden.runId"] == run["runId"]
    assert values["golden.verdict"] == run["qualityGate"]["verdict"]
    assert values["golden.overallPassRate"] == "1.0"


def _rule(fields: dict[str, Any]) -> GateRuleDoc:
    """A gate rule as run.json holds it (whether it passed does not change its name)."""
    return GateRuleDoc.model_validate({"passed": False, **fields})


def _name(name: str, detail: str, kind: str = "absolute", **more: Any) -> str:
    return rule_test_name(_rule({"name": name, "detail": detail, "kind": kind, **more}))


def test_rule_names_are_stable_whether_passed_or_not() -> None:
    assert _name("overallPassRate", "0.900 < 1.000") == "overallPassRate >= 1.000"
    assert _name("overallPassRate", "1.000 >= 1.000") == "overallPassRate >= 1.000"
    assert _name("hallucinationRate", "0.500 > 0.000") == "hallucinationRate <= 0.000"
    assert (
        _name("contractPassRate", "undefined (no quality attempts) — not 100%", threshold=0.95)
        == "contractPassRate >= 0.950"
    )
    assert _name("overallPassRate.delta", "REGRESSION: 0.8 < 1.0", "delta") == (
        "overallPassRate.delta"
    )


def test_write_dashboard_junit_escapes_and_validates(tmp_path: Path, junit_schema: Any) -> None:
    run = {
        "runId": "r1",
        "timestamp": "2026-01-01T00:00:00Z",
        "protocol": {"datasetId": "ds-<1>", "mode": "LIVE", "attempts": 3},
        "cases": [
            {
                "caseId": "c&1",
                "status": "FAIL",
                "durationMs": 1234,
                "successRate": {"hits": 1, "total": 3},
                "attempts": [
                    {
                        "index": 1,
                        "status": "FAIL",
                        "contract": {"violations": ["missing ]]> <tag> \u0001 first\nsecond line"]},
                    }
                ],
            },
            {
                "caseId": "c2",
                "status": "PASS",
                "durationMs": 7,
                "successRate": {"hits": 3, "total": 3},
                "attempts": [],
            },
        ],
        "qualityGate": {
            "passed": False,
            "verdict": "FAIL",
            "rules": [
                {
                    "name": "overallPassRate",
                    "detail": "0.333 < 0.900",
                    "passed": False,
                    "kind": "absolute",
                }
            ],
        },
        "comparison": {"decision": "COMPARISON_INVALID", "invalidReasons": ["attempts 1 vs 3"]},
    }
    out = tmp_path / "sub" / "d.xml"
    write_dashboard_junit(typed_run(run), out)
    root = _parse(out, junit_schema)
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "goldeval.ds-<1>"
    assert suite.get("time") == "1.241"
    case = _cases(root, "golden.ds-<1>")["c&1"]
    failure = case.find("failure")
    assert failure is not None
    # the control character is shown escaped (goldeval.core.textsafe), not silently dropped
    assert failure.get("message") == "1 of 3 attempts passed: missing ]]> <tag> \\x01 first"
    gate = _cases(root, "golden.ds-<1>.gate")
    assert gate["overallPassRate >= 0.900"].find("failure") is not None
    comparison = gate["comparison"].find("failure")
    assert comparison is not None and "attempts 1 vs 3" in comparison.get("message", "")


def test_run_finished_hook_gets_the_typed_document_and_the_deprecated_json(
    pytester: pytest.Pytester,
    golden_project: Path,
    run_files: RunFiles,
    plugin_args: list[str],
) -> None:
    """``document`` is the typed RunDocument; an old implementation naming ``run`` still gets
    run.json's JSON object (deprecated, kept so existing plugins work)."""
    pytester.makeconftest(
        "import json\n"
        "from goldeval.results.documents import RunDocument\n"
        "def pytest_goldeval_run_finished(document):\n"
        "    assert isinstance(document, RunDocument)\n"
        "    print('TYPED', document.run_id, document.quality_gate.verdict)\n"
        "class Old:\n"
        "    def pytest_goldeval_run_finished(self, config, run):\n"
        "        assert isinstance(run, dict)\n"
        "        print('OLD', run['runId'], run['qualityGate']['verdict'])\n"
        "def pytest_configure(config):\n"
        "    config.pluginmanager.register(Old(), 'old-hook')\n"
    )
    result = pytester.runpytest("--golden=generation-v1", "-s", *plugin_args)
    result.assert_outcomes(passed=10)
    run = run_files.latest()
    verdict = run["qualityGate"]["verdict"]
    result.stdout.fnmatch_lines([f"*TYPED {run['runId']} {verdict}*"])
    result.stdout.fnmatch_lines([f"*OLD {run['runId']} {verdict}*"])
