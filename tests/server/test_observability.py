"""Observability and the evidence pack of ``goldeval serve`` (issue 33): ``/metrics`` from the
store's counters (never the attempts), the store's health as a series, the paged run index and
every artifact type, over a real server process on SQLite and PostgreSQL."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from goldeval.store import open_store
from tests.server.conftest import Service, table_locked
from tests.store.conftest import UNDO_SCHEMA_13

Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scrape(svc: Service) -> Series:
    with svc.client("MONITOR") as monitor:
        response = monitor.get("/metrics")
    assert response.status_code == 200, response.text
    out: Series = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name.startswith("goldeval_") and not sample.name.startswith("goldeval_http_"):
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _value(series: Series, name: str, **labels: str) -> float:
    return series[(name, tuple(sorted(labels.items())))]


def _create(client: httpx.Client, **body: Any) -> dict[str, Any]:
    response = client.post("/api/eval/runs", json={"dataset": "demo-v1", **body})
    assert response.status_code in (200, 202), response.text
    return dict(response.json())


# --------------------------------------------------------------------------- /metrics


def test_counters_move_with_runs_and_the_scrape_never_reads_attempts(
    service_factory: Any, store_url: str
) -> None:
    svc: Service = service_factory(rows=3)
    svc.serve(lease=5)
    before = _scrape(svc)
    assert _value(before, "goldeval_store_up") == 1
    assert _value(before, "goldeval_runs", status="COMPLETED") == 0
    assert _value(before, "goldeval_attempts_total", status="PASS") == 0
    assert _value(before, "goldeval_run_duration_seconds_count") == 0
    with svc.client("EVAL") as client:
        run = svc.wait_status(_create(client, attempts=2)["id"])
    assert run["status"] == "COMPLETED", run
    after = _scrape(svc)
    assert _value(after, "goldeval_runs", status="COMPLETED") == 1
    assert _value(after, "goldeval_runs", status="QUEUED") == 0
    assert _value(after, "goldeval_dataset_runs", status="COMPLETED", dataset="demo-v1") == 1
    # The run went through QUEUED and RUNNING: those series read 0 now, they do not vanish.
    for gone in ("QUEUED", "RUNNING", "INTERRUPTED"):
        assert _value(after, "goldeval_dataset_runs", status=gone, dataset="demo-v1") == 0
    # 3 cases x 2 attempts, all passing: the counters equal the stored rows.
    with open_store(store_url) as store:
        with store._read("test") as tx:  # type: ignore[attr-defined]
            stored = dict(tx.query("SELECT status, COUNT(*) FROM attempts GROUP BY status"))
    assert stored == {"PASS": 6}
    assert _value(after, "goldeval_attempts_total", status="PASS") == 6
    assert _value(after, "goldeval_attempts_total", status="ERROR") == 0
    assert _value(after, "goldeval_run_duration_seconds_count") == 1
    assert _value(after, "goldeval_run_duration_seconds_bucket", le="+Inf") == 1
    assert _value(after, "goldeval_run_duration_seconds_sum") > 0
    assert _value(after, "goldeval_queue_depth") == 0
    assert _value(after, "goldeval_workers_busy") == 0

    # The scrape reads counters, not attempts: with every attempt row gone it is unchanged.
    with open_store(store_url) as store:
        with store._transaction("test") as tx:  # type: ignore[attr-defined]
            assert tx.execute("DELETE FROM attempts") == 6
    assert _scrape(svc) == after


def test_queue_depth_age_and_runs_by_status_follow_every_transition(
    service_factory: Any,
) -> None:
    svc: Service = service_factory()
    svc.serve(workers=0)  # nothing claims: the runs stay QUEUED
    with svc.client("EVAL") as client, svc.client("ADMIN") as admin:
        first = _create(client)
        _create(client, idempotencyKey="second")
        queued = _scrape(svc)
        assert _value(queued, "goldeval_queue_depth") == 2
        assert _value(queued, "goldeval_runs", status="QUEUED") == 2
        assert _value(queued, "goldeval_queue_oldest_age_seconds") > 0
        admin.post(f"/api/eval/runs/{first['id']}/cancel")
        cancelled = _scrape(svc)
        assert _value(cancelled, "goldeval_runs", status="QUEUED") == 1
        assert _value(cancelled, "goldeval_runs", status="INTERRUPTED") == 1
        admin.post(f"/api/eval/runs/{first['id']}/resume")
        assert _value(_scrape(svc), "goldeval_queue_depth") == 2
        admin.post(f"/api/eval/runs/{first['id']}/cancel")
        assert admin.delete(f"/api/eval/runs/{first['id']}").status_code == 204
        deleted = _scrape(svc)
        assert _value(deleted, "goldeval_runs", status="INTERRUPTED") == 0
        assert _value(deleted, "goldeval_runs", status="QUEUED") == 1
        assert _value(deleted, "goldeval_run_duration_seconds_count") == 0  # none ran


def test_an_unreadable_store_is_goldeval_store_up_0_not_a_gap(
    service_factory: Any, store_url: str
) -> None:
    svc: Service = service_factory()
    svc.serve(workers=0)
    with svc.client("EVAL") as client:
        _create(client)
    assert _value(_scrape(svc), "goldeval_store_up") == 1
    with open_store(store_url) as store:
        with store._transaction("test") as tx:  # type: ignore[attr-defined]
            tx.execute("ALTER TABLE service_counters RENAME TO service_counters_away")
        down = _scrape(svc)
        assert _value(down, "goldeval_store_up") == 0
        assert ("goldeval_runs", (("status", "QUEUED"),)) not in down
        with store._transaction("test") as tx:  # type: ignore[attr-defined]
            tx.execute("ALTER TABLE service_counters_away RENAME TO service_counters")
    back = _scrape(svc)
    assert _value(back, "goldeval_store_up") == 1
    assert _value(back, "goldeval_runs", status="QUEUED") == 1


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_a_store_that_does_not_answer_is_cut_at_metrics_store_seconds(
    service_factory: Any, store_url: str
) -> None:
    svc: Service = service_factory()
    svc.serve(workers=0)
    assert _value(_scrape(svc), "goldeval_store_up") == 1
    with table_locked(store_url, "service_counters"):
        # The scrape answers (httpx would fail after its 30 s timeout) with the store down.
        assert _value(_scrape(svc), "goldeval_store_up") == 0
    assert _value(_scrape(svc), "goldeval_store_up") == 1


def test_attempt_counters_follow_the_stores_upsert_rule(store_url: str) -> None:
    """New attempts count; an ERROR replaced by a later PASS counts both; a re-sent attempt
    the store keeps as it was counts nothing (resumed runs, reruns of errors, re-sent
    reports)."""

    def record(case: str, status: str, **extra: Any) -> dict[str, Any]:
        usage = {"totalTokens": 10, "estimatedCost": 0.5}
        return {"caseId": case, "index": 0, "status": status, "tokens": usage, **extra}

    def counted(store: Any) -> dict[tuple[str, str], float]:
        from goldeval.store import counters

        with store._read("test") as tx:
            return counters.read(tx)

    with open_store(store_url) as store:
        store.begin_run(
            "r1", dataset_id="d", dataset_hash="h", mode="fixture", protocol={}, configuration={}
        )
        store.record_attempts(
            "r1", [record("a", "PASS"), record("b", "ERROR", errorKind="TIMEOUT")]
        )
        first = counted(store)
        assert first[("attempts", "PASS")] == 1
        assert first[("attempts", "ERROR")] == 1
        assert first[("provider_errors", "TIMEOUT")] == 1
        assert first[("tokens", "")] == 20
        assert first[("cost", "")] == 1.0
        # The rerun of errors: b passes now; a is re-sent unchanged; c is new.
        store.record_attempts("r1", [record("a", "FAIL"), record("b", "PASS"), record("c", "PASS")])
        second = counted(store)
        assert second[("attempts", "PASS")] == 3
        assert second[("attempts", "ERROR")] == 1
        assert ("attempts", "FAIL") not in second  # a kept its stored PASS
        assert second[("tokens", "")] == 40
        with store._read("test") as tx:
            rows = dict(tx.query("SELECT case_id, status FROM attempts"))
        assert rows == {"a": "PASS", "b": "PASS", "c": "PASS"}


# --------------------------------------------------------------------------- /ui/ paging


def seed_finished_runs(store: Any, count: int, prefix: str = "seed") -> list[str]:
    """``count`` finished service runs, each with the store run and summary document the plugin
    leaves (what the index page reads), written straight to the store; their ids, oldest
    first."""
    from datetime import datetime, timedelta, timezone

    ids = []
    start = datetime.now(timezone.utc)
    for n in range(count):
        job_id = f"{prefix}{n:05d}"
        store_run = f"{prefix}-run-{n:05d}"
        store.begin_run(
            store_run,
            run_key=f"svc-{job_id}",
            dataset_id="demo-v1",
            dataset_hash="h" * 64,
            mode="fixture",
            protocol={"datasetId": "demo-v1"},
            configuration={"goldenMode": "fixture"},
        )
        rate = {"value": 1.0, "hits": 2, "total": 2}
        doc = {"runId": store_run, "status": "COMPLETED", "metrics": {"overallPassRate": rate}}
        store.finish_run(store_run, "COMPLETED", {"runDocument": doc, "metrics": doc["metrics"]})
        with store._transaction("seed") as tx:
            tx.execute(
                "INSERT INTO service_runs (id, status, dataset_id, request, run_key, run_id,"
                " claims, cancel_requested, created_at) VALUES (?, 'COMPLETED', 'demo-v1', '{}',"
                " ?, ?, 1, 0, ?)",
                (job_id, f"svc-{job_id}", store_run, store.ts_param(start + timedelta(seconds=n))),
            )
        ids.append(job_id)
    return ids


def _links(page: str) -> list[str]:
    return re.findall(r'href="runs/([0-9A-Za-z-]+)\.html"', page)


def test_the_run_index_is_paged_newest_first_with_a_cursor(
    service_factory: Any, store_url: str
) -> None:
    from goldeval.server.pages import PAGE_RUNS

    svc: Service = service_factory()
    svc.serve(lease=5)
    with svc.client("EVAL") as client:
        real = svc.wait_status(_create(client)["id"])
    with open_store(store_url) as store:
        seeded = seed_finished_runs(store, PAGE_RUNS + 5)
    with svc.client("EVAL") as client:
        first = client.get("/ui/")
        assert first.status_code == 200, first.text
        on_first = list(dict.fromkeys(_links(first.text)))
        # The newest PAGE_RUNS runs, newest first; the real (oldest) run is not among them.
        assert on_first == list(reversed(seeded))[:PAGE_RUNS]
        older = re.search(r'href="\?before=([^"]+)" rel="next"', first.text)
        assert older is not None
        second = client.get("/ui/", params={"before": html.unescape(older.group(1))})
        assert second.status_code == 200, second.text
        on_second = list(dict.fromkeys(_links(second.text)))
        assert on_second == [*list(reversed(seeded))[PAGE_RUNS:], real["id"]]
        assert 'rel="next"' not in second.text  # the last page
        assert 'rel="first"' in second.text
        # The real run's row shows what the plugin recorded (its pass rate), from its summary.
        assert real["storeRunId"] in second.text
        bad = client.get("/ui/", params={"before": "not-a-cursor"})
        assert bad.status_code == 422
        assert "cursor" in bad.text


# --------------------------------------------------------------------------- the evidence pack


def test_every_artifact_type_downloads_and_a_tampered_one_is_refused(service: Service) -> None:
    import hashlib
    import io
    import json
    import zipfile
    from xml.etree import ElementTree

    with service.client("EVAL") as client:
        run = service.wait_status(_create(client)["id"])
        assert run["status"] == "COMPLETED", run
        listed = {a["type"]: a for a in run["artifacts"]}
        expected = {
            "JSON_SUMMARY", "RUN_JSON", "REPORT_MD", "MANIFEST", "JUNIT_XML", "HTML_REPORT",
            "LOG_BUNDLE",
        }  # fmt: skip
        assert expected <= set(listed), listed
        base = f"/api/eval/runs/{run['id']}/artifacts"
        got = {}
        for kind in expected:
            response = client.get(f"{base}/{kind}")
            assert response.status_code == 200, (kind, response.text)
            assert hashlib.sha256(response.content).hexdigest() == listed[kind]["sha256"]
            assert not listed[kind]["path"].startswith("/")
            got[kind] = response
        # What each file is: pytest's JUnit of the run's two cases, pytest-html's report, the
        # run folder's manifest, the run's log.
        suite = ElementTree.fromstring(got["JUNIT_XML"].content)
        cases = suite.findall(".//testcase")
        assert len(cases) == 2 and not suite.findall(".//failure")
        assert got["JUNIT_XML"].headers["content-type"].startswith("application/xml")
        assert got["HTML_REPORT"].headers["content-type"].startswith("text/html")
        assert b"<html" in got["HTML_REPORT"].content.lower()
        manifest = json.loads(got["MANIFEST"].content)
        assert {a["path"] for a in manifest["artifacts"]} >= {"run.json", "summary.json"}
        bundle = zipfile.ZipFile(io.BytesIO(got["LOG_BUNDLE"].content))
        (log_name,) = bundle.namelist()
        assert log_name == f"{run['id']}.log"
        assert b"passed" in bundle.read(log_name)
        # `goldeval verify` still finds the run folder complete: the service's files are beside it.
        folder = service.root / ".goldeval" / "runs" / run["storeRunId"]
        verify = subprocess.run(
            [sys.executable, "-m", "goldeval.cli.main", "verify", str(folder)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")},
        )
        assert verify.returncode == 0, verify.stdout + verify.stderr
        # Tampered after the run: refused, each type.
        evidence = service.root / ".goldeval" / "service" / "evidence" / run["id"]
        for kind, path in (
            ("JUNIT_XML", evidence / "junit.xml"),
            ("HTML_REPORT", evidence / "report.html"),
            ("LOG_BUNDLE", evidence / "logs.zip"),
            ("MANIFEST", folder / "manifest.json"),
        ):
            path.write_bytes(path.read_bytes() + b" ")
            refused = client.get(f"{base}/{kind}")
            assert refused.status_code == 409, (kind, refused.text)
            assert refused.json()["type"] == "/problems/artifact-checksum-mismatch"


def test_the_counters_migration_fills_them_from_the_rows_already_stored(store_url: str) -> None:
    """A store upgraded from schema 8 starts with counters equal to its rows (runs by status
    and dataset, attempts by status, errors by kind, tokens)."""
    from goldeval.store import counters
    from goldeval.store.migrations import LATEST_VERSION
    from goldeval.store.queue import RunQueue

    def record(case: str, status: str, **extra: Any) -> dict[str, Any]:
        return {"caseId": case, "index": 0, "status": status, "tokens": {"totalTokens": 7}, **extra}

    with open_store(store_url) as store:
        store.begin_run(
            "r1", dataset_id="d", dataset_hash="h", mode="fixture", protocol={}, configuration={}
        )
        store.record_attempts(
            "r1",
            [record("a", "PASS"), record("b", "FAIL"), record("c", "ERROR", errorKind="HTTP_5XX")],
        )
        RunQueue(store).enqueue("q1", dataset_id="demo-v1", request={}, idempotency_key=None)
        with store._read("test") as tx:  # type: ignore[attr-defined]
            live = counters.read(tx)
        # Back to schema 9: no counters table (schema 10), no recorded exit decision (schema
        # 11), no attempts.variant (schema 12) and no shared rows (schema 13), so that the
        # migrations run again.
        with store._transaction("test") as tx:  # type: ignore[attr-defined]
            for statement in UNDO_SCHEMA_13:
                tx.execute(statement)
            tx.execute("DROP TABLE service_counters")
            tx.execute("ALTER TABLE service_runs DROP COLUMN exit_decision")
            tx.execute("ALTER TABLE attempts DROP COLUMN variant")
            tx.execute("DELETE FROM schema_version WHERE version >= ?", (10,))
    with open_store(store_url) as store:
        assert store.schema_version() == LATEST_VERSION
        with store._read("test") as tx:  # type: ignore[attr-defined]
            migrated = counters.read(tx)
    expected = {
        ("runs", "QUEUED|demo-v1"): 1.0,
        ("attempts", "PASS"): 1.0,
        ("attempts", "FAIL"): 1.0,
        ("attempts", "ERROR"): 1.0,
        ("provider_errors", "HTTP_5XX"): 1.0,
        ("tokens", ""): 21.0,
    }
    assert migrated == expected
    assert live == expected  # what the write path counted is what the migration counts
