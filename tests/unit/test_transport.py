"""Golden reports sent from xdist workers as one JSON string (goldeval.pytest_plugin.xdist)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from goldeval.pytest_plugin.xdist import REPORT_TYPE, CompactReports


def _reports(pytester: pytest.Pytester) -> list[pytest.TestReport]:
    pytester.makepyfile(
        test_x="""
        import pytest

        @pytest.mark.parametrize("x", [1, 2, 3])
        def test_golden(x, record_property):
            record_property("golden.case", f"c{x}")
            print("captured output")
            if x == 3:
                pytest.skip("not needed")
            assert x == 1, "x is not one"
        """
    )
    rec = pytester.inline_run("-p", "no:cacheprovider")
    return [r for r in rec.getreports("pytest_runtest_logreport") if r.when == "call"]


def _plain(data: Any) -> Any:
    return json.loads(json.dumps(data))


def test_round_trip_keeps_every_field(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig()
    config.workerinput = {"workerid": "gw0"}  # type: ignore[attr-defined]
    compact = CompactReports(worker=True)
    reports = _reports(pytester)
    assert [r.outcome for r in reports] == ["passed", "failed", "skipped"]
    for report in reports:
        report.goldeval = {"caseId": "c", "index": 1, "record": "{}"}  # type: ignore[attr-defined]
        data = compact.pytest_report_to_serializable(config, report)
        assert data is not None and data["$report_type"] == REPORT_TYPE
        assert list(data) == ["$report_type", "json"]  # one string to send, not a tree
        back = compact.pytest_report_from_serializable(config, data)
        assert isinstance(back, pytest.TestReport)
        assert _plain(back._to_json()) == _plain(report._to_json())
        assert back.location == report.location and isinstance(back.location, tuple)
        assert back.user_properties == [("golden.case", report.user_properties[0][1])]
        assert back.sections == report.sections and back.sections
        assert back.longreprtext == report.longreprtext
        # A skip's (path, line, reason): the terminal's skip summary (-rs, -ra) needs a tuple.
        assert type(back.longrepr) is type(report.longrepr)
    assert "x is not one" in reports[1].longreprtext
    assert isinstance(reports[2].longrepr, tuple)


def test_only_golden_reports_on_workers_are_compacted(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig()
    compact = CompactReports(worker=True)
    report = _reports(pytester)[0]
    assert compact.pytest_report_to_serializable(config, report) is None  # the controller
    config.workerinput = {"workerid": "gw0"}  # type: ignore[attr-defined]
    other = pytest.TestReport(
        "t.py::test_mine", ("t.py", 0, "test_mine"), {}, "passed", None, "call"
    )
    assert compact.pytest_report_to_serializable(config, other) is None
    report.user_properties.append(("golden.obj", object()))  # not JSON: pytest's own form
    assert compact.pytest_report_to_serializable(config, report) is None
    assert compact.pytest_report_from_serializable(config, {"$report_type": "TestReport"}) is None


def test_an_xdist_run_sends_golden_reports_compact(
    pytester: pytest.Pytester, golden_project: Any
) -> None:
    pytester.makeconftest(
        """
        import collections
        import pytest

        SEEN = collections.Counter()

        @pytest.hookimpl(wrapper=True)
        def pytest_report_from_serializable(config, data):
            SEEN[data.get("$report_type")] += 1
            return (yield)

        def pytest_unconfigure(config):
            if not hasattr(config, "workerinput"):
                print("REPORT TYPES", dict(SEEN))
        """
    )
    result = pytester.runpytest("--golden=generation-v1", "-n", "2", "-s")
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"REPORT TYPES {{'{REPORT_TYPE}': 30}}"])  # 10 items x 3


def test_tx_without_n_decodes_golden_reports_too(
    pytester: pytest.Pytester, golden_project: Any
) -> None:
    """``--tx 2*popen --dist=load`` (xdist without ``-n``): the controller decodes what its
    workers encode (it ended in INTERNALERROR "Unknown report_type")."""
    result = pytester.runpytest("--golden=generation-v1", "--tx", "2*popen", "--dist=load")
    assert result.ret == 0, result.stdout.str()
    assert "INTERNALERROR" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*10 passed*"])
