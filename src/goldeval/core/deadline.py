"""A wall-clock bound on one piece of work (goldeval.core.limits re-exports it)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable


def positive_seconds(text: str) -> float:
    """``text`` as a number of seconds above 0 and finite; ValueError saying why otherwise.
    Every duration a user types (an option, a variable) is read by this: ``nan`` passed a
    ``<= 0`` check and ran a whole session into "retry the run" (75), or every model call
    into a TIMEOUT ``within nans``; ``inf`` is no bound at all."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{text!r} must be a finite number of seconds above 0")
    return value


class Deadline:
    """A wall-clock bound on one piece of work (a provider call: connect + whole body).

    ``Deadline(None)`` never expires. :meth:`remaining` is what a blocking wait may still take;
    :meth:`check` raises ``on_expired()`` once the time is up.
    """

    __slots__ = ("_clock", "_end", "seconds")

    def __init__(
        self, seconds: float | None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.seconds = seconds
        self._clock = clock
        self._end = None if seconds is None else clock() + max(0.0, seconds)

    @classmethod
    def earliest(cls, *deadlines: Deadline | None) -> Deadline:
        """The deadline that ends first of ``deadlines`` (None entries ignored)."""
        ends = [d for d in deadlines if d is not None and d._end is not None]
        if not ends:
            return cls(None)
        first = min(ends, key=lambda d: d._end or 0.0)
        return first

    def remaining(self) -> float | None:
        if self._end is None:
            return None
        return max(0.0, self._end - self._clock())

    def expired(self) -> bool:
        return self._end is not None and self._clock() >= self._end

    def check(self, on_expired: Callable[[], BaseException]) -> None:
        if self.expired():
            raise on_expired()
