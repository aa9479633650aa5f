"""The run page's per-key bound and page cache (issue 33: one key loading /ui/ six times at once
starved the 8-thread pool), over a real ``goldeval serve`` process."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import pytest

from goldeval.server.page_guard import CACHED_PAGES, LOADS_PER_KEY, PageCache
from goldeval.store import open_store
from goldeval.store.cursors import encode_cursor
from tests.server.conftest import API_KEYS_ENV, Service, _raw_connect, table_locked
from tests.server.test_observability import _create, _links, seed_finished_runs

OTHER_EVAL_KEY = "second-eval-key-0123456789abcdef"


def _waiting_locks(url: str) -> int:
    with _raw_connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
    return int(row[0])


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_one_key_gets_429_past_its_loads_while_another_key_is_served(
    service_factory: Any, store_url: str, postgres_server: Any
) -> None:
    svc: Service = service_factory(
        env={"GOLDEVAL_API_KEYS": f"{API_KEYS_ENV},{OTHER_EVAL_KEY}:EVAL"}
    )
    svc.serve(workers=0)
    with open_store(store_url) as store:
        seed_finished_runs(store, 3)
    other = svc.client(key=OTHER_EVAL_KEY)
    cached = other.get("/ui/")
    assert cached.status_code == 200, cached.text

    # Hold every read of `runs` (what a page render reads per run) with a lock: a real slow
    # store, not a stub. The queue rows (what the cache key is read from) stay readable.
    answers: list[httpx.Response] = []
    # A page not in the cache (a cursor after every run): each of these loads renders.
    uncached = {
        "before": encode_cursor((datetime.now(timezone.utc) + timedelta(days=1)).isoformat(), "z")
    }

    def load() -> None:
        with svc.client("EVAL") as client:
            answers.append(client.get("/ui/", params=uncached))

    loaders = [threading.Thread(target=load) for _ in range(LOADS_PER_KEY)]
    try:
        with table_locked(store_url, "runs"):
            for thread in loaders:
                thread.start()
            # Both loads are in flight once both wait on the lock (a condition, not a duration).
            deadline = time.monotonic() + 60
            while _waiting_locks(postgres_server.url) < LOADS_PER_KEY:
                assert time.monotonic() < deadline, "the loads never reached the store"
                time.sleep(0.05)
            with svc.client("EVAL") as client:
                refused = client.get("/ui/", params=uncached)
            assert refused.status_code == 429, refused.text
            assert refused.headers["retry-after"] == "1"
            problem = refused.json()
            assert problem["type"] == "/problems/too-many-page-loads"
            assert (
                "ui_loads_per_key" in problem["detail"]
                and f"at most {LOADS_PER_KEY}" in problem["detail"]
            )
            # Another key of the same role is served meanwhile, from the cache (the store's runs
            # are still locked): the same bytes as before.
            served = other.get("/ui/")
            assert served.status_code == 200
            assert served.content == cached.content
    finally:
        for thread in loaders:
            if thread.ident is not None:
                thread.join(120)
        other.close()
    assert [a.status_code for a in answers] == [200] * LOADS_PER_KEY
    # The slots were given back: the key loads again.
    with svc.client("EVAL") as client:
        assert client.get("/ui/", params=uncached).status_code == 200


def test_the_cache_serves_the_same_page_until_a_run_finishes(
    service_factory: Any, store_url: str
) -> None:
    svc: Service = service_factory()
    svc.serve(lease=5)
    with open_store(store_url) as store:
        seed_finished_runs(store, 2)
        # A queue row whose store run the plugin has not written yet: not on the page.
        with store._transaction("seed") as tx:  # type: ignore[attr-defined]
            tx.execute(
                "INSERT INTO service_runs (id, status, dataset_id, request, run_key, run_id,"
                " claims, cancel_requested, created_at) VALUES ('late00000', 'RUNNING',"
                " 'demo-v1', '{}', 'svc-late00000', 'late-run', 1, 0, ?)",
                (store.ts_param(datetime.now(timezone.utc)),),
            )
    with svc.client("EVAL") as client:
        first = client.get("/ui/")
        assert first.status_code == 200, first.text
        assert "late00000" not in _links(first.text)
        # The store run appears (its summary written) but no run was queued, finished or
        # deleted: the cached page is served, byte for byte (a render would now show it).
        with open_store(store_url) as store:
            store.begin_run(
                "late-run", run_key="svc-late00000", dataset_id="demo-v1", dataset_hash="h" * 64,
                mode="fixture", protocol={"datasetId": "demo-v1"},
                configuration={"goldenMode": "fixture"},
            )  # fmt: skip
            doc = {"runId": "late-run", "status": "COMPLETED", "metrics": {}}
            store.finish_run("late-run", "COMPLETED", {"runDocument": doc, "metrics": {}})
        again = client.get("/ui/")
        assert again.content == first.content
        # A run finishes: the next load renders, with the late run and the new one.
        run = svc.wait_status(_create(client)["id"])
        assert run["status"] == "COMPLETED", run
        fresh = client.get("/ui/")
        assert fresh.status_code == 200
        assert fresh.content != first.content
        assert {"late00000", run["id"]} <= set(_links(fresh.text))


def test_the_page_cache_keeps_at_most_its_limit_and_drops_older_markers() -> None:
    cache = PageCache()
    for n in range(CACHED_PAGES + 3):
        cache.put("EVAL", f"c{n}", "m1", f"page {n}")
    assert len(cache) == CACHED_PAGES
    assert cache.get("EVAL", "c0", "m1") is None  # the least recently used went first
    assert cache.get("EVAL", f"c{CACHED_PAGES + 2}", "m1") == f"page {CACHED_PAGES + 2}"
    assert cache.get("EVAL", "c5", "m2") is None  # another marker: never the old page
    cache.put("EVAL", "c5", "m2", "new")
    assert len(cache) == 1
