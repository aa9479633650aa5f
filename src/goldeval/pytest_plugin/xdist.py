"""Golden test reports sent from xdist workers to the controller as one JSON string.

xdist ships each report through execnet, which serialises a report's dict value by value in
Python: about two hundred values per item (three reports of location, keywords, outcome,
timings, ...). For a golden item in fixture mode that cost more than running the item, so
``-n 2`` was slower than a serial run. Here a worker encodes a golden item's report with the
C JSON encoder into one string and the controller decodes it, through pytest's public
``pytest_report_to_serializable`` / ``pytest_report_from_serializable`` hooks.

Only golden items' reports, and only on xdist workers (the one place these hooks feed a
transport rather than a file someone reads, such as pytest-reportlog's). Anything the JSON
encoder cannot take (a user property holding an object, say) falls back to pytest's own form.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from goldeval.pytest_plugin.params import is_golden_nodeid

REPORT_TYPE = "goldeval.TestReport"


class CompactReports:
    @pytest.hookimpl(tryfirst=True)
    def pytest_report_to_serializable(
        self, config: pytest.Config, report: Any
    ) -> dict[str, Any] | None:
        if not hasattr(config, "workerinput") or not isinstance(report, pytest.TestReport):
            return None
        if not is_golden_nodeid(report.nodeid):
            return None
        # pytest's own serialised form of the report (what xdist would send); the public hook
        # gives no other way to build it. tests/unit/test_pytest_internals.py checks it exists.
        data = report._to_json()
        try:
            text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):
            return None
        return {"$report_type": REPORT_TYPE, "json": text}

    @pytest.hookimpl(tryfirst=True)
    def pytest_report_from_serializable(
        self, config: pytest.Config, data: dict[str, Any]
    ) -> pytest.TestReport | None:
        if data.get("$report_type") != REPORT_TYPE:
            return None
        decoded = json.loads(data["json"])
        # JSON has no tuples; pytest's own form keeps these as (a, b) pairs.
        decoded["location"] = tuple(decoded["location"])
        decoded["sections"] = [tuple(s) for s in decoded.get("sections") or []]
        decoded["user_properties"] = [
            tuple(p) if isinstance(p, list) else p for p in decoded.get("user_properties") or []
        ]
        return pytest.TestReport._from_json(decoded)  # the inverse of _to_json, see above


def register(config: pytest.Config) -> None:
    """On every process of an xdist run (workers encode, the controller decodes)."""
    if config.pluginmanager.has_plugin("goldeval-compact-reports"):
        return
    if hasattr(config, "workerinput") or getattr(config.option, "numprocesses", None):
        config.pluginmanager.register(CompactReports(), "goldeval-compact-reports")
