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
eleven seconds, a tenth of the run, spent finding next to nothing (the plain reference pays it
too). :func:`set_exit_collection` freezes everything at exit instead (an ``atexit`` handler,
which runs before finalisation), so those collections walk nothing and the memory goes back to
the system with the process.

What that loses: every object that is part of a reference cycle and still alive when the
handler runs (whatever the garbage of the last moments, and whatever a module global or a
class keeps in a cycle) is never finalised: its ``__del__`` and ``weakref`` callbacks do not
run, and a buffered file held only through such a cycle is not flushed. Objects outside
cycles are still freed, and finalised, as the modules are cleared. CPython does not promise
``__del__`` for objects alive at exit either, but it usually runs them; code that must flush
at exit should use ``atexit`` or a ``with`` block. ``golden_collect_at_exit = true`` in the
ini file keeps CPython's way.

The handler is process-wide: a golden session run in-process by another one (pytester's
``runpytest_inprocess``, ``pytest.main`` from a script) registers it in the host process, and
a non-golden host session leaves it there. A later golden session with
``golden_collect_at_exit = true`` takes it out again.
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


def set_exit_collection(collect: bool) -> None:
    """Whether CPython's full collections run at interpreter exit (``collect``) or everything
    is frozen first (see the module docstring). The last golden session of a process decides;
    the handler is registered at most once however many sessions ask (pytester)."""
    atexit.unregister(gc.freeze)
    if not collect:
        atexit.register(gc.freeze)
