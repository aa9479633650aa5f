"""``/metrics``: the store's counters, read in bounded time, and the store's own health.

A scrape reads :meth:`RunQueue.metrics` (the ``service_counters`` table, the oldest QUEUED
row, the RUNNING rows): never the attempts, so it costs the same at any store size. It runs on
its own thread and its own store connection, so a scrape never waits for (or takes) one of the
request pool's connections, and it waits at most ``metrics_store_seconds``
(:mod:`goldeval.core.limits`). A store that is down, or slower than that, is a series
(``goldeval_store_up 0``) in a 200 answer, not a scrape that times out or silently lacks the run
series: Prometheus alerts on a value, not on an absence it cannot tell from "no runs".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import datetime, timezone

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from goldeval.core.limits import LIMITS_BY_NAME
from goldeval.core.textsafe import safe_text
from goldeval.server import logs
from goldeval.store import Store, StoreError, open_store
from goldeval.store.base import SqlStore
from goldeval.store.counters import DURATION_BUCKETS
from goldeval.store.migrations import ATTEMPT_STATUSES, RUN_STATUSES
from goldeval.store.queue import QueueMetrics, RunQueue

METRICS_STORE_SECONDS = float(LIMITS_BY_NAME["metrics_store_seconds"].default)


class MetricsReader:
    """Reads :class:`QueueMetrics` on one dedicated thread and connection, in bounded time."""

    def __init__(self, url: str, seconds: float = METRICS_STORE_SECONDS) -> None:
        self.url = url
        self.seconds = seconds
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="goldeval-metrics")
        self._store: Store | None = None
        self._pending: Future[QueueMetrics] | None = None
        self._lock = threading.Lock()

    def _read(self) -> QueueMetrics:
        if self._store is None:
            self._store = open_store(self.url, connect_timeout=self.seconds)
            if isinstance(self._store, SqlStore) and self._store.backend == "postgresql":
                # The server stops a stuck read too, so this thread is free for the next scrape.
                with self._store.read("metrics_timeout") as tx:
                    tx.execute(f"SET statement_timeout = {int(self.seconds * 1000)}")
        try:
            return RunQueue(self._store).metrics()
        except Exception:  # the next scrape starts from a fresh connection
            store, self._store = self._store, None
            try:
                store.close()
            except StoreError:
                pass
            raise

    def read(self) -> QueueMetrics | None:
        """The store's metrics, or None when it cannot be read within the limit. Concurrent
        scrapes share one read; a read still stuck from an earlier scrape is waited on, not
        joined by a second one."""
        with self._lock:
            future = self._pending
            if future is None or future.done():
                future = self._pending = self._executor.submit(self._read)
        try:
            return future.result(timeout=self.seconds)
        except FutureTimeout:
            logs.event("metrics store read timed out", logging.WARNING, seconds=self.seconds)
        except StoreError as exc:
            logs.event("metrics store read failed", logging.WARNING, error=safe_text(exc))
        except Exception as exc:  # a driver error not turned into StoreError: still a "down"
            logs.event("metrics store read failed", logging.WARNING, error=type(exc).__name__)
        return None

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        store, self._store = self._store, None
        if store is not None:
            try:
                store.close()
            except StoreError:
                pass


class StoreCollector(Collector):
    """The run, attempt, queue and worker series of every process sharing the store."""

    def __init__(self, reader: MetricsReader) -> None:
        self.reader = reader

    def collect(self) -> Iterable[Metric]:
        snapshot = self.reader.read()
        up = GaugeMetricFamily(
            "goldeval_store_up",
            "1 when the run store answered this scrape within metrics_store_seconds, else 0 "
            "(then the store series below are absent)",
        )
        up.add_metric([], 0 if snapshot is None else 1)
        yield up
        if snapshot is None:
            return
        yield from _series(snapshot, datetime.now(timezone.utc))


def _dataset_runs(values: dict[tuple[str, str], float]) -> Metric:
    """Every status of every dataset the counters know, 0 included: a series that drops to
    0 reads 0, it does not vanish from the scrape (an absent series is not a zero)."""
    per_dataset: dict[tuple[str, str], float] = {}
    for (name, label), value in values.items():
        if name == "runs":
            status, _, dataset = label.partition("|")
            for known in RUN_STATUSES:
                per_dataset.setdefault((known, dataset), 0.0)
            per_dataset[status, dataset] = value
    family = GaugeMetricFamily(
        "goldeval_dataset_runs",
        "Runs of this service by status and dataset",
        labels=["status", "dataset"],
    )
    for (status, dataset), value in sorted(per_dataset.items()):
        family.add_metric([status, dataset], value)
    return family


def _series(m: QueueMetrics, now: datetime) -> Iterable[Metric]:
    runs: dict[str, float] = dict.fromkeys(RUN_STATUSES, 0.0)
    attempts = CounterMetricFamily(
        "goldeval_attempts",
        "Attempts recorded in the run store by status",
        labels=["status"],
    )
    errors = CounterMetricFamily(
        "goldeval_provider_errors",
        "ERROR attempts recorded in the run store by error kind",
        labels=["kind"],
    )
    attempt_counts: dict[str, float] = dict.fromkeys(ATTEMPT_STATUSES, 0.0)
    buckets: dict[str, float] = {}
    values = m.counters
    for (name, label), value in sorted(values.items()):
        if name == "runs":
            status = label.partition("|")[0]
            runs[status] = runs.get(status, 0.0) + value
        elif name == "attempts":
            attempt_counts[label] = value
        elif name == "provider_errors":
            errors.add_metric([label], value)
        elif name == "run_duration_bucket":
            buckets[label] = value
    g = GaugeMetricFamily("goldeval_runs", "Runs of this service by status", labels=["status"])
    for status, count in runs.items():
        g.add_metric([status], count)
    yield g
    yield _dataset_runs(values)
    for status, count in attempt_counts.items():
        attempts.add_metric([status], count)
    yield attempts
    yield errors
    yield CounterMetricFamily(
        "goldeval_tokens",
        "Total tokens of the attempts recorded in the run store",
        value=values.get(("tokens", ""), 0.0),
    )
    yield CounterMetricFamily(
        "goldeval_cost",
        "Estimated cost (the provider's currency) of the attempts recorded in the run store",
        value=values.get(("cost", ""), 0.0),
    )
    yield GaugeMetricFamily(
        "goldeval_queue_depth", "Runs waiting for a worker (QUEUED)", value=runs["QUEUED"]
    )
    age = 0.0 if m.oldest_queued is None else max(0.0, (now - m.oldest_queued).total_seconds())
    yield GaugeMetricFamily(
        "goldeval_queue_oldest_age_seconds",
        "Age of the oldest QUEUED run (0 when none waits)",
        value=age,
    )
    yield GaugeMetricFamily(
        "goldeval_workers_busy",
        "Workers running a run now (distinct workers of RUNNING runs, all processes)",
        value=m.busy_workers,
    )
    count = values.get(("run_duration_count", ""), 0.0)
    histogram = HistogramMetricFamily(
        "goldeval_run_duration_seconds",
        "Wall time of the service's runs, claimed to finished",
        buckets=[
            *((repr(float(b)), buckets.get(repr(float(b)), 0.0)) for b in DURATION_BUCKETS),
            ("+Inf", count),
        ],
        sum_value=values.get(("run_duration_sum", ""), 0.0),
    )
    yield histogram
