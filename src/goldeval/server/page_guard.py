"""What keeps the run page (``/ui/``) from starving the API: a per-key bound on loads in flight
and a small cache of rendered index pages.

Issue 33: one EVAL key loading ``/ui/`` six times at once held six of the server's threads for
71 s and pushed every other caller's latency up tenfold. Paging made a page cost O(page); these
two make its cost per key bounded (:class:`KeySlots`, limit ``ui_loads_per_key``) and a page
asked again cost one small store read (:class:`PageCache`, limit ``ui_cached_pages``).

A cached page is keyed by the role (what a role may see is the same for all its keys), the
page cursor and the queue's change marker (:meth:`RunQueue.change_marker`): a run queued,
finished or deleted changes the marker, so a stale page is never served after it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from goldeval.core.limits import LIMITS_BY_NAME
from goldeval.server.problems import Problem

LOADS_PER_KEY = int(LIMITS_BY_NAME["ui_loads_per_key"].default)
CACHED_PAGES = int(LIMITS_BY_NAME["ui_cached_pages"].default)
#: Seconds a refused load is told to wait: a page renders in well under that (issue 33's
#: target is 200 ms a page); the client retries, nothing is queued server side.
RETRY_AFTER = 1


class KeySlots:
    """At most ``limit`` loads in flight per key label; thread safe (routes run in a pool)."""

    def __init__(self, limit: int = LOADS_PER_KEY) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._busy: dict[str, int] = {}

    @contextmanager
    def hold(self, label: str) -> Iterator[None]:
        """One slot of ``label`` for the ``with`` block; 429 when all are taken."""
        with self._lock:
            busy = self._busy.get(label, 0)
            if busy >= self.limit:
                raise Problem(
                    429,
                    "too-many-page-loads",
                    "Too many page loads",
                    f"this key already has {busy} /ui/ pages loading (at most {self.limit} at "
                    f"once, limit ui_loads_per_key); retry in {RETRY_AFTER} s",
                    headers={"Retry-After": str(RETRY_AFTER)},
                )
            self._busy[label] = busy + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._busy[label] - 1
                if left:
                    self._busy[label] = left
                else:
                    del self._busy[label]


class PageCache:
    """Rendered pages by (role, cursor) for one change marker, the ``limit`` most recently used
    kept; thread safe. A page stored under a new marker drops every page of older ones (they
    can never be served again)."""

    def __init__(self, limit: int = CACHED_PAGES) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._marker: str | None = None
        self._pages: OrderedDict[tuple[str, str], str] = OrderedDict()

    def get(self, role: str, cursor: str, marker: str) -> str | None:
        with self._lock:
            if marker != self._marker:
                return None
            page = self._pages.get((role, cursor))
            if page is not None:
                self._pages.move_to_end((role, cursor))
            return page

    def put(self, role: str, cursor: str, marker: str, page: str) -> None:
        with self._lock:
            if marker != self._marker:
                self._pages.clear()
                self._marker = marker
            self._pages[(role, cursor)] = page
            self._pages.move_to_end((role, cursor))
            while len(self._pages) > self.limit:
                self._pages.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._pages)
