"""One run status everywhere (issue 31): a run whose every attempt is an ERROR (the provider is
down) ran everything it selected, so run.json, summary.json, the store's run and the API all
say COMPLETED; that it must be retried is its verdict (exit 75), and the service resumes it
because of that verdict, not because of a status word (the store used to say FAILED for it so
that resume would take it). Real parts: ``goldeval serve`` with its worker, the fake LLM
server on 127.0.0.1 answering 503, the store on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from goldeval.store import open_store
from goldeval.testing.llm_server import FakeLLMServer, Fault, fixture_responder
from tests.server.conftest import Service

LIVE = {"dataset": "demo-v1", "mode": "live", "model": "fake-llm:latest", "noGate": True}


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


def _statuses(svc: Service, store_url: str, run: dict[str, Any]) -> dict[str, str]:
    folder = svc.root / ".goldeval" / "runs" / run["storeRunId"]
    with open_store(store_url) as store:
        row = store.get_run(run["storeRunId"])
    assert row is not None
    return {
        "run.json": json.loads((folder / "run.json").read_text(encoding="utf-8"))["status"],
        "summary.json": json.loads((folder / "summary.json").read_text(encoding="utf-8"))["status"],
        "store": row.status,
        "API": run["status"],
    }


def test_an_all_error_run_is_completed_everywhere_and_resumes_by_its_verdict(
    service_factory: Any, store_url: str, llm: FakeLLMServer
) -> None:
    svc: Service = service_factory(env={"OLLAMA_HOST": llm.base_url})
    llm.responder = fixture_responder(svc.root / "golden" / "demo")
    svc.serve(workers=1)
    llm.set_fault(Fault.status(503))
    with svc.client("EVAL") as client, svc.client("ADMIN") as admin:
        run_id = client.post("/api/eval/runs", json=LIVE).json()["id"]
        down = svc.wait_status(run_id)
        assert down["attempts"].get("ERROR") == 2 == sum(down["attempts"].values()), down
        assert down["exitCode"] == 75 and down["passed"] is False, down
        assert down["exitDecision"]["code"] == 75, down
        assert _statuses(svc, store_url, down) == dict.fromkeys(
            ("run.json", "summary.json", "store", "API"), "COMPLETED"
        )
        # Resumable because its verdict says retry (75), though COMPLETED.
        llm.set_fault(None)
        resumed = admin.post(f"/api/eval/runs/{run_id}/resume")
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["status"] == "QUEUED"
        healthy = svc.wait_status(run_id)
        # The resume retried the ERROR attempts: everything graded now, exit 0.
        assert healthy["exitCode"] == 0 and healthy["passed"] is True, healthy
        assert healthy["attempts"].get("ERROR", 0) == 0, healthy
        assert set(_statuses(svc, store_url, healthy).values()) == {"COMPLETED"}
        # A COMPLETED run decided 0 is not resumable: a rerun would end the same way.
        refused = admin.post(f"/api/eval/runs/{run_id}/resume")
        assert refused.status_code == 409, refused.text
        assert refused.json()["type"] == "/problems/not-resumable"
        assert "ended 75" in refused.json()["detail"]
