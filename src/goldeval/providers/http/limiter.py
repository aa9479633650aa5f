"""How many calls go out at once, and when: the provider's own capacity, found at run time.

One :class:`CallLimiter` per HTTP provider is shared by every thread that calls it (the
prefetch pool). Before each try a caller takes a :class:`Permit`; the time spent waiting for it
is the *queue wait*, recorded apart from the call's latency. The limiter combines four rules:

* **Adaptive concurrency** (a latency gradient with additive increase, multiplicative
  decrease): the limit starts at ``min(4, maximum)`` and grows by one per answered call (slow
  start) while latency stays within ``tolerance ×`` the lowest latency seen; once latency rises
  above that the provider is queueing, and the limit shrinks in proportion
  (``limit × tolerance × min / latency``, at most halved), after which it grows by one per
  round trip. A timeout, a 429 or a 503 halves it. It never exceeds ``--golden-concurrency``
  and never drops below 1. Only calls sent after the last decrease can cause another one, so
  a burst of slow answers halves the limit once, not ten times. With ``adaptive=False`` the
  limit stays at the maximum (the old fixed behaviour).
* **Retry-After across the pool**: a 429/503 with ``Retry-After`` pauses *every* caller until
  then, not only the one that got it (capped by the backoff maximum).
* **Requests per minute** (``--golden-rpm``) and **tokens per minute** (``--golden-tpm``):
  token buckets, one second deep. A call takes one request and its *estimated* tokens
  (prompt characters / 4 plus the average answer so far); when the answer arrives the
  estimate is corrected with the real counts, so the bucket may go below zero and the next
  calls wait.

Latency samples are the time to first token when the answer is streamed (queueing shows
there, answer length does not), else the whole call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["CallLimiter", "LimiterStats", "Permit"]

#: Where the adaptive limit starts (bounded by the maximum).
INITIAL_LIMIT = 4
#: Latency up to this multiple of the lowest seen counts as "flat".
TOLERANCE = 1.5
#: Slow start (one more per answered call) ends once latency passes this multiple.
SLOW_START_END = 1.2


@dataclass
class Permit:
    """One try's right to be sent: when it was granted and under which decrease epoch."""

    epoch: int
    queue_s: float
    tokens: float = 0.0
    released: bool = False


@dataclass
class LimiterStats:
    """What the limiter did during a run (shown in the terminal summary and run.json)."""

    limit: float
    peak_limit: float
    decreases: int
    paused_s: float
    max_in_flight: int


class _Bucket:
    """A token bucket refilled at ``per_minute / 60`` per second, one second deep."""

    def __init__(self, per_minute: float, clock: Callable[[], float]) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self._clock = clock
        self._at = clock()

    def refill(self) -> None:
        now = self._clock()
        self.level = min(self.capacity, self.level + (now - self._at) * self.rate)
        self._at = now

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` may be taken (0: now). A call bigger than the whole
        bucket goes when the bucket is full, and drives it below zero."""
        self.refill()
        need = min(amount, self.capacity)
        if self.level >= need:
            return 0.0
        return (need - self.level) / self.rate if self.rate > 0 else 1.0


class CallLimiter:
    """Concurrency limit, pool-wide pause and rate buckets for one provider (thread-safe)."""

    def __init__(
        self,
        maximum: int,
        *,
        adaptive: bool = True,
        rpm: float | None = None,
        tpm: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.maximum = max(1, int(maximum))
        self.adaptive = adaptive
        self._clock = clock
        self._cond = threading.Condition()
        self._limit = float(min(INITIAL_LIMIT, self.maximum) if adaptive else self.maximum)
        self._peak = self._limit
        self._slow_start = True
        self._epoch = 0
        self._decreases = 0
        self._in_flight = 0
        self._max_in_flight = 0
        self._min_latency: float | None = None
        self._paused_until = 0.0
        self._paused_s = 0.0
        self._rpm = _Bucket(rpm, clock) if rpm else None
        self._tpm = _Bucket(tpm, clock) if tpm else None
        self._answer_tokens = 0.0
        self._answers = 0

    # -- taking and giving back ----------------------------------------------------------------

    def estimate_tokens(self, prompt_chars: int) -> float:
        """Prompt characters / 4 plus the mean answer so far (256 before the first answer)."""
        with self._cond:
            mean = self._answer_tokens / self._answers if self._answers else 256.0
        return prompt_chars / 4.0 + mean

    def acquire(self, tokens: float = 0.0) -> Permit:
        """Block until this try may be sent; the permit says how long that took."""
        start = self._clock()
        with self._cond:
            while True:
                now = self._clock()
                wait = self._paused_until - now
                if wait <= 0 and self._in_flight >= max(1, int(self._limit)):
                    wait = 1.0  # woken by release()
                if wait <= 0 and self._rpm is not None:
                    wait = self._rpm.wait_for(1.0)
                if wait <= 0 and self._tpm is not None:
                    wait = self._tpm.wait_for(tokens)
                if wait <= 0:
                    break
                self._cond.wait(min(wait, 1.0))
            if self._rpm is not None:
                self._rpm.level -= 1.0
            if self._tpm is not None:
                self._tpm.level -= tokens
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            return Permit(epoch=self._epoch, queue_s=self._clock() - start, tokens=tokens)

    def release(
        self,
        permit: Permit,
        *,
        latency: float | None = None,
        overloaded: bool = False,
        retry_after: float | None = None,
        actual_tokens: int | None = None,
        answer_tokens: int | None = None,
    ) -> None:
        """Give the permit back with what the try showed.

        ``latency``: seconds of an answered try (its time to first token when streamed).
        ``overloaded``: a timeout, a 429 or a 503 (halves the limit).
        ``retry_after``: the server asked every caller to wait this long.
        ``actual_tokens``: the real tokens of the call, replacing the estimate in the bucket.
        """
        with self._cond:
            if permit.released:
                return
            permit.released = True
            self._in_flight -= 1
            if self._tpm is not None and actual_tokens is not None:
                self._tpm.level -= actual_tokens - permit.tokens
            if answer_tokens is not None:
                self._answer_tokens += answer_tokens
                self._answers += 1
            if retry_after is not None and retry_after > 0:
                until = self._clock() + retry_after
                if until > self._paused_until:
                    self._paused_s += until - max(self._paused_until, self._clock())
                    self._paused_until = until
            if self.adaptive:
                if overloaded:
                    self._decrease(permit, 0.5)
                elif latency is not None and latency > 0:
                    self._observe(permit, latency)
            self._cond.notify_all()

    # -- the adaptive rule ---------------------------------------------------------------------

    def _observe(self, permit: Permit, latency: float) -> None:
        low = self._min_latency
        if low is None or latency < low:
            self._min_latency = low = latency
        ratio = latency / low if low > 0 else 1.0
        if ratio > SLOW_START_END:
            self._slow_start = False  # a queue is forming: from now on, one per round trip
        if ratio <= TOLERANCE:
            step = 1.0 if self._slow_start else 1.0 / max(1.0, self._limit)
            self._limit = min(float(self.maximum), self._limit + step)
            self._peak = max(self._peak, self._limit)
        else:
            self._decrease(permit, max(0.5, TOLERANCE / ratio))

    def _decrease(self, permit: Permit, factor: float) -> None:
        if permit.epoch != self._epoch:
            return  # sent before the last decrease: that one already answered for it
        self._slow_start = False
        self._limit = max(1.0, self._limit * factor)
        self._epoch += 1
        self._decreases += 1

    # -- reading -------------------------------------------------------------------------------

    @property
    def limit(self) -> float:
        with self._cond:
            return self._limit

    def stats(self) -> LimiterStats:
        with self._cond:
            return LimiterStats(
                limit=self._limit,
                peak_limit=self._peak,
                decreases=self._decreases,
                paused_s=self._paused_s,
                max_in_flight=self._max_in_flight,
            )
