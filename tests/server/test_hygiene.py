"""What the service keeps to itself (issue 33): its API keys never reach a run's pytest
process, answers and pages name no absolute server path, slow clients cannot hold a
connection open by dribbling headers, idempotency keys belong to the API key that made them,
and a run that did not pass says why."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.server.conftest import KEYS, Service

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

#: A project conftest.py: every pytest process of a run records its environment.
ENV_PROBE = """
import json, os
from pathlib import Path

def pytest_configure(config):
    out = Path(__file__).parent / "child-env"
    out.mkdir(exist_ok=True)
    (out / f"{os.getpid()}.json").write_text(json.dumps(dict(os.environ)))
"""


def _create(svc: Service, role: str = "EVAL", **body: Any) -> dict[str, Any]:
    with svc.client(role) as client:
        response = client.post("/api/eval/runs", json={"dataset": "demo-v1", **body})
    assert response.status_code in (200, 202), response.text
    return dict(response.json())


# --------------------------------------------------------------------------- the child's env


@SQLITE_ONLY
@pytest.mark.parametrize("where", ["serve", "worker"])
def test_a_runs_pytest_process_inherits_no_api_key(service_factory: Any, where: str) -> None:
    svc: Service = service_factory()
    (svc.root / "conftest.py").write_text(ENV_PROBE, encoding="utf-8")
    if where == "serve":
        svc.serve()  # its in-process worker starts the run
    else:
        svc.serve(workers=0)
        svc.worker()  # a `goldeval worker` process, GOLDEVAL_API_KEYS in its environment too
    assert "GOLDEVAL_API_KEYS" in svc.env
    run = svc.wait_status(_create(svc)["id"])
    assert run["status"] == "COMPLETED", run
    probes = list((svc.root / "child-env").glob("*.json"))
    assert probes, "the run's pytest process did not load the project conftest.py"
    for probe in probes:
        env = json.loads(probe.read_text(encoding="utf-8"))
        assert "GOLDEVAL_STORE" in env  # the run's own process, with what it needs
        assert "GOLDEVAL_API_KEYS" not in env
        leaked = [name for name, value in env.items() for key in KEYS.values() if key in value]
        assert leaked == []


# --------------------------------------------------------------------------- no server paths


@SQLITE_ONLY
def test_answers_and_pages_name_no_absolute_server_path(service_factory: Any) -> None:
    svc: Service = service_factory()
    rows = svc.root / "golden" / "demo" / "demo.jsonl"
    good_rows = rows.read_text(encoding="utf-8")
    broken = svc.root / "golden" / "broken"
    broken.mkdir()
    (broken / "dataset.yaml").write_text("version: [\n", encoding="utf-8")
    svc.serve(workers=0)
    texts: dict[str, str] = {}
    with svc.client("EVAL") as client:
        unknown = client.post("/api/eval/runs", json={"dataset": "nope"})
        assert unknown.status_code == 422
        assert "golden/broken/dataset.yaml" in unknown.json()["detail"]  # names it, relatively
        texts["unknown dataset"] = unknown.text
        rows.write_text(good_rows + "{not json\n", encoding="utf-8")
        invalid = client.post("/api/eval/runs", json={"dataset": "demo-v1"})
        assert invalid.status_code == 422
        assert "golden/demo/demo.jsonl:3" in invalid.json()["detail"]
        texts["invalid row"] = invalid.text
        rows.write_text(good_rows, encoding="utf-8")
        queued = _create(svc)
        rows.write_text(good_rows + "{not json\n", encoding="utf-8")  # broken once queued
        svc.worker()
        failed = svc.wait_status(queued["id"])
        assert failed["status"] == "FAILED" and "golden/demo/demo.jsonl:3" in failed["error"]
        rows.write_text(good_rows, encoding="utf-8")
        done = svc.wait_status(_create(svc, idempotencyKey="second")["id"])
        assert done["status"] == "COMPLETED", done
        for path in (
            f"/api/eval/runs/{queued['id']}",
            f"/api/eval/runs/{done['id']}",
            "/api/eval/runs",
            "/ui/",
            f"/ui/runs/{done['id']}.html",
            f"/ui/runs/{done['id']}.html?compare={queued['id']}",  # 409: nothing graded
        ):
            texts[path] = client.get(path).text
    with svc.client("MONITOR") as monitor:
        texts["/readyz"] = monitor.get("/readyz").text
    leaks = [where for where, text in texts.items() if str(svc.root) in text]
    assert leaks == []
    assert (
        str(svc.root)
        in (svc.root / ".goldeval" / "runs" / done["storeRunId"] / "run.json").read_text()
    )
