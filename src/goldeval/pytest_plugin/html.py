"""pytest-html glue (``--html=report.html --self-contained-html``); the HTML itself is
rendered by :mod:`goldeval.reports.html` from the run document and the attempt records.

* ``pytest_html_results_summary`` puts the golden run at the top of the summary. The run
  document is ``state.run``, built by the controller's ``tryfirst`` ``pytest_sessionfinish``,
  before pytest-html's ``trylast`` one calls the summary hooks.
* A ``pytest_runtest_makereport`` wrapper appends to ``report.extras`` an expandable section
  per attempt: prompt, answer, what was retrieved, violations, the judge's reasons.
"""

from __future__ import annotations

import json
from collections.abc import Generator

import pytest

from goldeval.pipeline.attempt import case_facts
from goldeval.pytest_plugin.fixtures import param_of
from goldeval.pytest_plugin.state import PAYLOAD_ATTR, GoldenSession
from goldeval.reports.html import render_attempt, render_summary
from goldeval.results.documents import typed_run

#: The name the glue is registered under.
PLUGIN_NAME = "goldeval-html"


class HtmlGlue:
    """pytest-html hooks; registered only when the ``html`` plugin is present and asked for."""

    def __init__(self, config: pytest.Config, state: GoldenSession) -> None:
        self.config = config
        self.state = state

    def _active(self) -> bool:
        return bool(self.config.getoption("htmlpath", default=None))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        payload = getattr(report, PAYLOAD_ATTR, None)
        if payload is not None and self._active():
            plugin = self.config.pluginmanager.getplugin("html")
            if plugin is not None:
                param = param_of(item)
                section = render_attempt(
                    {
                        "case": case_facts(param.case) if param is not None else {},
                        "attempt": json.loads(payload["record"]),
                    }
                )
                extras = list(getattr(report, "extras", None) or [])
                extras.append(plugin.extras.html(section))
                report.extras = extras  # type: ignore[attr-defined]
        return report

    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: pytest.Session
    ) -> None:
        run = self.state.run
        if run is None:
            return
        # Models side by side (--golden-models): one section per model's run.
        runs = self.state.benchmark or [run]
        prefix[0:0] = [
            render_summary(typed_run(r), "goldeval-summary" if i == 0 else f"goldeval-summary-{i}")
            for i, r in enumerate(runs)
        ]


def register(config: pytest.Config, state: GoldenSession) -> None:
    """Register the pytest-html glue when pytest-html is installed and a report is asked for
    (a report hook wrapper costs every item of every run)."""
    if not config.pluginmanager.hasplugin("html") or not config.getoption("htmlpath", None):
        return
    if config.pluginmanager.get_plugin(PLUGIN_NAME) is None:
        config.pluginmanager.register(HtmlGlue(config, state), PLUGIN_NAME)
