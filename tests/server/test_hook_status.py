"""A project hook that turns a failed run's exit status into 0 does not make the service
answer ``passed: true`` (a probe found ``exitCode 0, passed: true`` for a run whose gate had
failed every attempt).

The operator's conftest.py applies to every run the service starts. Its ``trylast``
``pytest_sessionfinish`` sets the status to 0 (the plugin's exit guard puts the decision
back) or ends the process with ``os._exit(0)`` after the plugin recorded the run (the worker
takes the run's recorded decision over pytest's 0 and says so in ``error``). SQLite and
PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.conftest import Service

CONFTEST = """
import os
import pytest

@pytest.fixture(scope="session")
def golden_provider():
    return lambda case: "nothing like the recorded answer"

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    {hook}
"""


@pytest.mark.parametrize(
    "hook,extra",
    [
        ("session.exitstatus = 0", ""),
        ("os._exit(0)", "pytest itself exited 0: a hook or plugin changed it"),
    ],
    ids=["status-set-to-0", "os-exit-0"],
)
def test_a_hook_exiting_0_does_not_make_a_failed_run_pass(
    service_factory: Any, hook: str, extra: str
) -> None:
    svc: Service = service_factory(rows=4)
    (svc.root / "conftest.py").write_text(CONFTEST.format(hook=hook), encoding="utf-8")
    svc.serve(workers=1)
    with svc.client("EVAL") as client:
        for body in ({"dataset": "demo-v1"}, {"dataset": "demo-v1", "noGate": True}):
            response = client.post("/api/eval/runs", json=body)
            assert response.status_code == 202, response.text
            run = svc.wait_status(response.json()["id"])
            assert run["status"] == "COMPLETED", run
            assert run["exitCode"] == 1 and run["passed"] is False, run
            assert run["exitDecision"]["code"] == 1, run
            assert run["error"], run
            assert extra in run["error"], run


@pytest.mark.parametrize("hook", ["pytest_configure", "pytest_collection_finish"])
def test_a_process_that_exits_0_before_the_run_ends_is_not_a_pass(
    service_factory: Any, hook: str
) -> None:
    """A conftest ending the process with ``os._exit(0)`` before the plugin recorded the
    run's end: the run was FAILED with ``exitCode 0, passed: true`` and a log line as its
    error. Nothing was graded, so the verdict says so (exit 1)."""
    svc: Service = service_factory(rows=2)
    conftest = f"import os\n\ndef {hook}(*args):\n    os._exit(0)\n"
    (svc.root / "conftest.py").write_text(conftest, encoding="utf-8")
    svc.serve(workers=1)
    with svc.client("EVAL") as client:
        response = client.post("/api/eval/runs", json={"dataset": "demo-v1"})
        assert response.status_code == 202, response.text
        run = svc.wait_status(response.json()["id"])
    assert run["status"] == "FAILED", run
    assert run["exitCode"] == 1 and run["passed"] is False, run
    assert run["exitDecision"]["code"] == 1, run
    assert "pytest exited 0 without the plugin recording the run's end" in run["error"], run
    assert "nothing was graded" in run["exitDecision"]["reason"], run
