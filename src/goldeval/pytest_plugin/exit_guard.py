"""The exit status goldeval decided is the one pytest ends with, when it is not 0.

:func:`ending.apply_exit` sets the finished session's status from the one verdict. A project
hook that runs later (``trylast`` ``pytest_sessionfinish``, or ``pytest.exit(returncode=0)``
from one) could still turn a failed gate into exit 0: a false green in CI and in the
service, which reads pytest's status. This outermost wrapper puts the decision back after
every other ``pytest_sessionfinish`` ran and says so on stderr. A hook that makes a passing
run fail (coverage under its threshold) is left alone: that is not a green.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from goldeval.pytest_plugin.ending import DECIDED_EXIT


def _restored(session: pytest.Session, status: int | None) -> int | None:
    """The decided code when ``status`` (what the later hooks left) turned a failing
    decision into 0; None: nothing to restore."""
    decided = session.config.stash.get(DECIDED_EXIT, None)
    if decided is None or decided.code == 0 or status != 0:
        return None
    sys.stderr.write(
        f"goldeval: a pytest_sessionfinish hook set pytest's exit status to 0 after goldeval"
        f" decided exit {decided.code} ({decided.reason}); pytest exits {decided.code}\n"
    )
    return decided.code


class ExitGuard:
    """Registered on the controller (the process that decides the exit status)."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Iterator[None]:
        try:
            yield
        except pytest.exit.Exception as exc:  # pytest uses its returncode as the status
            code = _restored(session, exc.returncode)
            if code is not None:
                exc.returncode = code
            raise
        code = _restored(session, int(session.exitstatus))
        if code is not None:
            session.exitstatus = code
