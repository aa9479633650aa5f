"""The command that retries a session that exits 75 (infrastructure: "retry it").

75 tells a person or a CI job to run again; the summary names the exact command, with the run
key, so that the retry resumes the run and calls again only the attempts without a verdict
(goldeval.pytest_plugin.recording.already_graded). Registered with the controller only.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Any

import pytest

from goldeval.core.settings import redact_url
from goldeval.verdict.exit_codes import INFRA

if TYPE_CHECKING:
    from goldeval.pytest_plugin.state import GoldenSession

_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")


def retry_command(config: pytest.Config, run_key: str | None) -> str:
    """The command that retries this session: as it was typed, with the run key named.

    From the invocation's arguments, URLs without their credentials (options from
    PYTEST_ADDOPTS and the ini file's addopts apply again by themselves); the run key is added
    when it came from there, so the command stands on its own.
    """
    # A URL typed with credentials (--golden-base-url=http://user:pass@host) is shown without
    # them: secrets never reach the terminal or a CI log (pass them through the environment).
    args = [_URL.sub(_redacted, str(a)) for a in config.invocation_params.args]
    typed_key = any(a == "--golden-run-key" or a.startswith("--golden-run-key=") for a in args)
    if run_key and not typed_key:
        args.append(f"--golden-run-key={run_key}")
    return shlex.join(["pytest", *args])


def _redacted(match: re.Match[str]) -> str:
    return redact_url(match.group(0))


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
        command = retry_command(config, key)
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
