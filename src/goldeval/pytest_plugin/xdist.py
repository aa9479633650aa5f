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

from goldeval.pytest_plugin.config_keys import (
    PAYLOAD_ATTR,
    RESUME_DESELECTED,
    RESUME_DESELECTED_OUTPUT,
    STATE_KEY,
)
from goldeval.pytest_plugin.params import is_golden_nodeid
from goldeval.pytest_plugin.protocol import provider_label

REPORT_TYPE = "goldeval.TestReport"
#: The key of the provider label in xdist's ``workeroutput``.
PROVIDER_KEY = "goldeval_provider"


class CompactReports:
    def __init__(self, worker: bool) -> None:
        #: This process is an xdist worker (else the controller).
        self.worker = worker

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
        if isinstance(decoded.get("longrepr"), list):  # a skip's (path, line, reason)
            decoded["longrepr"] = tuple(decoded["longrepr"])
        decoded["sections"] = [tuple(s) for s in decoded.get("sections") or []]
        decoded["user_properties"] = [
            tuple(p) if isinstance(p, list) else p for p in decoded.get("user_properties") or []
        ]
        return pytest.TestReport._from_json(decoded)  # the inverse of _to_json, see above

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Worker: the attempt's record has left with the report (xdist sends it from its own
        ``pytest_runtest_logreport``); pytest keeps every report until the end, so the copy
        goes, as the controller's goes once folded into the run (a failing attempt's record
        holds its answer: goldeval.results.text_spool)."""
        if self.worker and hasattr(report, PAYLOAD_ATTR):
            delattr(report, PAYLOAD_ATTR)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Worker: name the provider it used (a conftest override) for the run's protocol.

        The controller runs no item, so it never builds ``golden_provider``: without this, a
        team's app run with ``-n 2`` was recorded as the built-in provider, and compared with
        a serial baseline of the same app it was "not comparable" (exit 65). Sent with xdist's
        ``workeroutput`` when the worker finishes (xdist sends it after this hook).
        """
        output = getattr(session.config, "workeroutput", None)
        state = session.config.stash.get(STATE_KEY, None)
        if output is not None and state is not None:
            label = provider_label(state)
            if label is not None:
                output[PROVIDER_KEY] = label

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """Controller: the provider a worker named (any worker that ran an item names it), and
        how many items its run key left out as graded before."""
        output = getattr(node, "workeroutput", None) or {}
        label = output.get(PROVIDER_KEY)
        state = node.config.stash.get(STATE_KEY, None)
        if isinstance(label, str) and state is not None:
            state.workers_provider = label
        # Every worker collects and deselects the same items: any one's figure is the run's.
        deselected = output.get(RESUME_DESELECTED_OUTPUT)
        if isinstance(deselected, int):
            config = node.config
            config.stash[RESUME_DESELECTED] = max(
                config.stash.get(RESUME_DESELECTED, 0), deselected
            )


def distributes(config: pytest.Config) -> bool:
    """Whether this process is an xdist controller sending items to workers: ``-n N``, or
    ``--tx SPEC --dist MODE`` without ``-n`` (xdist sets ``tx`` for ``-n`` before configure)."""
    if hasattr(config, "workerinput"):
        return False
    option = config.option
    return getattr(option, "dist", "no") != "no" and bool(
        getattr(option, "tx", None) or getattr(option, "numprocesses", None)
    )


def register(config: pytest.Config) -> None:
    """On every process of an xdist run (workers encode, the controller decodes)."""
    if config.pluginmanager.has_plugin("goldeval-compact-reports"):
        return
    if hasattr(config, "workerinput") or distributes(config):
        worker = hasattr(config, "workerinput")
        config.pluginmanager.register(CompactReports(worker), "goldeval-compact-reports")
