"""pytest glue of the JUnit reports (the pure XML lives in :mod:`goldeval.reports.junit`).

* :class:`JunitGlue` writes the dashboard file of ``--golden-junit=PATH`` at the end of the
  session (controller only) and, with the ``golden_junit_properties`` ini switch, adds the
  suite's aggregates as global properties of pytest's own ``--junitxml``;
* :class:`JunitPropertiesGlue` (same switch) carries the per-attempt ``golden.*`` properties
  over to the item, where pytest's junitxml reads them. Strict validators reject testcase
  properties, hence the switch.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from goldeval.core.errors import GoldevalError
from goldeval.pytest_plugin.state import GoldenSession
from goldeval.reports.junit import write_dashboard_junit_runs
from goldeval.results.documents import RunDocument, typed_run
from goldeval.verdict.comparison import comparison_label
from goldeval.verdict.gate_label import gate_label

_XML_KEY: Any
try:
    # No public way to reach the LogXML object of --junitxml: pytest keeps it in config.stash
    # under this private key. test_properties_switch_adds_attempt_and_suite_properties
    # (tests/reports/test_junit.py) fails if pytest moves it (the global properties vanish).
    from _pytest.junitxml import xml_key as _XML_KEY
except ImportError:  # pragma: no cover - private API moved
    _XML_KEY = None

#: Prefix of the per-attempt user properties written into pytest's own ``--junitxml``.
PROPERTY_PREFIX = "golden."


class JunitGlue:
    """Registered in every process: the dashboard file is written by the controller only."""

    def __init__(self, config: pytest.Config, state: GoldenSession) -> None:
        self.config = config
        self.state = state
        self.written: Path | None = None
        self.failed: str | None = None

    def _target(self) -> Path | None:
        raw = self.state.settings.junit_path
        if not raw:
            return None
        path = Path(raw)
        return path if path.is_absolute() else Path(self.config.invocation_params.dir) / path

    def pytest_goldeval_run_finished(self, config: pytest.Config, document: RunDocument) -> None:
        """Suite aggregates as global properties of ``--junitxml`` (before it is written)."""
        if not config.getini("golden_junit_properties") or _XML_KEY is None:
            return
        xml = config.stash.get(_XML_KEY, None)
        if xml is None:
            return
        run = document
        metric = run.metrics.overall_pass_rate if run.metrics is not None else None
        comparison = run.comparison
        values = {
            "golden.runId": run.run_id,
            "golden.dataset": run.protocol.dataset_id if run.protocol is not None else None,
            "golden.overallPassRate": metric.rate if metric is not None else None,
            "golden.verdict": gate_label(run),
            "golden.comparison": comparison_label(comparison)[0] if comparison else None,
            "golden.exitCode": run.exit_decision.code if run.exit_decision is not None else None,
        }
        for name, value in values.items():
            if value is not None:
                xml.add_global_property(name, str(value))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        target = self._target()
        if target is None or self.state.is_worker or self.state.run is None:
            return
        runs = self.state.benchmark or [self.state.run]
        try:
            write_dashboard_junit_runs([typed_run(r) for r in runs], target)
        except (OSError, GoldevalError) as exc:
            # checked before the run (pytest_plugin.write_targets): what changed since
            self.failed = f"{target}: {getattr(exc, 'strerror', None) or exc}"
            return
        self.written = target

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.written is not None:
            terminalreporter.write_line(f"  dashboard JUnit XML: {self.written}")
        if self.failed is not None:
            terminalreporter.write_line(
                f"goldeval: ERROR: the dashboard JUnit XML was not written ({self.failed})",
                red=True,
            )


class JunitPropertiesGlue:
    """Registered only with the ``golden_junit_properties`` ini switch on: a report hook
    wrapper costs every item of every run."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        # pytest's junitxml reads properties from the *teardown* report, which copies
        # item.user_properties: carry the golden.* pairs put on this report over to the item.
        if call.when != "teardown":
            present = set(item.user_properties)
            for pair in report.user_properties:
                if (
                    isinstance(pair, tuple)
                    and str(pair[0]).startswith(PROPERTY_PREFIX)
                    and pair not in present
                ):
                    item.user_properties.append(pair)
                    present.add(pair)
        return report


def register(config: pytest.Config, state: GoldenSession) -> None:
    """Register the JUnit glue (idempotent); called from ``pytest_configure``."""
    name = "goldeval-junit"
    if config.pluginmanager.get_plugin(name) is None:
        config.pluginmanager.register(JunitGlue(config, state), name)
    if config.getini("golden_junit_properties") and not config.pluginmanager.has_plugin(
        "goldeval-junit-properties"
    ):
        config.pluginmanager.register(JunitPropertiesGlue(), "goldeval-junit-properties")
