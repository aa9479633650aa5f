"""SIGTERM and SIGINT become a stop request the session honours between items.

Raising ``KeyboardInterrupt`` from the signal handler (what Python does for SIGINT, and what
this plugin used to do for SIGTERM) throws the exception wherever the main thread happens to
be: inside pytest-html's or hypothesis' ``pytest_runtest_makereport`` hook wrappers it became
an INTERNALERROR (exit 3) and the run was recorded FAILED. Instead, the first signal only
records itself and sets ``session.shouldstop``: pytest ends after the current item
(``Session.Interrupted``), xdist workers stop taking items, and the plugin's INTERRUPTED path
(``ending.py``) writes the run with ``interruptedBy`` so the verdict decides (SIGTERM: 75;
SIGINT keeps pytest's 2: a person chose to stop).

The current item finishes first: a model call in flight is not cut, although the provider
watchdog (``limits.WATCHDOG``) could shut its socket down, because a cut call is recorded as
an ERROR TIMEOUT attempt, which is not what happened; the call is bounded by its own timeout
(``call_seconds``). A session that has not ended within ``stop_grace_seconds``, or a second
signal, falls back to the hard stop (``KeyboardInterrupt``, the previous behaviour), so a hung
item cannot block forever: that item is not recorded (a resume runs it again), and threads
still blocked in a call are abandoned when pytest is done (see ``_abandon_calls_in_flight``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from goldeval.core import limits
from goldeval.core.settings import STOP_FILE_ENV

if TYPE_CHECKING:
    from goldeval.pytest_plugin.state import GoldenSession

#: The signals turned into a stop request.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: A file the service's worker writes to ask the run to stop (its text: the signal it stands
#: for, SIGTERM), before any signal: a project that ignores SIGTERM, or whose own handler exits
#: or raises KeyboardInterrupt, still ends on the INTERRUPTED path. The controller answers by
#: creating ``<file>.seen``; without that answer the worker falls back to SIGTERM.
STOP_FILE_POLL_SECONDS = 0.25


class StopRequest:
    """The session's SIGTERM/SIGINT handlers, from session start to session end.

    Registered as a pytest plugin at ``pytest_configure``, which installs the handlers
    (:meth:`install`); ``pytest_sessionfinish`` (last) restores the previous ones.
    """

    def __init__(self, state: GoldenSession, grace: float | None = None) -> None:
        self.state = state
        self.grace = float(limits.default("stop_grace_seconds") if grace is None else grace)
        #: The signal of the first request ("SIGTERM"), None while nobody asked to stop.
        self.requested: str | None = None
        self._session: pytest.Session | None = None
        self._previous: dict[int, Any] = {}
        self._timer: threading.Timer | None = None
        self._grace_passed = False
        #: The run loop has ended: a stop has nothing left to stop (the final write holds
        #: signals itself, see ``controller.deferred_signals``).
        self._loop_over = False
        self._stderr: int | None = None
        #: The stop was forced (second signal, or the grace period passed).
        self.hard_stopped = False
        #: Collection is over (the run loop was entered).
        self._collected = False
        self._reason = ""
        # The signal handler and the stop file's watcher ask once between them (reentrant: a
        # second signal arriving in the main thread while it asks).
        self._asking = threading.RLock()
        self._stop_file = os.environ.get(STOP_FILE_ENV) or None
        self._watching = threading.Event()

    # -- pytest hooks ------------------------------------------------------------------------

    def install(self) -> None:
        """The handlers, from ``pytest_configure`` on (main thread only: handlers cannot be
        set elsewhere): an xdist worker signalled with its process group while it starts
        would otherwise die of the default action, and xdist replaces a worker that died."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.getsignal(sig)
            signal.signal(sig, self._on_signal)
        if self._stop_file is not None:
            watcher = threading.Thread(target=self._watch, name="goldeval-stop-file", daemon=True)
            watcher.start()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._session = session
        if self.requested is not None and not self.state.is_worker:
            session.shouldstop = session.shouldstop or self._reason
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            # The real stderr, kept now: while an item runs pytest's fd capture points fd 2
            # at a temporary file, and the "stopping after the current item" line must be
            # seen when it is written (sessionstart runs outside any capture).
            self._stderr = os.dup(2)
        except OSError:
            self._stderr = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        """An xdist worker asked to stop during collection runs no loop (the hook's first
        result ends it) and ends as after an item that set ``shouldstop``, xdist's own way:
        its controller reads ``shouldstop`` and stops. pytest's Interrupted would end the
        worker with exit 2, which xdist takes for a crashed worker: it started a replacement
        that collected everything again, and only the grace period's hard stop ended it."""
        self._collected = True
        if self.requested is not None and self.state.is_worker:
            session.shouldstop = session.shouldstop or self._reason
            return True
        return None

    @pytest.hookimpl(wrapper=True, specname="pytest_runtestloop")
    def pytest_runtestloop_around(self, session: pytest.Session) -> Iterator[None]:
        if self.requested is not None and not self.state.is_worker:
            # Asked to stop during collection: no item starts (pytest checks shouldstop only
            # after an item). The same exception pytest raises for shouldstop itself.
            self._loop_over = True
            self._cancel_grace()
            raise session.Interrupted(str(session.shouldstop or self.requested))
        try:
            return (yield)
        finally:
            self._loop_over = True
            self._cancel_grace()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self) -> None:
        self.uninstall()

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self) -> None:
        self.uninstall()  # a session that failed before sessionfinish
        if self.hard_stopped:
            self._abandon_calls_in_flight()

    # -- the request ---------------------------------------------------------------------------

    def _cancel_grace(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def uninstall(self) -> None:
        self._cancel_grace()
        self._watching.set()
        for sig, handler in self._previous.items():
            if signal.getsignal(sig) == self._on_signal:
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous.clear()
        if self._stderr is not None:
            os.close(self._stderr)
            self._stderr = None

    def _watch(self) -> None:
        """The stop file, checked every :data:`STOP_FILE_POLL_SECONDS` until the session
        ends: once it exists, the same request as its signal's."""
        assert self._stop_file is not None
        while not self._watching.wait(STOP_FILE_POLL_SECONDS):
            try:
                text = Path(self._stop_file).read_text(encoding="ascii", errors="replace")
            except OSError:
                continue
            signum = signal.SIGINT if text.strip() == "SIGINT" else signal.SIGTERM
            if not self.state.is_worker:
                try:
                    Path(self._stop_file + ".seen").touch()
                except OSError:
                    pass
            with self._asking:
                if self.requested is None:
                    self._request(signum, signum.name)
            return

    def _on_signal(self, signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        with self._asking:
            if self.requested is None:
                self._request(signum, name)
                return
        # An xdist worker gets the signal twice when the whole process group was signalled
        # (directly, and forwarded by its controller): only its own grace ends it at once.
        if self.state.is_worker and not self._grace_passed:
            return
        why = (
            f"the stop did not take effect within {self.grace:g}s"
            if self._grace_passed
            else f"a second {name}"
        )
        self._say(f"goldeval: {why}: stopping at once\n")
        self.hard_stopped = True
        raise KeyboardInterrupt(self.requested)

    def _request(self, signum: int, name: str) -> None:
        self.requested = name
        self.state.stopped_by = name
        if signum == signal.SIGTERM:
            # What the verdict reads (75); SIGINT keeps pytest's own 2.
            self.state.signal_received = name
        for callback in list(self.state.on_signal):
            try:
                callback(signum)
            except Exception:  # a callback must not turn the request into a traceback
                pass
        reason = self._reason = f"{name} received: the run stops after the current item"
        session = self._session
        # Not on an xdist worker still collecting: pytest raises Interrupted at the next
        # collector when shouldstop is set, and a worker ended that way is taken for a crashed
        # one (see pytest_runtestloop, which sets it once collection is over).
        collecting = self.state.is_worker and not self._collected
        if session is not None and not session.shouldstop and not collecting:
            session.shouldstop = reason
        dsession = self.state.config.pluginmanager.get_plugin("dsession")
        if dsession is not None and not getattr(dsession, "shouldstop", False):
            # An xdist controller runs no items: its loop checks its own flag after each event
            # from a worker and then shuts the workers down.
            dsession.shouldstop = reason
        self._say(f"\ngoldeval: {reason} (send it again to stop at once)\n")
        if not self._loop_over:
            self._start_grace(signum)

    def _abandon_calls_in_flight(self) -> None:
        """After a forced stop, end the process now if model calls are still blocked in other
        threads: the interpreter would join them at exit (a hung call: minutes), long after
        the run was written and decided. The exit status is the verdict's, already set."""
        main = threading.main_thread()
        busy = [t for t in threading.enumerate() if t is not main and not t.daemon]
        session = self._session
        if not busy or session is None:
            return
        sys.stdout.flush()
        sys.stderr.write(
            f"goldeval: {len(busy)} thread(s) still blocked in a call after the forced stop: "
            "abandoned\n"
        )
        sys.stderr.flush()
        os._exit(int(session.exitstatus))

    def _say(self, text: str) -> None:
        """Write from a signal handler: ``os.write``, not ``sys.stderr`` (its buffer may be in
        use by the interrupted code, and a reentrant write raises)."""
        try:
            os.write(2 if self._stderr is None else self._stderr, text.encode("utf-8", "replace"))
        except OSError:
            pass

    def _start_grace(self, signum: int) -> None:
        def expired() -> None:
            self._grace_passed = True
            os.kill(os.getpid(), signum)  # the handler runs in the main thread: hard stop

        timer = threading.Timer(self.grace, expired)
        timer.daemon = True
        timer.start()
        self._timer = timer


def register(config: pytest.Config, state: GoldenSession) -> StopRequest:
    stop = StopRequest(state)
    config.pluginmanager.register(stop, "goldeval-stop-request")
    stop.install()
    return stop
