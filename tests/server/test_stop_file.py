"""A stop ends on the plugin's INTERRUPTED path (exit 75) whatever the project does with
SIGTERM (issue 33: "whatever plugins are installed").

A probe found: a fixture ignoring SIGTERM made a cancel do nothing (the run completed and
read as passed); a handler calling ``sys.exit(0)`` turned the rest of the run into ERROR
attempts (COMPLETED, 75, an ``error`` about infrastructure, never "cancelled"); a handler
raising ``KeyboardInterrupt`` ended pytest with exit 2. The worker now asks through a stop
file first (``server/stopper.py``), which the plugin checks between items
(``pytest_plugin/stopping.py``); SIGTERM follows only if the plugin does not answer.

Real ``goldeval serve`` processes on SQLite and PostgreSQL; each attempt takes 0.3 s, so the
stop lands in the middle of the run.
"""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest

from tests.server.conftest import Service

CONFTEST = """
import os, signal, sys, time
import pytest

@pytest.fixture(scope="session")
def golden_provider():
    how = os.environ["HANDLER"]
    if how == "ignore":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    elif how == "exit-0":
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    elif how == "keyboard-interrupt":
        def interrupt(signum, frame):
            raise KeyboardInterrupt()
        signal.signal(signal.SIGTERM, interrupt)

    def slow(case):
        time.sleep(0.3)
        return "Welcome, friend! hello ORD-123456"

    return slow
"""


def _running_with_attempts(svc: Service, client: Any, run_id: str) -> None:
    svc.wait_status(run_id, ("RUNNING",), timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        attempts = client.get(f"/api/eval/runs/{run_id}").json().get("attempts") or {}
        if sum(attempts.values()) >= 2:
            return
        time.sleep(0.2)
    raise AssertionError("the run recorded no attempt within 60 s")


@pytest.mark.parametrize(
    "handler,stop",
    [
        ("ignore", "cancel"),
        ("exit-0", "cancel"),
        ("keyboard-interrupt", "cancel"),
        ("ignore", "budget"),
        ("keyboard-interrupt", "budget"),
        ("exit-0", "serve-sigterm"),
    ],
)
def test_a_stop_ends_interrupted_whatever_the_project_does_with_sigterm(
    service_factory: Any, handler: str, stop: str
) -> None:
    svc: Service = service_factory(rows=40, env={"HANDLER": handler})
    (svc.root / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    server = svc.serve(workers=1)
    request: dict[str, Any] = {"dataset": "demo-v1", "noGate": True}
    if stop == "budget":
        request["deadlineSeconds"] = 3
    with svc.client("EVAL") as client, svc.client("ADMIN") as admin:
        response = client.post("/api/eval/runs", json=request)
        assert response.status_code == 202, response.text
        run_id = response.json()["id"]
        if stop != "budget":
            _running_with_attempts(svc, client, run_id)
        if stop == "cancel":
            assert admin.post(f"/api/eval/runs/{run_id}/cancel").status_code in (200, 202)
        elif stop == "serve-sigterm":
            server.signal(signal.SIGTERM)
            assert server.proc is not None
            server.proc.wait(timeout=120)
            svc.serve(workers=0)  # the API again, to read the run
    with svc.client("EVAL") as client:
        run = svc.wait_status(run_id, timeout=120)
    assert run["status"] == "INTERRUPTED", run
    assert run["exitCode"] == 75 and run["passed"] is False, run
    assert run["exitDecision"]["code"] == 75, run
    assert "terminated by SIGTERM" in run["exitDecision"]["reason"], run
    why = {"cancel": "cancelled", "budget": "run budget", "serve-sigterm": "worker stopped"}[stop]
    assert why in (run["error"] or ""), run
    attempts = run["attempts"] or {}
    assert 0 < sum(attempts.values()) < 40, run  # stopped in the middle
    assert "ERROR" not in attempts, run  # the handler's exit never ran inside an item
    assert list((svc.root / ".goldeval" / "service").glob("*.stop*")) == []  # cleaned up


def test_a_cancel_during_collection_names_the_apis_resume(service_factory: Any) -> None:
    """Stopped before any attempt, the plugin records no run: the worker decides from the
    stop, and its reason said "to resume it: retry it" instead of the API's resume."""
    svc: Service = service_factory(rows=4)
    (svc.root / "conftest.py").write_text(
        "import time\n\ndef pytest_collection_modifyitems(items):\n    time.sleep(6)\n",
        encoding="utf-8",
    )
    svc.serve(workers=1)
    with svc.client("EVAL") as client, svc.client("ADMIN") as admin:
        run_id = client.post("/api/eval/runs", json={"dataset": "demo-v1"}).json()["id"]
        svc.wait_status(run_id, ("RUNNING",), timeout=60)
        time.sleep(1.0)  # pytest is collecting (the conftest's hook sleeps)
        assert admin.post(f"/api/eval/runs/{run_id}/cancel").status_code in (200, 202)
        run = svc.wait_status(run_id, timeout=120)
    assert run["status"] == "INTERRUPTED" and run["exitCode"] == 75, run
    assert f"POST /api/eval/runs/{run_id}/resume" in run["exitDecision"]["reason"], run
    assert "cancelled" in (run["error"] or ""), run
