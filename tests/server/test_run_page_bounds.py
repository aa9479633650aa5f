"""The run page and the run answer at team scale (issue 33): a run of 3,000 attempts is shown
a page of attempts at a time, under a size bound, with next-page links that together show
every attempt once; the run answer's counts come from the counts the store keeps, equal to
the real counts (running, rerun, sharing), without reading the run's attempts. Over a real
``goldeval serve`` process and store."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from typing import Any

import httpx

from goldeval.server.run_page import PAGE_ATTEMPTS
from goldeval.store import open_store
from tests.server.conftest import Service, table_locked

CASES = 1000
STATUSES = ("PASS", "PASS", "FAIL", "PASS", "ERROR", "SKIPPED", "PASS")
HOSTILE = "<script>alert(1)</script> see /etc/goldeval-secret/file.txt"
#: The run page's size bound at any run size.
MAX_PAGE_BYTES = 200_000
ROW = re.compile(r"<tr><td><code>(case-\d+)</code></td><td>(\d+)</td>")
NEXT = re.compile(r'<a href="([^"]+)" rel="next">')


def _records(statuses: tuple[str, ...] = STATUSES) -> list[dict[str, Any]]:
    out = []
    for n in range(CASES):
        for index in (1, 2, 3):
            status = statuses[(n + index) % len(statuses)]
            record: dict[str, Any] = {
                "caseId": f"case-{n:05d}",
                "index": index,
                "status": status,
                "durationMs": 12,
                "output": f"answer {n}",
            }
            if status == "FAIL":
                record["graders"] = [
                    {
                        "grader": "regex",
                        "passed": False,
                        "hard": True,
                        "violations": [{"grader": "regex", "reason": HOSTILE}],
                    }
                ]
            if status == "ERROR":
                record["errorKind"] = "TIMEOUT"
                record["errorMessage"] = HOSTILE
            out.append(record)
    return out


def _seed(store: Any, job_id: str, records: list[dict[str, Any]], *, finish: bool) -> str:
    """A service run and its store run (written as the plugin does), finished or running."""
    store_run = f"{job_id}-run"
    store.begin_run(
        store_run,
        run_key=f"svc-{job_id}",
        dataset_id="demo-v1",
        dataset_hash="h" * 64,
        mode="fixture",
        protocol={"datasetId": "demo-v1", "mode": "fixture", "attempts": 3},
        configuration={"goldenMode": "fixture"},
    )
    store.record_cases(store_run, [{"caseId": f"case-{n:05d}"} for n in range(CASES)])
    for start in range(0, len(records), 500):
        store.record_attempts(store_run, records[start : start + 500])
    status = "RUNNING"
    if finish:
        status = "COMPLETED"
        rate = {"rate": 0.5, "hits": 1, "total": 2}
        doc = {
            "runId": store_run,
            "status": status,
            "attemptsTotal": len(records),
            "metrics": {"overallPassRate": rate},
        }
        store.finish_run(store_run, status, {"runDocument": doc, "metrics": doc["metrics"]})
    with store._transaction("seed") as tx:
        tx.execute(
            "INSERT INTO service_runs (id, status, dataset_id, request, run_key, run_id,"
            " claims, cancel_requested, created_at) VALUES (?, ?, 'demo-v1', '{}', ?, ?, 1, 0, ?)",
            (job_id, status, f"svc-{job_id}", store_run, store.ts_param(datetime.now(UTC))),
        )
    return store_run


def _pages(client: httpx.Client, url: str) -> tuple[list[tuple[str, int]], int]:
    """Every attempt row shown by following the next-page links from ``url``; the largest
    page's size in bytes."""
    shown: list[tuple[str, int]] = []
    largest = 0
    while url:
        page = client.get(url)
        assert page.status_code == 200, page.text[-2000:]
        largest = max(largest, len(page.content))
        rows = ROW.findall(page.text)
        assert 0 < len(rows) <= PAGE_ATTEMPTS
        shown += [(case, int(index)) for case, index in rows]
        found = NEXT.search(page.text)
        url = f"/ui/runs/{html.unescape(found.group(1))}" if found else ""
    return shown, largest


def _counted(store: Any, run_id: str) -> dict[str, int]:
    with store._read("test") as tx:
        rows = tx.query(
            "SELECT status, COUNT(*) FROM run_attempts WHERE run_id = ? GROUP BY status",
            (run_id,),
        )
    return {str(s): int(n) for s, n in rows}


def test_a_large_runs_page_is_bounded_and_its_pages_show_every_attempt_once(
    service_factory: Any, store_url: str
) -> None:
    svc: Service = service_factory()
    svc.serve(workers=0)
    records = _records()
    with open_store(store_url) as store:
        _seed(store, "big", records, finish=True)
        _seed(store, "base", _records(("PASS",)), finish=True)
    with svc.client("EVAL") as client:
        shown, largest = _pages(client, "/ui/runs/big.html")
        first = client.get("/ui/runs/big.html").text
        failed, _ = _pages(client, "/ui/runs/big.html?status=FAIL")
        compared, compared_largest = _pages(client, "/ui/runs/big.html?compare=base")
        compare_page = client.get("/ui/runs/big.html", params={"compare": "base"}).text
        bad = client.get("/ui/runs/big.html", params={"after": "not a cursor"})
    assert len(shown) == len(records) == len(set(shown))
    assert set(shown) == {(r["caseId"], r["index"]) for r in records}
    assert largest <= MAX_PAGE_BYTES, largest
    assert len(failed) == len(set(failed)) == sum(r["status"] == "FAIL" for r in records)
    assert 'href="big.html?status=FAIL"' in first  # the status filter links
    # Escaped, and no absolute path of the server shown.
    assert "<script>alert(1)" not in first and "&lt;script&gt;alert(1)" in first
    assert "/etc/goldeval-secret" not in first and "&lt;server path&gt;" in first
    # ?compare= of runs this large: paged the same way, each attempt against the baseline's.
    assert sorted(compared) == sorted(shown) and compared_largest <= MAX_PAGE_BYTES
    assert "Baseline status" in compare_page and "/api/eval/runs/big/compare/base" in compare_page
    assert "vs <code>run base</code>" in compare_page
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "after"


def test_the_run_answer_counts_are_the_stored_counts_without_reading_attempts(
    service_factory: Any, store_url: str, backend: str
) -> None:
    svc: Service = service_factory()
    svc.serve(workers=0)
    with open_store(store_url) as store:
        running = _seed(store, "running", _records()[:1200], finish=False)
        owner = _seed(store, "owner", _records(), finish=True)
        sharing = _seed(store, "sharing", _records(), finish=True)
        with store._read("test") as tx:
            assert tx.query("SELECT rows_of FROM runs WHERE run_id = ?", (sharing,)) == [(owner,)]
    with svc.client("EVAL") as client:

        def counts(job_id: str) -> dict[str, int]:
            answer = client.get(f"/api/eval/runs/{job_id}")
            assert answer.status_code == 200, answer.text
            return dict(answer.json()["attempts"])

        with open_store(store_url) as store:
            assert counts("running") == _counted(store, running)
            assert sum(counts("running").values()) == 1200
            # The run goes on: its errors are rerun and pass, more attempts arrive.
            errors = [r for r in _records()[:1200] if r["status"] == "ERROR"]
            store.record_attempts(running, [{**r, "status": "PASS"} for r in errors])
            store.record_attempts(running, _records()[1200:1500])
            assert counts("running") == _counted(store, running)
            assert "ERROR" not in counts("running") or counts("running")["ERROR"] < len(errors)
            assert counts("sharing") == counts("owner") == _counted(store, sharing)
            assert sum(counts("sharing").values()) == 3 * CASES
        if backend == "postgresql":
            # The answer reads no attempt: with the attempts table locked it still answers.
            with table_locked(store_url, "attempts"):
                assert sum(counts("owner").values()) == 3 * CASES
