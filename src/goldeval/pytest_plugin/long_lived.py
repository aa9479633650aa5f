"""Keeping the garbage collector off a session's long-lived objects.

A golden session builds objects that live until it ends: the dataset, its cases, one pytest
item per attempt (collection), and one report per phase that pytest's terminal reporter keeps,
with the attempt's record (the run). CPython's full collection walks every tracked object each
time the old generation has grown by a quarter: while a session grows from nothing to millions
of objects that is a dozen full walks during collection and again during the run, a tenth of a
100,000-row fixture run's wall time (docs/performance.md, "Fourth round").

So collection runs without automatic collections and ends with one step, and while items run,
every :data:`BATCH` reported items are one step: the objects made since the last step are
collected (cheap: only they are walked) and the survivors frozen (``gc.freeze``), so no later
collection walks them again. Collecting first means no garbage cycle is ever frozen, so nothing
leaks. Everything is unfrozen when the session ends (``pytest_unconfigure``), so a process that
runs several sessions (pytester, a long-lived IDE runner) gets its collector back.

When the interpreter exits, CPython's finalisation runs full collections while it tears the
modules down, each one walking every object still alive: after a 100,000-row session that was
eleven seconds, a tenth of the run, spent finding no garbage worth the name (the plain
reference pays it too). :func:`skip_exit_collection` freezes everything at exit (an
``atexit`` handler, which runs before finalisation), so those collections walk nothing and the
memory goes back to the system with the process. What is lost: reference cycles that became
garbage after the last collection do not have their ``__del__`` run at exit (CPython does not
promise it either). ``golden_collect_at_exit = true`` in the ini file keeps CPython's way.
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Generator
from typing import Any

import pytest

#: Items between two collect-and-freeze steps. Each step walks what the last BATCH items left
#: behind (milliseconds); smaller costs more steps, larger lets the old generation grow.
BATCH = 1000


class LongLivedObjects:
    """Registered for golden sessions only; see the module docstring."""

    def __init__(self) -> None:
        self.frozen = False
        self._since = 0

    def settle(self) -> None:
        """Collect what the last batch left behind, then freeze the survivors."""
        gc.collect()
        gc.freeze()
        self.frozen = True
        self._since = 0

    def _tick(self) -> None:
        self._since += 1
        if self._since >= BATCH:
            self.settle()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> Generator[None, Any, Any]:
        # Collection builds the dataset and the items in one go: automatic full collections
        # there would walk them again and again (the old generation keeps growing by a quarter).
        # Startup (imported modules, plugins, options) lives as long as the process: frozen
        # first, then no automatic collection until the items are made, then one step.
        gc.freeze()
        self.frozen = True
        enabled = gc.isenabled()
        gc.disable()
        try:
            return (yield)
        finally:
            if enabled:
                gc.enable()
            self.settle()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # The process that keeps the reports: the one running items, or an xdist controller.
        if report.when == "teardown":
            self._tick()

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.frozen:
            gc.unfreeze()
            self.frozen = False


def skip_exit_collection() -> None:
    """Freeze every object when the interpreter exits (see the module docstring). Registered
    once per process however many sessions it runs (pytester)."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
