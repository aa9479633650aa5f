"""The exit status goldeval decided is the one pytest ends with, when it is not 0.

:func:`ending.apply_exit` sets the finished session's status from the one verdict. A project
hook that runs later (``trylast`` ``pytest_sessionfinish``, or ``pytest.exit(returncode=0)``
from one) could still turn a failed gate into exit 0: a false green in CI and in the
service, which reads pytest's status. This outermost wrapper puts the decision back after
every other ``pytest_sessionfinish`` ran and says so on stderr. A hook that makes a passing
run fail (coverage under its threshold) is left alone: that is not a green. ``sys.exit(0)``
from a later ``pytest_unconfigure`` hook (which ended pytest with 0 whatever its status) is
turned into the decided code the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from goldeval.core.errors import GoldevalError
from goldeval.core.textsafe import cut, one_line
from goldeval.pytest_plugin.ending import DECIDED_EXIT, apply_exit, session_mask
from goldeval.pytest_plugin.state import state_of
from goldeval.results.last_session import write_last_session
from goldeval.verdict.exit_codes import INFRA, ExitDecision


def _restored(config: pytest.Config, status: int | None, hook: str) -> ExitDecision | None:
    """The decision when ``status`` (what the later hooks left) turned a failing decision
    into 0; None: nothing to restore."""
    decided = config.stash.get(DECIDED_EXIT, None)
    if decided is None or decided.code == 0 or status not in (0, None):
        return None
    sys.stderr.write(
        f"goldeval: a {hook} hook set pytest's exit status to 0 after goldeval"
        f" decided exit {decided.code} ({decided.reason}); pytest exits {decided.code}\n"
    )
    return decided


def _ended_badly(session: pytest.Session, exc: BaseException) -> bool:
    """Another plugin's ``pytest_sessionfinish`` raised after goldeval decided (pytest's
    ``--junitxml`` to a place it cannot write, the cache under ``-W error``): the session
    ended in a traceback and exit 1, the quality-failure code, while LAST_SESSION said the
    decided 0. Now the session's end failed as infrastructure: exit 75 (a decided non-zero
    code stays), said on stderr, recorded in LAST_SESSION. The run itself was graded and
    decided: ``goldeval gate RUN`` still re-decides its attempts. False: not decided yet."""
    config = session.config
    decided = config.stash.get(DECIDED_EXIT, None)
    if decided is None:
        return False
    state = state_of(config)
    what = one_line(cut(session_mask(state)(f"{type(exc).__name__}: {exc}"), 300))
    code = decided.code or INFRA
    reason = (
        f"another plugin failed at the end of the session ({what}) after goldeval decided "
        f"exit {decided.code}: {decided.reason}"
        + ("; fix it and run again" if code == INFRA else "")
    )
    sys.stderr.write(f"goldeval: {reason}; pytest exits {code}\n")
    apply_exit(session, ExitDecision(code, reason))
    try:
        write_last_session(state.settings.out_dir, code, reason, state.run_dir)
    except (OSError, GoldevalError):
        pass
    return True


class ExitGuard:
    """Registered on the controller (the process that decides the exit status). Its
    wrappers are ``tryfirst``; pluggy calls the later registered of two such wrappers first,
    so the guard registers itself again when the run loop starts (after the conftests that
    collection loads, and plugins registered late in ``pytest_configure``): outermost
    against everything registered before the run. What runs outside these hooks can still
    lie: a ``pytest_cmdline_main`` wrapper (that call is under way before any plugin's
    ``pytest_configure`` registers the guard), a plugin registered during the session's end,
    an ``atexit`` handler calling ``os._exit(0)``. The service reads the run's recorded
    decision instead (docs/methodology.md)."""

    NAME = "goldeval-exit-guard"

    def __init__(self) -> None:
        self._session: pytest.Session | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        self._session = session
        manager = session.config.pluginmanager
        if manager.is_registered(self):
            manager.unregister(self)
            manager.register(self, self.NAME)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Iterator[None]:
        self._session = session
        try:
            yield
        except pytest.exit.Exception as exc:  # pytest uses its returncode as the status
            decided = _restored(session.config, exc.returncode, "pytest_sessionfinish")
            if decided is not None:
                exc.returncode = decided.code
            raise
        except SystemExit as exc:  # sys.exit() in a later hook ends the process with its code
            status = exc.code if isinstance(exc.code, int) or exc.code is None else 1
            decided = _restored(session.config, status, "pytest_sessionfinish")
            if decided is not None:  # a decided failure turned into 0
                raise SystemExit(decided.code) from None
            if status and _ended_badly(session, exc):  # a decided 0 turned into a failure
                raise SystemExit(int(session.exitstatus)) from None
            raise
        except KeyboardInterrupt:
            raise  # Ctrl-C at the end: pytest's own interrupted status
        except BaseException as exc:
            if not _ended_badly(session, exc):
                raise
            return
        decided = _restored(session.config, int(session.exitstatus), "pytest_sessionfinish")
        if decided is not None:
            apply_exit(session, decided)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_unconfigure(self, config: pytest.Config) -> Iterator[None]:
        # pytest returns session.exitstatus after unconfigure: a later unconfigure hook that
        # sets it to 0, or ends the process with sys.exit(0), is the same green one hook later.
        try:
            yield
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) or exc.code is None else 1
            decided = _restored(config, status, "pytest_unconfigure")
            if decided is not None:
                raise SystemExit(decided.code) from None
            raise
        except Exception as exc:  # a plugin's unconfigure failed after the decision
            if self._session is None or not _ended_badly(self._session, exc):
                raise
            raise SystemExit(int(self._session.exitstatus)) from None
        session = self._session
        if session is not None:
            decided = _restored(config, int(session.exitstatus), "pytest_unconfigure")
            if decided is not None:
                apply_exit(session, decided)
