"""The REST API of ``goldeval serve``, driven over HTTP against a real server process.

Every run here really executes (fixture mode, the two-row ``goldeval init`` dataset) through
the worker's pytest subprocess, so what the API reports is what the plugin recorded.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import threading
import uuid
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import KEYS, Service, _raw_connect, _with_search_path

PROBLEM = "application/problem+json"
#: Backend-independent behaviour: checked on SQLite only, to keep the suite quick.
SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


def _problem(response: httpx.Response, status: int, kind: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM), response.headers
    body = response.json()
    assert body["status"] == status
    assert body["title"]
    if kind is not None:
        assert body["type"] == f"/problems/{kind}", body
    return dict(body)


def _create(client: httpx.Client, **body: Any) -> dict[str, Any]:
    response = client.post("/api/eval/runs", json={"dataset": "demo-v1", **body})
    assert response.status_code in (200, 202), response.text
    return dict(response.json())


# --------------------------------------------------------------------------- the run life cycle


def test_run_executes_as_the_plugin_and_every_read_endpoint_reports_it(service: Service) -> None:
    with service.client("EVAL") as client:
        response = client.post(
            "/api/eval/runs", json={"dataset": "demo-v1", "idempotencyKey": "ci-1"}
        )
        assert response.status_code == 202, response.text
        created = response.json()
        assert created["status"] == "QUEUED"
        assert response.headers["location"] == f"/api/eval/runs/{created['id']}"
        run = service.wait_status(created["id"])
        assert run["status"] == "COMPLETED", run
        assert run["exitCode"] == 0 and run["passed"] is True
        assert run["exitDecision"]["code"] == 0
        assert run["qualityGate"]["verdict"] == "PASS"
        assert run["attempts"] == {"PASS": 2}
        assert run["protocol"]["datasetId"] == "demo-v1"
        assert run["metrics"]["overallPassRate"]["hits"] == 2

        # The run folder is the plugin's, and the API's inventory is its checksums.
        run_dir = service.root / ".goldeval" / "runs" / run["storeRunId"]
        on_disk = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        assert on_disk["exitDecision"] == run["exitDecision"]
        types = {a["type"]: a for a in run["artifacts"]}
        assert {"JSON_SUMMARY", "RUN_JSON", "REPORT_MD"} <= set(types)
        # The service's own evidence (JUnit, HTML report, logs) is kept beside the run folder.
        evidence = service.root / ".goldeval" / "service" / "evidence" / created["id"]
        for artifact in types.values():
            path = artifact["path"]
            folder = evidence if path.startswith("service/") else run_dir
            data = (folder / path.removeprefix("service/")).read_bytes()
            assert artifact["sha256"] == hashlib.sha256(data).hexdigest()
            assert artifact["size"] == len(data)

        summary = client.get(f"/api/eval/runs/{created['id']}/artifacts/JSON_SUMMARY")
        assert summary.status_code == 200
        assert summary.headers["content-type"].startswith("application/json")
        assert summary.content == (run_dir / "summary.json").read_bytes()
        assert summary.json()["casesPassed"] == 2

        # Results: cursor pagination and a status filter.
        first = client.get(f"/api/eval/runs/{created['id']}/results", params={"limit": 1}).json()
        assert [r["caseId"] for r in first["items"]] == ["greeting"]
        assert first["items"][0]["status"] == "PASS"
        second = client.get(
            f"/api/eval/runs/{created['id']}/results",
            params={"limit": 1, "cursor": first["nextCursor"]},
        ).json()
        assert [r["caseId"] for r in second["items"]] == ["order-number"]
        assert second["nextCursor"] is None
        failed = client.get(
            f"/api/eval/runs/{created['id']}/results", params={"status": "FAIL"}
        ).json()
        assert failed["items"] == []

        # The same key again: the existing run, 200, never a second run.
        again = client.post("/api/eval/runs", json={"dataset": "demo-v1", "idempotencyKey": "ci-1"})
        assert again.status_code == 200 and again.json()["id"] == created["id"]

        # A second run with another attempt count: listed, filtered, compared.
        other = _create(client, attempts=2, idempotencyKey="ci-2")
        service.wait_status(other["id"])
        twin = _create(client, idempotencyKey="ci-3")
        service.wait_status(twin["id"])
        listed = client.get("/api/eval/runs").json()
        assert [r["id"] for r in listed["items"]] == [twin["id"], other["id"], created["id"]]
        page = client.get("/api/eval/runs", params={"limit": 2}).json()
        assert [r["id"] for r in page["items"]] == [twin["id"], other["id"]]
        rest = client.get("/api/eval/runs", params={"limit": 2, "cursor": page["nextCursor"]})
        assert [r["id"] for r in rest.json()["items"]] == [created["id"]]
        assert rest.json()["nextCursor"] is None
        assert client.get("/api/eval/runs", params={"status": "QUEUED"}).json()["items"] == []
        assert len(client.get("/api/eval/runs", params={"dataset": "demo-v1"}).json()["items"]) == 3
        assert client.get("/api/eval/runs", params={"dataset": "other-v1"}).json()["items"] == []
        future = client.get("/api/eval/runs", params={"since": "2999-01-01T00:00:00Z"}).json()
        assert future["items"] == []

        same = client.get(f"/api/eval/runs/{twin['id']}/compare/{created['id']}")
        assert same.status_code == 200, same.text
        assert same.json()["decision"] == "NO_REGRESSION"
        assert same.json()["counts"]["UNCHANGED_PASS"] == 2
        differs = _problem(
            client.get(f"/api/eval/runs/{other['id']}/compare/{created['id']}"),
            409,
            "not-comparable",
        )
        assert "attempts" in differs["detail"]
        assert differs["reasons"]
        assert differs["exitDecision"]["code"] == 65
        # Not gated: still no pass for a pair that cannot be compared (it carried code 0).
        ungated = _problem(
            client.get(
                f"/api/eval/runs/{other['id']}/compare/{created['id']}", params={"noGate": "true"}
            ),
            409,
            "not-comparable",
        )
        assert ungated["exitDecision"]["code"] == 65, ungated


def test_twenty_concurrent_identical_posts_make_one_run(service_factory: Any) -> None:
    svc: Service = service_factory()
    svc.serve(workers=0)
    barrier = threading.Barrier(20)
    answers: list[httpx.Response] = []
    lock = threading.Lock()

    def post() -> None:
        with svc.client("EVAL") as client:
            barrier.wait()
            response = client.post(
                "/api/eval/runs", json={"dataset": "demo-v1", "idempotencyKey": "build-77"}
            )
        with lock:
            answers.append(response)

    threads = [threading.Thread(target=post) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    codes = sorted(r.status_code for r in answers)
    assert codes == [200] * 19 + [202], [r.text for r in answers if r.status_code >= 300]
    assert len({r.json()["id"] for r in answers}) == 1
    with svc.client("EVAL") as client:
        items = client.get("/api/eval/runs").json()["items"]
        assert [r["idempotencyKey"] for r in items] == ["build-77"]
        # The same key with another request is refused, not silently mapped to the first run.
        clash = client.post(
            "/api/eval/runs",
            json={"dataset": "demo-v1", "attempts": 3, "idempotencyKey": "build-77"},
        )
        _problem(clash, 409, "idempotency-key-reused")


# --------------------------------------------------------------------------- roles


def _matrix_requests(run_id: str) -> list[tuple[str, str, dict[str, Any] | None, str]]:
    """(method, path, json, permission) for every endpoint."""
    return [
        ("POST", "/api/eval/runs", {"dataset": "demo-v1"}, "write"),
        ("GET", "/api/eval/runs", None, "read"),
        ("GET", f"/api/eval/runs/{run_id}", None, "read"),
        ("GET", f"/api/eval/runs/{run_id}/results", None, "read"),
        ("GET", f"/api/eval/runs/{run_id}/compare/{run_id}", None, "read"),
        ("GET", f"/api/eval/runs/{run_id}/artifacts/JSON_SUMMARY", None, "read"),
        ("GET", "/ui/", None, "read"),
        ("POST", f"/api/eval/runs/{run_id}/resume", None, "manage"),
        ("POST", f"/api/eval/runs/{run_id}/cancel", None, "manage"),
        ("DELETE", "/api/eval/runs/nonexistent", None, "manage"),
        ("GET", "/readyz", None, "monitor"),
        ("GET", "/metrics", None, "monitor"),
    ]


ALLOWED = {
    "read": {"EVAL", "ADMIN"},
    "write": {"EVAL", "ADMIN"},
    "manage": {"ADMIN"},
    "monitor": {"MONITOR", "ADMIN"},
}


@SQLITE_ONLY
def test_role_matrix_401_403(service_factory: Any) -> None:
    svc: Service = service_factory()
    svc.serve(workers=0)
    with svc.client("ADMIN") as admin:
        run_id = _create(admin, idempotencyKey="matrix")["id"]
    for method, path, body, permission in _matrix_requests(run_id):
        with svc.client(None) as anonymous:
            response = anonymous.request(method, path, json=body)
            problem = _problem(response, 401, "unauthenticated")
            assert "X-API-Key" in problem["detail"]
            assert "www-authenticate" in response.headers
        with svc.client(None, key="wrong-key-0123456789abcdef") as stranger:
            _problem(stranger.request(method, path, json=body), 401, "unauthenticated")
        for role in KEYS:
            with svc.client(role) as client:
                response = client.request(method, path, json=body)
            if role in ALLOWED[permission]:
                assert response.status_code not in (401, 403), (role, method, path, response.text)
            else:
                problem = _problem(response, 403, "forbidden")
                assert role in problem["detail"], problem
    # Liveness needs no key (and tells nothing); the schema is public too.
    assert httpx.get(f"{svc.server.base_url}/healthz").json() == {"status": "ok"}  # type: ignore[union-attr]
    schema = httpx.get(f"{svc.server.base_url}/openapi.json").json()  # type: ignore[union-attr]
    for path in (
        "/api/eval/runs",
        "/api/eval/runs/{run_id}",
        "/api/eval/runs/{run_id}/results",
        "/api/eval/runs/{run_id}/compare/{baseline_id}",
        "/api/eval/runs/{run_id}/artifacts/{kind}",
        "/api/eval/runs/{run_id}/cancel",
        "/healthz",
        "/readyz",
        "/metrics",
    ):
        assert path in schema["paths"], path
    assert "RunRequest" in schema["components"]["schemas"]
    # Bearer and Basic carry the key too.
    with svc.client(None) as client:
        bearer = client.get("/api/eval/runs", headers={"Authorization": f"Bearer {KEYS['EVAL']}"})
        assert bearer.status_code == 200
        basic = client.get("/api/eval/runs", auth=("anyone", KEYS["EVAL"]))
        assert basic.status_code == 200
    log = svc.server.output()  # type: ignore[union-attr]
    assert all(key not in log for key in KEYS.values())
    assert "wrong-key" not in log
    events = svc.server.events()  # type: ignore[union-attr]
    assert any(e.get("event") == "request" and e.get("role") == "ADMIN" for e in events)


# --------------------------------------------------------------------------- bad input


def _cursor(*parts: str) -> str:
    """A cursor as the server writes them (base64 of a JSON list), of any parts."""
    raw = json.dumps(list(parts)).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@SQLITE_ONLY
def test_bad_input_is_problem_json_and_nothing_is_queued(service_factory: Any) -> None:
    svc: Service = service_factory()
    broken = svc.root / "golden" / "broken"
    broken.mkdir()
    (broken / "dataset.yaml").write_text("version: broken-v1\ngraders:\n  nosuch: hard\n")
    (broken / "rows.jsonl").write_text('{"id": "a", "prompt": "p", "expect": {}}\n')
    svc.serve(workers=0)
    with svc.client("EVAL") as client:
        unknown = _problem(client.post("/api/eval/runs", json={"dataset": "nope-v1"}), 422)
        # The CLI's message (goldeval.dataset.rows.resolve_dataset), with the datasets it knows.
        assert "unknown dataset 'nope-v1'; datasets:" in unknown["detail"]
        assert "demo-v1" in unknown["detail"]
        assert unknown["errors"][0]["field"] == "dataset"

        manifest = _problem(client.post("/api/eval/runs", json={"dataset": "broken"}), 422)
        assert "dataset.yaml" in manifest["detail"] and "graders.nosuch" in manifest["detail"]
        assert "no such grader" in manifest["detail"]

        option = _problem(
            client.post("/api/eval/runs", json={"dataset": "demo-v1", "colour": "red"}), 422
        )
        assert "unknown option 'colour'" in option["detail"]
        attempts = _problem(
            client.post("/api/eval/runs", json={"dataset": "demo-v1", "attempts": 0}), 422
        )
        assert attempts["errors"][0]["field"] == "attempts"
        mode = _problem(
            client.post("/api/eval/runs", json={"dataset": "demo-v1", "mode": "x"}), 422
        )
        assert mode["errors"][0]["field"] == "mode"
        for spec in ("../golden/demo", "/etc", "demo/../../x", ".."):
            traversal = _problem(client.post("/api/eval/runs", json={"dataset": spec}), 422)
            assert "no path separators" in traversal["detail"], traversal
        garbage = client.post(
            "/api/eval/runs", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert "not valid JSON" in _problem(garbage, 422)["detail"]
        baseline = _problem(
            client.post("/api/eval/runs", json={"dataset": "demo-v1", "baselineRunId": "zzz"}), 422
        )
        assert baseline["errors"][0]["field"] == "baselineRunId"
        # A fixture-mode run of a row with no recorded answer was queued (202) and ended with
        # pytest's collection error (exit 2); a live run needs none.
        rows = svc.root / "golden" / "demo" / "demo.jsonl"
        good_rows = rows.read_text(encoding="utf-8")
        new_row = {"id": "unrecorded", "prompt": "p", "expect": {"contains_any": ["x"]}}
        rows.write_text(good_rows + json.dumps(new_row) + "\n", encoding="utf-8")
        unrecorded = _problem(client.post("/api/eval/runs", json={"dataset": "demo-v1"}), 422)
        assert "demo.jsonl:" in unrecorded["detail"], unrecorded
        assert "no recorded answer fixtures/unrecorded.out.md" in unrecorded["detail"]
        rows.write_text(good_rows, encoding="utf-8")
        too_big = client.post(
            "/api/eval/runs",
            content=json.dumps({"dataset": "demo-v1", "pad": "x" * 70_000}).encode(),
            headers={"content-type": "application/json"},
        )
        _problem(too_big, 413, "body-too-large")

        assert client.get("/api/eval/runs").json()["items"] == []  # nothing was queued

        _problem(client.get("/api/eval/runs/does-not-exist"), 404, "run-not-found")
        _problem(client.get("/api/eval/runs/..%2F..%2Fetc"), 404)
        _problem(client.get("/api/eval/runs", params={"status": "DONE"}), 422, "validation")
        _problem(client.get("/api/eval/runs", params={"cursor": "!!"}), 422, "validation")
        _problem(client.get("/no/such/path"), 404, "not-found")
        run_id = _create(client)["id"]
        # Well-formed cursors no store can take (a lone surrogate, an index past 64 bits, a
        # NUL) were 500s: refused like any cursor the server did not give.
        odd = [
            _cursor("\ud800", "1", ""),
            _cursor("case", "1" + "0" * 30, ""),
            _cursor("case", "-99999999999999999999", ""),
            _cursor("ca\x00se", "1", ""),
        ]
        for cursor in odd:
            results = client.get(f"/api/eval/runs/{run_id}/results", params={"cursor": cursor})
            _problem(results, 422, "validation")
            page = client.get(f"/ui/runs/{run_id}.html", params={"after": cursor})
            assert page.status_code in (409, 422), page.text  # 409: nothing graded yet
        listed = client.get("/api/eval/runs", params={"cursor": _cursor("\ud800", "x")})
        _problem(listed, 422, "validation")
        artifacts = f"/api/eval/runs/{run_id}/artifacts"
        _problem(client.get(f"{artifacts}/PASSWD"), 404, "unknown-artifact-type")
        _problem(client.get(f"{artifacts}/JSON_SUMMARY"), 404, "artifact-not-found")
        _problem(client.get(f"/api/eval/runs/{run_id}/compare/{run_id}"), 409, "run-not-started")
    assert "Traceback" not in svc.server.output()  # type: ignore[union-attr]


# --------------------------------------------------------------------------- artifacts


@SQLITE_ONLY
def test_tampered_or_missing_artifact_is_refused_with_a_clear_error(service: Service) -> None:
    with service.client("EVAL") as client:
        run = service.wait_status(_create(client)["id"])
        run_dir = service.root / ".goldeval" / "runs" / run["storeRunId"]
        summary = run_dir / "summary.json"
        original = summary.read_bytes()
        summary.write_bytes(original.replace(b'"casesPassed": 2', b'"casesPassed": 9'))
        tampered = _problem(
            client.get(f"/api/eval/runs/{run['id']}/artifacts/JSON_SUMMARY"),
            409,
            "artifact-checksum-mismatch",
        )
        assert "summary.json" in tampered["detail"]
        assert "changed after the run" in tampered["detail"]
        assert tampered["expectedSha256"] == hashlib.sha256(original).hexdigest()
        assert tampered["actualSha256"] != tampered["expectedSha256"]
        # The other artifacts are untouched and still served.
        assert client.get(f"/api/eval/runs/{run['id']}/artifacts/RUN_JSON").status_code == 200
        (run_dir / "report.md").unlink()
        missing = _problem(
            client.get(f"/api/eval/runs/{run['id']}/artifacts/REPORT_MD"), 409, "artifact-missing"
        )
        assert "not on disk" in missing["detail"]
        (run_dir / "run.json").unlink()
        (run_dir / "run.json").symlink_to(summary)
        _problem(client.get(f"/api/eval/runs/{run['id']}/artifacts/RUN_JSON"), 409)


# --------------------------------------------------------------------------- admin, operations


@SQLITE_ONLY
def test_cancel_resume_delete_and_operations(service_factory: Any) -> None:
    svc: Service = service_factory()
    svc.serve(workers=0)
    with svc.client("EVAL") as client, svc.client("ADMIN") as admin:
        queued = _create(client, idempotencyKey="c1")
        _problem(admin.delete(f"/api/eval/runs/{queued['id']}"), 409, "run-active")
        cancelled = admin.post(f"/api/eval/runs/{queued['id']}/cancel").json()
        assert cancelled["status"] == "INTERRUPTED" and cancelled["cancelRequested"] is True
        assert cancelled["error"] == "cancelled by key#2 before it started"  # the ADMIN key
        resumed = admin.post(f"/api/eval/runs/{queued['id']}/resume").json()
        assert resumed["status"] == "QUEUED"
        _problem(admin.post(f"/api/eval/runs/{queued['id']}/resume"), 409, "not-resumable")
        admin.post(f"/api/eval/runs/{queued['id']}/cancel")
        assert admin.delete(f"/api/eval/runs/{queued['id']}").status_code == 204
        _problem(client.get(f"/api/eval/runs/{queued['id']}"), 404)
        _create(client, idempotencyKey="c2")
    with svc.client("MONITOR") as monitor:
        ready = monitor.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["checks"]["migrations"] == "applied"
        metrics = monitor.get("/metrics")
        assert metrics.headers["content-type"].startswith("text/plain")
        text = metrics.text
        assert 'goldeval_runs{status="QUEUED"} 1.0' in text
        assert 'goldeval_runs{status="INTERRUPTED"} 0.0' in text
        assert "goldeval_attempts_total{" in text
        assert "goldeval_store_up 1.0" in text
        assert "goldeval_http_request_duration_seconds_bucket" in text
        assert 'route="/api/eval/runs"' in text
        # Not ready without its datasets folder (liveness is unaffected).
        (svc.root / "golden").rename(svc.root / "golden-away")
        unready = monitor.get("/readyz")
        assert unready.status_code == 503
        assert unready.json()["status"] == "unavailable"
        assert unready.json()["checks"]["datasets"] == "missing"
        assert httpx.get(f"{svc.server.base_url}/healthz").status_code == 200  # type: ignore[union-attr]


@SQLITE_ONLY
def test_rate_limit_429_with_retry_after_and_max_cases(service_factory: Any) -> None:
    svc: Service = service_factory()
    svc.serve("--rate-limit", "3", "--max-cases", "1", workers=0)
    with svc.client("EVAL") as client:
        too_many = _problem(client.post("/api/eval/runs", json={"dataset": "demo-v1"}), 422)
        assert "demo-v1 has 2 cases, more than this server runs at once (1)" in too_many["detail"]
        codes = [client.get("/api/eval/runs").status_code for _ in range(2)]
        assert codes == [200, 200]
        limited = client.get("/api/eval/runs")
        _problem(limited, 429, "rate-limited")
        assert int(limited.headers["retry-after"]) >= 1
    with svc.client("ADMIN") as other:  # per key
        assert other.get("/api/eval/runs").status_code == 200


@SQLITE_ONLY
def test_serve_refuses_to_start_without_usable_keys(service_factory: Any, tmp_path: Path) -> None:
    svc: Service = service_factory()
    for value, expected in (
        ("", "GOLDEVAL_API_KEYS is empty"),
        ("short:EVAL", "shorter than 16"),
        ("a-long-enough-secret-key:ROOT", "unknown role"),
    ):
        env = dict(svc.env, GOLDEVAL_API_KEYS=value)
        done = subprocess.run(
            [
                *(sys.executable, "-m", "goldeval.cli.main", "serve"),
                *("--port", "1", "--root", str(svc.root)),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 4, done.stderr
        assert expected in done.stderr
        assert "Traceback" not in done.stderr
        assert (
            "a-long-enough-secret-key" not in done.stderr
            and "short" not in done.stderr.split("shorter")[0]
        )
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "goldeval.cli.main",
            "serve",
            "--root",
            str(svc.root),
            "--datasets",
            str(tmp_path / "nowhere"),
        ],
        env=svc.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 4
    assert "datasets folder" in missing.stderr and "does not exist" in missing.stderr


@SQLITE_ONLY
def test_seed_request_shapes(service: Service) -> None:
    """The seed's curl body (dataset {name, version}, model {provider, name}, scoringProfile)."""
    with service.client("EVAL") as client:
        ok = client.post(
            "/api/eval/runs",
            json={
                "dataset": {"name": "demo", "version": "demo-v1"},
                "scoringProfile": "default",
                "idempotencyKey": "local-0001",
            },
        )
        assert ok.status_code == 202, ok.text
        assert ok.json()["datasetId"] == "demo-v1"
        wrong = _problem(
            client.post("/api/eval/runs", json={"dataset": {"name": "demo", "version": "v9"}}), 422
        )
        assert "is version 'demo-v1', not 'v9'" in wrong["detail"]
        fixture_model = _problem(
            client.post(
                "/api/eval/runs",
                json={"dataset": "demo-v1", "model": {"provider": "mock", "name": "mock-1"}},
            ),
            422,
        )
        assert "fixture mode" in fixture_model["detail"]
        service.wait_status(ok.json()["id"])


def _drop(url: str, schema: str) -> None:
    with _raw_connect(url) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@SQLITE_ONLY
def test_a_failed_gate_is_never_reported_as_passed(service: Service) -> None:
    """No false green: the run completes (everything graded) but the gate fails, so the API
    says passed=false with the plugin's exit code and decision, as pytest would exit."""
    fixture = service.root / "golden" / "demo" / "fixtures" / "greeting.out.md"
    fixture.write_text("Good morning.\n", encoding="utf-8")  # no "hello"/"welcome": FAIL
    with service.client("EVAL") as client:
        run = service.wait_status(_create(client)["id"])
        assert run["status"] == "COMPLETED", run
        assert run["exitCode"] == 1 and run["passed"] is False
        assert run["exitDecision"]["code"] == 1
        assert run["qualityGate"]["verdict"] == "FAIL"
        assert run["attempts"] == {"FAIL": 1, "PASS": 1}
        failed = client.get(f"/api/eval/runs/{run['id']}/results", params={"status": "FAIL"})
        assert [r["caseId"] for r in failed.json()["items"]] == ["greeting"]
        assert "GATE FAIL" in (run["error"] or "")


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_the_store_password_never_leaves_the_server(
    service_factory: Any, postgres_server: Any, request: pytest.FixtureRequest
) -> None:
    if postgres_server.password_url is None:
        pytest.skip("an external PostgreSQL URL: no password role to test with")
    schema = f"pw_{uuid.uuid4().hex[:12]}"
    with _raw_connect(postgres_server.url) as conn:
        conn.execute(f"CREATE SCHEMA {schema} AUTHORIZATION goldeval_pw")
    request.addfinalizer(lambda: _drop(postgres_server.url, schema))
    svc: Service = service_factory()
    svc.store_url = _with_search_path(postgres_server.password_url, schema)
    svc.serve()
    with svc.client("EVAL") as client:
        run = svc.wait_status(_create(client)["id"])
        assert run["status"] == "COMPLETED", run
        texts = [
            json.dumps(run),
            client.get("/api/eval/runs").text,
            client.get(f"/api/eval/runs/{run['id']}/artifacts/RUN_JSON").text,
        ]
    with svc.client("MONITOR") as monitor:
        texts += [monitor.get("/readyz").text, monitor.get("/metrics").text]
    texts.append(svc.server.output())  # type: ignore[union-attr]
    for path in (svc.root / ".goldeval").rglob("*"):
        if path.suffix == ".zip":  # the log bundle: what it holds
            with zipfile.ZipFile(path) as bundle:
                texts += [bundle.read(name).decode() for name in bundle.namelist()]
        elif path.is_file():
            texts.append(path.read_text())
    password = postgres_server.password
    assert password and all(password not in text for text in texts)
    assert "postgresql://goldeval_pw:***@" in svc.server.output()  # type: ignore[union-attr]
