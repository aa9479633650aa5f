"""A page cursor of a run's attempts continues only the listing that returned it: the results
endpoint's ``nextCursor`` and the run page's ``?after=`` are bound to the run and the status
filter. A cursor of ``/runs/R1/results?status=PASS`` was taken for ``?status=FAIL`` or for
another run (200, every row before its key silently skipped), and so was a hand-made one.
The run list's cursor is bound to its dataset, status and since filters the same way.
Over a real ``goldeval serve`` process, on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import html
import json
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from goldeval.server.run_page import PAGE_ATTEMPTS
from goldeval.store import open_store
from goldeval.store.cursors import cursor_scope, decode_cursor, encode_cursor
from tests.server.conftest import Service

PROBLEM = "application/problem+json"
CASES = 110  # two attempts each: more than a run page's PAGE_ATTEMPTS, of each status
NEXT = re.compile(r'<a href="([^"]+)" rel="next">')


def _seed(store: Any, job_id: str) -> None:
    """A finished service run and its store run: attempt 1 of each case PASS, attempt 2 FAIL."""
    store_run = f"{job_id}-run"
    store.begin_run(
        store_run,
        run_key=f"svc-{job_id}",
        dataset_id="demo-v1",
        dataset_hash="h" * 64,
        mode="fixture",
        protocol={"datasetId": "demo-v1", "mode": "fixture", "attempts": 2},
        configuration={"goldenMode": "fixture"},
    )
    store.record_cases(store_run, [{"caseId": f"case-{n:04d}"} for n in range(CASES)])
    records = [
        {"caseId": f"case-{n:04d}", "index": index, "status": status, "durationMs": 1}
        for n in range(CASES)
        for index, status in ((1, "PASS"), (2, "FAIL"))
    ]
    store.record_attempts(store_run, records)
    doc = {"runId": store_run, "status": "COMPLETED", "attemptsTotal": len(records)}
    store.finish_run(store_run, "COMPLETED", {"runDocument": doc})
    with store._transaction("seed") as tx:
        tx.execute(
            "INSERT INTO service_runs (id, status, dataset_id, request, run_key, run_id,"
            " claims, cancel_requested, created_at) VALUES (?, ?, 'demo-v1', '{}', ?, ?, 1, 0, ?)",
            (job_id, "COMPLETED", f"svc-{job_id}", store_run, store.ts_param(datetime.now(UTC))),
        )


def _refused(response: httpx.Response, field: str) -> str:
    assert response.status_code == 422, response.text[:500]
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert body["type"] == "/problems/validation"
    assert [e["field"] for e in body["errors"]] == [field], body
    return str(body["errors"][0]["message"])


def _hand_made(*parts: str) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(parts)).encode()).decode().rstrip("=")


def _results(client: httpx.Client, run: str, **params: Any) -> httpx.Response:
    return client.get(f"/api/eval/runs/{run}/results", params=params)


@pytest.fixture
def two_runs(service_factory: Any, store_url: str) -> Service:
    """A service (no worker) over a store holding the runs r1 and r3, seeded alike."""
    svc: Service = service_factory()
    svc.serve(workers=0)
    with open_store(store_url) as store:
        for run in ("r1", "r3"):
            _seed(store, run)
    return svc


def test_a_results_cursor_is_refused_for_another_run_or_status(two_runs: Service) -> None:
    svc = two_runs
    with svc.client("EVAL") as client:
        first = _results(client, "r1", status="PASS", limit=2).json()
        cursor = first["nextCursor"]
        assert [r["caseId"] for r in first["items"]] == ["case-0000", "case-0001"]
        # The listing it came from goes on where it stopped.
        more = _results(client, "r1", status="PASS", limit=2, cursor=cursor)
        assert more.status_code == 200, more.text
        assert [r["caseId"] for r in more.json()["items"]] == ["case-0002", "case-0003"]
        # Any other listing refuses it: 422 naming the cursor, never a page that skips rows.
        for run, status in (("r1", "FAIL"), ("r1", None), ("r3", "PASS"), ("r3", None)):
            params = {"limit": 2, "cursor": cursor, **({"status": status} if status else {})}
            message = _refused(_results(client, run, **params), "cursor")
            assert "another run or status filter" in message, message
        unfiltered = _results(client, "r1", limit=3).json()["nextCursor"]
        _refused(_results(client, "r1", status="PASS", limit=3, cursor=unfiltered), "cursor")
        assert _results(client, "r1", limit=3, cursor=unfiltered).status_code == 200
        # Hand-made cursors, of the old shape or with a made-up binding, are refused too.
        for made in (
            _hand_made("r5", "-1", ""),
            _hand_made("case-0000", "1", ""),
            _hand_made("case-0000", "1", "", "0" * 16),
            encode_cursor("case-0000", "1", "", scope=cursor_scope("attempts", "r3", "PASS")),
        ):
            _refused(_results(client, "r1", status="PASS", cursor=made), "cursor")


def test_a_run_page_cursor_is_refused_for_another_run_or_status(two_runs: Service) -> None:
    svc = two_runs
    with svc.client("EVAL") as client:
        page = client.get("/ui/runs/r1.html")
        assert page.status_code == 200, page.text[-500:]
        link = html.unescape(NEXT.search(page.text).group(1))  # type: ignore[union-attr]
        after = parse_qs(urlsplit(link).query)["after"][0]
        assert link.startswith("r1.html?")
        following = client.get("/ui/runs/r1.html", params={"after": after})
        assert following.status_code == 200
        assert following.text.count("<tr><td><code>case-") == 2 * CASES - PAGE_ATTEMPTS
        for run, status in (("r1", "FAIL"), ("r1", "PASS"), ("r3", None)):
            params = {"after": after, **({"status": status} if status else {})}
            message = _refused(client.get(f"/ui/runs/{run}.html", params=params), "after")
            assert "another run or status filter" in message, message
        made = _hand_made("r5", "-1", "")
        _refused(client.get("/ui/runs/r1.html", params={"after": made}), "after")
        # The results endpoint's cursor of the same listing (run and status) pages it too.
        api = _results(client, "r1", limit=PAGE_ATTEMPTS).json()["nextCursor"]
        assert client.get("/ui/runs/r1.html", params={"after": api}).status_code == 200


def test_a_bound_cursor_round_trips_and_refuses_another_scope() -> None:
    scope = cursor_scope("attempts", "r1", "PASS")
    cursor = encode_cursor("case", "1", "", scope=scope)
    assert decode_cursor(cursor, 3, scope=scope) == ["case", "1", ""]
    for other in (cursor_scope("attempts", "r1", None), cursor_scope("attempts", "r3", "PASS")):
        with pytest.raises(ValueError, match="another run or status filter"):
            decode_cursor(cursor, 3, scope=other)
    with pytest.raises(ValueError, match="not one this server returned"):
        decode_cursor(encode_cursor("case", "1", ""), 3, scope=scope)  # unbound
    assert cursor_scope("attempts", "r1", None) == cursor_scope("attempts", "r1", "")


def test_a_run_list_cursor_is_refused_for_other_filters(service_factory: Any) -> None:
    """The same class on the run list: a cursor of ``/runs?limit=1`` was taken with a dataset,
    status or since filter, and skipped every run before its key in that listing."""
    svc: Service = service_factory()
    svc.serve(workers=0)  # the runs stay QUEUED
    with svc.client("EVAL") as client:
        for n in range(3):
            made = client.post(
                "/api/eval/runs", json={"dataset": "demo-v1", "idempotencyKey": f"list-{n}"}
            )
            assert made.status_code == 202, made.text
        first = client.get("/api/eval/runs", params={"limit": 1}).json()
        cursor = first["nextCursor"]
        same = client.get("/api/eval/runs", params={"limit": 1, "cursor": cursor})
        assert same.status_code == 200 and same.json()["items"], same.text
        for other in (
            {"status": "QUEUED"},
            {"dataset": "demo-v1"},
            {"since": "2000-01-01T00:00:00Z"},
        ):
            message = _refused(
                client.get("/api/eval/runs", params={"limit": 1, "cursor": cursor, **other}),
                "cursor",
            )
            assert "another" in message, message
