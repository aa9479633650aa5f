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
