"""The process's watchdog: one daemon thread that runs an action when a :class:`Deadline`
passes unless it is cancelled first (it cuts a read that blocks past its deadline by shutting
the socket down). Kept apart from :mod:`goldeval.core.limits`, which says what the bounds are;
this module enforces the time ones on blocking reads."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable

from goldeval.core.limits import Deadline


def _nothing() -> None:
    return None


class Alarm:
    """One armed watchdog action; :meth:`cancel` it once the guarded work has ended."""

    __slots__ = ("_action", "_lock", "cancelled", "fired")

    def __init__(self, action: Callable[[], None]) -> None:
        self._action = action
        self._lock = threading.Lock()
        self.cancelled = False
        self.fired = False

    def cancel(self) -> bool:
        """Disarm; returns whether the action already ran. Once this returns, the action
        never runs (it runs under the same lock), so the guarded resource may be reused."""
        with self._lock:
            self.cancelled = True
            # The alarm waits in the watchdog's heap until its due time: it must not keep
            # what the action holds (a response, its request body) alive until then.
            self._action = _nothing
            return self.fired

    def fire(self) -> None:
        with self._lock:
            if self.cancelled or self.fired:
                return
            self.fired = True
            try:
                self._action()
            except Exception:  # an action is best effort (the socket may be closed already)
                pass


class Watchdog:
    """One daemon thread running actions when their :class:`Deadline` passes, unless
    cancelled first: it cuts a read that blocks past its deadline (a socket shut down)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Alarm]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, deadline: Deadline, action: Callable[[], None]) -> Alarm:
        alarm = Alarm(action)
        remaining = deadline.remaining()
        if remaining is None:
            return alarm  # never expires: nothing to watch
        with self._cond:
            heapq.heappush(self._heap, (self._clock() + remaining, next(self._order), alarm))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="goldeval-watchdog", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return alarm

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap:
                    self._cond.wait()
                due, _, alarm = self._heap[0]
                wait = due - self._clock()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
            if not alarm.cancelled:
                alarm.fire()


#: The process's watchdog (its thread starts on the first armed alarm).
WATCHDOG = Watchdog()
