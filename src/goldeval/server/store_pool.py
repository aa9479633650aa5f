"""A small pool of open stores for the API's request threads."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from goldeval.store import Store, StoreError, open_store


class StorePool:
    """Up to ``size`` open stores shared by the request threads (one connection each)."""

    def __init__(self, url: str, size: int) -> None:
        self.url = url
        self.size = max(1, size)
        self._idle: queue.LifoQueue[Store] = queue.LifoQueue()
        self._opened = 0
        self._lock = threading.Lock()

    @contextmanager
    def store(self) -> Iterator[Store]:
        store: Store | None = None
        try:
            store = self._idle.get_nowait()
        except queue.Empty:
            with self._lock:
                fresh = self._opened < self.size
                if fresh:
                    self._opened += 1
            if fresh:
                try:
                    store = open_store(self.url)
                except BaseException:
                    with self._lock:
                        self._opened -= 1
                    raise
            else:
                store = self._idle.get(timeout=60)
        healthy = True
        try:
            yield store
        except StoreError:
            healthy = False
            raise
        finally:
            if healthy:
                self._idle.put(store)
            else:
                with self._lock:
                    self._opened -= 1
                try:
                    store.close()
                except StoreError:
                    pass

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return
