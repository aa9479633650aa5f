"""What a golden item printed, logged or failed with, masked before any report shows it.

A run's answers are masked where they enter the pipeline (:mod:`goldeval.core.secrets`), but
pytest's reports carry more: the item's captured stdout, stderr and log records, and the text
of its failure. JUnit XML (``junit_logging``), pytest-html and the terminal's failure sections
show them, so an app that printed or logged its API key while answering put the key in all
three. Every report of the session is masked here with the session's masker, in the
outermost ``pytest_runtest_makereport`` wrapper: after every other plugin's wrapper, before
any ``pytest_runtest_logreport`` reads the report (on an xdist worker before it is sent). A
warning the app raised went to pytest's warnings summary as it was: masked in the first
``pytest_warning_recorded``, before the terminal, pytest-html or an xdist worker reads it.

What pytest does not capture (``-s``, ``--capture=no``; a ``--log-file`` handler) is written
as the code wrote it: docs/reliability.md says so.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from goldeval.core.errors import GoldevalError
from goldeval.core.secrets import SecretMasker

if TYPE_CHECKING:
    from goldeval.pytest_plugin.state import GoldenSession

NAME = "goldeval-report-masking"


def mask_warning(warning_message: Any, masker: SecretMasker) -> None:
    """A recorded warning's text with every known secret masked (in place): pytest's warnings
    summary printed an app's ``warnings.warn(f"... {key}")`` as it was."""
    message = warning_message.message
    text = str(message)
    if not masker or not masker.found(text):
        return
    if isinstance(message, Warning):
        message.args = tuple(
            masker.mask_message(a) if isinstance(a, str) else a for a in message.args
        )
        if not masker.found(str(message)):
            return
        try:  # a __str__ of its own: the same category, the masked text
            warning_message.message = type(message)(masker.mask_message(text))
            if not masker.found(str(warning_message.message)):
                return
        except Exception:  # any constructor of its own: a plain warning then
            pass
        warning_message.message = UserWarning(masker.mask_message(text))
    else:
        warning_message.message = masker.mask_message(text)


def mask_report(report: pytest.TestReport, masker: SecretMasker) -> None:
    """``report``'s captured sections and failure text with every known secret masked (in
    place; nothing changes when none holds one)."""
    if not masker:
        return
    sections = report.sections
    if sections and any(masker.found(content) for _title, content in sections):
        report.sections = [(title, masker.mask_message(content)) for title, content in sections]
    longrepr = report.longrepr
    if longrepr is None:
        return
    if isinstance(longrepr, tuple):  # a skip: (path, line, reason), kept a tuple for pytest
        path, line, reason = longrepr
        if masker.found(reason):
            report.longrepr = (path, line, masker.mask_message(reason))
        return
    text = str(longrepr)
    if masker.found(text):
        report.longrepr = masker.mask_message(text)


class ReportMasking:
    """The session's reports masked (see the module's docstring)."""

    def __init__(self, state: GoldenSession) -> None:
        self.state = state

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Any, Any]:
        report = yield
        try:
            masker = self.state.masker
        except GoldevalError:  # the dataset does not load: collection says so, nothing ran
            return report
        mask_report(report, masker)
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_warning_recorded(self, warning_message: Any) -> None:
        # first: before the terminal's summary, pytest-html or an xdist worker's relay
        try:
            masker = self.state.masker
        except GoldevalError:
            return
        mask_warning(warning_message, masker)


def register(config: pytest.Config, state: GoldenSession) -> None:
    config.pluginmanager.register(ReportMasking(state), NAME)
