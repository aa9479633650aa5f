"""A run cut short by its deadline is INCOMPLETE in the API, as its summary.json says (issue 31:
INCOMPLETE/INTERRUPTED named the same in the terminal, the CLI, the store and the API).

The service's run (the operator's ``--golden-deadline`` in ``PYTEST_ADDOPTS``) grades what it
can before the deadline against a slow fake model; the attempts never started leave the run
INCOMPLETE. The plugin ends on its own, so the status is the one the plugin recorded.

The run budget of a request (``deadlineSeconds``) is another thing: a stop like a cancel,
INTERRUPTED with 75 and resumable (issue 33), never INCOMPLETE's 1, the exit status of a quality
failure, for a run that only ran out of time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from goldeval.testing.llm_server import FakeLLMServer, fixture_responder
from tests.server.conftest import Service

LIVE = {"dataset": "demo-v1", "mode": "live", "model": "fake-llm:latest", "noGate": True}


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


def test_a_deadline_cut_run_is_listed_with_the_status_of_its_summary_json(
    service_factory: Any, llm: FakeLLMServer
) -> None:
    # One call at a time, each slower than a third of the deadline: some attempts never start.
    svc: Service = service_factory(
        rows=6,
        env={
            "OLLAMA_HOST": llm.base_url,
            "PYTEST_ADDOPTS": "--golden-concurrency=1 --golden-deadline=1.5",
        },
    )
    llm.responder = fixture_responder(svc.root / "golden" / "demo")
    llm.latency = 0.6
    svc.serve(workers=1)
    with svc.client("EVAL") as client:
        run_id = client.post("/api/eval/runs", json=LIVE).json()["id"]
    run = svc.wait_status(run_id, timeout=120)

    with svc.client("EVAL") as client:
        summary = client.get(f"/api/eval/runs/{run_id}/artifacts/JSON_SUMMARY").json()
        listed = client.get("/api/eval/runs", params={"status": "INCOMPLETE"}).json()["items"]
    assert summary["status"] == "INCOMPLETE", summary
    assert run["status"] == summary["status"], run
    assert [r["id"] for r in listed] == [run_id]
    assert run["passed"] is False and run["exitCode"] != 0

    # INCOMPLETE is resumable: the run goes back in the queue under its run key.
    with svc.client("ADMIN") as admin:
        resumed = admin.post(f"/api/eval/runs/{run_id}/resume")
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["status"] in ("QUEUED", "RUNNING")
    svc.wait_status(run_id, timeout=120)


def test_the_run_budget_stops_the_run_interrupted_75_and_says_so(
    service_factory: Any, llm: FakeLLMServer
) -> None:
    svc: Service = service_factory(
        rows=6, env={"OLLAMA_HOST": llm.base_url, "PYTEST_ADDOPTS": "--golden-concurrency=1"}
    )
    llm.responder = fixture_responder(svc.root / "golden" / "demo")
    llm.latency = 0.6
    svc.serve(workers=1)
    with svc.client("EVAL") as client:
        run_id = client.post("/api/eval/runs", json={**LIVE, "deadlineSeconds": 2}).json()["id"]
    run = svc.wait_status(run_id, timeout=120)
    assert run["status"] == "INTERRUPTED", run
    assert run["exitCode"] == 75 and run["exitDecision"]["code"] == 75, run
    assert run["passed"] is False
    assert "run budget (deadlineSeconds 2s)" in run["error"], run
    assert "terminated by SIGTERM" in run["exitDecision"]["reason"], run
    log = (svc.root / ".goldeval" / "service" / f"{run_id}.log").read_text(errors="replace")
    assert "INTERNALERROR" not in log and "did not take effect" not in log, log[-3000:]
    # stopped before the end (on a loaded machine, possibly before any attempt was graded)
    assert sum((run["attempts"] or {}).values()) < 6, run

    with svc.client("ADMIN") as admin:
        resumed = admin.post(f"/api/eval/runs/{run_id}/resume")
    assert resumed.status_code == 200, resumed.text
