"""The command that retries a session that exits 75 (infrastructure: "retry it").

75 tells a person or a CI job to run again; the summary names the exact command, with the run
key, so that the retry resumes the run and calls again only the attempts without a verdict
(goldeval.pytest_plugin.recording.already_graded). Registered with the controller only.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

import pytest

from goldeval.pytest_plugin.ending import rerun_args
from goldeval.verdict.exit_codes import INFRA

if TYPE_CHECKING:
    from goldeval.pytest_plugin.state import GoldenSession


class RetryHint:
    """After the goldeval summary: the exact command to retry a session that exits 75.

    75 tells a person or a CI job "retry": with a run key, the retry resumes the run and calls
    again only the attempts that did not get a verdict (:func:`already_graded`); without one,
    it runs everything again, and the line says how to resume instead.
    """

    def __init__(self, state: GoldenSession) -> None:
        self.state = state
        self.session: pytest.Session | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # The summary hook is given pytest's status from before the controller decided.
        self.session = session

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.session is None or self.state.run is None:
            return
        if int(self.session.exitstatus) != INFRA:
            return
        config = self.state.config
        key = self.state.settings.run_key
        command = shlex.join(["pytest", *rerun_args(self.state)])
        where = config.invocation_params.dir
        if key:
            line = f"goldeval: retry (resumes run key {key}, calls again only what got no verdict)"
        else:
            line = (
                "goldeval: retry (runs every attempt again; add --golden-run-key=NAME to a run "
                "so that its retry calls only the attempts without a verdict)"
            )
        terminalreporter.write_line(f"{line}:", yellow=True)
        terminalreporter.write_line(f"  cd {shlex.quote(str(where))} && {command}", yellow=True)
