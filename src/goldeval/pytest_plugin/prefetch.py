"""Live calls that do not wait for each other, while items still report one by one.

When an item's setup asks for its answer, the prefetcher also submits the calls of the next
items this process will run (up to a window), to a thread pool of ``--golden-concurrency``
workers. Each item then only waits for its own future, so N calls of latency L take about
N·L/C instead of N·L. Items report in their usual order: pytest still runs them one by one.

Which items come next: in a serial run, ``session.items`` after the current one; in an xdist
worker, the indices the controller has already queued for this worker (xdist's worker queue,
read under its lock). A queued item that xdist later hands to another worker ("work
stealing") was called for nothing; the other worker calls again. That costs one extra call,
never a wrong result.

The pool's threads are daemon threads: a call still in flight when the session is over (the
items after a stop, ``-x`` or ``--maxfail``) is an answer nobody will grade, and must not keep
the process alive. ``ThreadPoolExecutor``'s threads are joined at interpreter exit, so a
SIGINT-stopped run with calls queued behind a slow or stuck server waited for each of them
(a CI run hung past 60 s after pytest's summary).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import pytest


def _worker_queue(config: pytest.Config) -> Any:
    """xdist's worker-side queue of scheduled item indices (``WorkerInteractor.torun``).

    No public way: xdist tells a worker its next items only through this queue, and the prefetch
    must know them to start their model calls early. Looked up by class name so that a missing
    attribute (xdist changed) means "not a worker" (serial prefetch order), never a crash;
    tests/unit/test_pytest_internals.py fails loudly if the attribute goes away.
    """
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "torun"):
            return plugin
    return None


class DaemonPool:
    """``concurrency`` daemon threads running submitted calls in order (see the module's
    docstring for why not ``ThreadPoolExecutor``)."""

    def __init__(self, concurrency: int, name: str = "goldeval-live") -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue()
        )
        self._maximum = max(1, concurrency)
        self._name = name
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        if self._closed:
            raise RuntimeError("the prefetch pool is closed")
        future: Future[Any] = Future()
        self._jobs.put((future, lambda: fn(*args)))
        if len(self._threads) < self._maximum:  # started as calls come (one per call, at most N)
            thread = threading.Thread(
                target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return future

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            future, call = job
            if not future.set_running_or_notify_cancel():
                continue  # cancelled while queued
            try:
                result = call()
            except BaseException as exc:  # the item's own thread re-raises it
                future.set_exception(exc)
            else:
                future.set_result(result)

    def shutdown(self) -> None:
        """No new calls; queued ones are cancelled by their futures, running ones are left."""
        self._closed = True
        for _ in self._threads:
            self._jobs.put(None)


class Prefetcher:
    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.window = max(1, concurrency * 2)
        self.pool = DaemonPool(concurrency)
        self.futures: dict[str, Future[Any]] = {}
        self.lock = threading.Lock()
        self._positions: dict[str, int] | None = None
        self._interactor: Any = False  # looked up once: False = not yet, None = not a worker

    def upcoming(self, item: pytest.Item) -> Sequence[pytest.Item]:
        session = item.session
        if self._interactor is False:
            self._interactor = _worker_queue(item.config)
        interactor = self._interactor
        if interactor is not None:
            items = session.items
            with interactor.torun.lock() as queued:
                indices = [i for i in list(queued)[: self.window] if isinstance(i, int)]
            nxt = getattr(interactor, "nextitem_index", None)
            if isinstance(nxt, int):
                indices.insert(0, nxt)
            return [items[i] for i in indices if 0 <= i < len(items)]
        if self._positions is None:
            self._positions = {it.nodeid: n for n, it in enumerate(session.items)}
        pos = self._positions.get(item.nodeid)
        if pos is None:
            return []
        return session.items[pos + 1 : pos + 1 + self.window]

    def answer(
        self,
        item: pytest.Item,
        compute: Callable[[pytest.Item], Any],
        eligible: Callable[[pytest.Item], bool],
    ) -> Any:
        """The current item's result; also start the calls of the items that follow it."""
        with self.lock:
            for it in [item, *self.upcoming(item)]:
                if it.nodeid not in self.futures and (it is item or eligible(it)):
                    self.futures[it.nodeid] = self.pool.submit(compute, it)
            future = self.futures.pop(item.nodeid)
        return future.result()

    def close(self) -> None:
        with self.lock:
            for future in self.futures.values():
                future.cancel()
            self.futures.clear()
        self.pool.shutdown()


def dist_given(config: pytest.Config) -> bool:
    """Whether the user chose an xdist ``--dist`` mode (command line, PYTEST_ADDOPTS, addopts)."""
    import os
    import shlex

    tokens = list(config.invocation_params.args)
    tokens += shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
    tokens += [str(t) for t in config.getini("addopts") or []]
    return any(t == "--dist" or t.startswith("--dist=") for t in tokens)


class WorkStealingForLive:
    """Live runs under xdist use work stealing unless ``--dist`` says otherwise.

    With xdist's default ``load`` scheduling, a worker whose items take over 0.1 s (a model
    call) is sent new items only when its queue is down to two, so the prefetcher sees two
    items ahead and ``--golden-concurrency`` cannot fill. ``worksteal`` hands each worker
    its share up front and moves items only when a worker runs dry (measured: 1.6× of the
    ideal N·L/(2C) with ``load``, within it with ``worksteal``; docs/performance.md).
    """

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getoption("dist", None) != "load" or dist_given(config):
            return None
        try:
            from xdist.scheduler import WorkStealingScheduling  # type: ignore[import-untyped]
        except ImportError:  # pragma: no cover - xdist older than 3.2
            return None
        return WorkStealingScheduling(config, log)
