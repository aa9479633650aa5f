"""Honest stops (issue 33): a service run's API answer says why it ended, from the one verdict.

* A run whose finalisation failed (the store refused the final COMPLETED status, as a store
  that went down at the end would) is FAILED with a non-null ``error`` naming the plugin's
  recorded finalisation fault, not a bare exit code.
* After a refused resume (the dataset changed, so the run key's protocol differs: exit 65),
  ``exitCode`` and ``exitDecision.code`` agree, both from the resumed process's decision, which
  the worker records on the queue row (schema 11); rows ended before are rebuilt the old way.
* No absolute server path shows in a run's JSON answers (the run with its artifacts list,
  the run list, its results).
* A store down at the end (its run left RUNNING) with the log's tail drowned by teardown
  output: the error is the fault the plugin recorded in the run folder's run.json.

Real parts: a ``goldeval serve`` process, its worker's pytest subprocess, a real SQLite store
with a real trigger planted in it (the fault injection of tests/reliability/test_finalisation).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import Service

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

#: Makes the plugin's final store write fail, as a store that went down at the end would.
_NO_COMPLETED = (
    "CREATE TRIGGER planted BEFORE UPDATE ON runs WHEN NEW.status = 'COMPLETED' BEGIN "
    "SELECT RAISE(ABORT, 'planted: the store refuses COMPLETED'); END"
)


def _sql(svc: Service, statement: str) -> None:
    conn = sqlite3.connect(svc.store_url)
    try:
        conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


def _absolute_paths(value: Any, roots: list[str]) -> list[str]:
    """Every string of a JSON answer that names one of the server's folders."""
    text = json.dumps(value)
    return [root for root in roots if root in text]


@SQLITE_ONLY
def test_failed_finalisation_says_why_and_a_refused_resume_keeps_code_and_decision_together(
    service_factory: Any,
) -> None:
    svc: Service = service_factory()
    svc.serve(lease=5)
    _sql(svc, _NO_COMPLETED)
    with svc.client("EVAL") as client:
        run_id = client.post("/api/eval/runs", json={"dataset": "demo-v1"}).json()["id"]
    failed = svc.wait_status(run_id)
    assert failed["status"] == "FAILED", failed
    assert failed["exitCode"] == 75 and failed["passed"] is False, failed
    # Why: the plugin's recorded finalisation fault, not "pytest exited 75" nor null.
    assert failed["error"] and "planted: the store refuses COMPLETED" in failed["error"], failed
    assert failed["exitDecision"]["code"] == failed["exitCode"], failed

    # The dataset changes, so a resume under the same run key is refused (protocol: 65).
    _sql(svc, "DROP TRIGGER planted")
    rows = svc.root / "golden" / "demo" / "demo.jsonl"
    rows.write_text(
        rows.read_text(encoding="utf-8").replace("Say hello", "Say hi"), encoding="utf-8"
    )
    with svc.client("ADMIN") as admin:
        assert admin.post(f"/api/eval/runs/{run_id}/resume").json()["status"] == "QUEUED"
    refused = svc.wait_status(run_id)
    assert refused["exitCode"] == 65, refused
    assert refused["exitDecision"]["code"] == refused["exitCode"], refused
    assert refused["passed"] is False and refused["error"], refused
    assert "protocol" in refused["error"] or "dataset" in refused["error"], refused

    # The decision is the one the worker recorded on the queue row when the run ended
    # (schema 11), read as it is, not rebuilt from the exit code and the log.
    conn = sqlite3.connect(svc.store_url)
    try:
        (stored,) = conn.execute(
            "SELECT exit_decision FROM service_runs WHERE id = ?", (run_id,)
        ).fetchone()
    finally:
        conn.close()
    assert json.loads(stored) == refused["exitDecision"], stored
    planted = json.dumps({"code": 65, "reason": "as recorded on the row"})
    _sql(svc, f"UPDATE service_runs SET exit_decision = '{planted}' WHERE id = '{run_id}'")
    with svc.client("EVAL") as client:
        shown = client.get(f"/api/eval/runs/{run_id}").json()
    assert shown["exitDecision"] == {"code": 65, "reason": "as recorded on the row"}, shown
    # A row ended before schema 11 has none: the API rebuilds it as before, code = exitCode.
    _sql(svc, f"UPDATE service_runs SET exit_decision = NULL WHERE id = '{run_id}'")
    with svc.client("EVAL") as client:
        rebuilt = client.get(f"/api/eval/runs/{run_id}").json()
    assert rebuilt["exitDecision"] == refused["exitDecision"], rebuilt


@SQLITE_ONLY
def test_run_answers_name_no_absolute_server_path(service_factory: Any) -> None:
    svc: Service = service_factory()
    svc.serve(lease=5)
    roots = [str(svc.root), str(Path(svc.store_url).parent)]
    with svc.client("EVAL") as client:
        run_id = client.post("/api/eval/runs", json={"dataset": "demo-v1"}).json()["id"]
        run = svc.wait_status(run_id)
        assert run["status"] == "COMPLETED", run
        assert run["artifacts"], run
        answers = {
            "run": run,
            "list": client.get("/api/eval/runs").json(),
            "results": client.get(f"/api/eval/runs/{run_id}/results").json(),
            # Served as written (their SHA-256 is checked), so the plugin must not put a
            # server path in them: run.json records projectRoot, goldenRoot, outputDir and
            # baselinePath relative to the project root.
            "summary.json": client.get(f"/api/eval/runs/{run_id}/artifacts/JSON_SUMMARY").json(),
            "run.json": client.get(f"/api/eval/runs/{run_id}/artifacts/RUN_JSON").json(),
            "manifest.json": client.get(f"/api/eval/runs/{run_id}/artifacts/MANIFEST").json(),
        }
    assert answers["run.json"]["projectRoot"] == "."
    assert answers["run.json"]["goldenRoot"] == "golden"
    for name, answer in answers.items():
        assert _absolute_paths(answer, roots) == [], (name, answer)


#: A project provider whose errors name files of the server, one in quotes (as Python's
#: tracebacks do: a rewrite of the JSON text would have swallowed the escaped quote).
PATH_IN_ERROR = """
from pathlib import Path
import pytest
from goldeval import ProviderError

@pytest.fixture(scope="session")
def golden_provider():
    def fail(case):
        raise ProviderError(
            "MODEL_UNAVAILABLE",
            f'cannot read "{Path(__file__).parent}/secret/model.yaml" nor /tmp/elsewhere/x.py',
        )
    return fail
"""


@SQLITE_ONLY
def test_results_show_no_server_path_a_provider_error_named(service_factory: Any) -> None:
    """The results API spliced the stored record in as it was: a provider's error message
    showed the project's absolute path (issue 33: "no absolute paths in API answers")."""
    svc: Service = service_factory()
    (svc.root / "conftest.py").write_text(PATH_IN_ERROR, encoding="utf-8")
    svc.serve(lease=5)
    with svc.client("EVAL") as client:
        run_id = client.post("/api/eval/runs", json={"dataset": "demo-v1"}).json()["id"]
        run = svc.wait_status(run_id)
        assert run["exitCode"] == 75, run
        response = client.get(f"/api/eval/runs/{run_id}/results")
    page = response.json()  # still JSON
    messages = [item["record"].get("errorMessage", "") for item in page["items"]]
    assert messages and all('cannot read "<server path>' not in m for m in messages), messages
    assert all('cannot read "secret/model.yaml"' in m for m in messages), messages
    assert all("nor <server path>" in m for m in messages), messages
    assert str(svc.root) not in response.text and "/tmp/elsewhere" not in response.text


@pytest.fixture
def full_runs_disk(tmp_path: Path) -> Iterator[Path]:
    """The service's runs folder on a real 2 MB tmpfs, filled up (not even the run's folder
    can be made; we run as root in CI); skipped where mounting is not allowed."""
    runs = tmp_path / "project" / ".goldeval" / "runs"
    runs.mkdir(parents=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(runs)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace')}")
    try:
        st = os.statvfs(runs)
        with open(runs / "filler", "wb") as handle:
            handle.write(b"\0" * (st.f_bavail * st.f_frsize))
        yield runs
    finally:
        subprocess.run(["umount", "-l", str(runs)], check=False)


@SQLITE_ONLY
def test_disk_full_finalisation_is_failed_with_the_reason_in_error(
    service_factory: Any, full_runs_disk: Path
) -> None:
    svc: Service = service_factory()
    svc.serve(lease=5)
    with svc.client("EVAL") as client:
        run_id = client.post("/api/eval/runs", json={"dataset": "demo-v1"}).json()["id"]
    run = svc.wait_status(run_id)
    assert run["status"] == "FAILED", run
    assert run["exitCode"] == 75 and run["exitDecision"]["code"] == 75, run
    assert run["error"] and "No space left on device" in run["error"], run
    assert _absolute_paths(run, [str(svc.root)]) == [], run


#: The store refuses every final status: the plugin cannot even mark its run FAILED there.
_NO_END = (
    "CREATE TRIGGER planted BEFORE UPDATE ON runs WHEN NEW.status <> 'RUNNING' BEGIN "
    "SELECT RAISE(ABORT, 'planted: the store is down'); END"
)
#: A project conftest.py that prints a lot after the plugin's last line (a teardown that
#: logs), so the reason is no longer in the tail of the run's log.
_NOISY_CONFTEST = (
    "import sys\n\n\n"
    "def pytest_unconfigure(config):\n"
    "    sys.stdout.write('teardown chatter\\n' * 400)\n"
)


@SQLITE_ONLY
def test_store_down_at_the_end_error_comes_from_the_recorded_fault(service_factory: Any) -> None:
    """The store run stays RUNNING and the log's tail has no decision line: the error is the
    finalisation fault the plugin recorded in the run folder's run.json."""
    svc: Service = service_factory()
    (svc.root / "conftest.py").write_text(_NOISY_CONFTEST, encoding="utf-8")
    svc.serve(lease=5)
    _sql(svc, _NO_END)
    with svc.client("EVAL") as client:
        run_id = client.post("/api/eval/runs", json={"dataset": "demo-v1"}).json()["id"]
    run = svc.wait_status(run_id)
    assert run["status"] == "FAILED", run
    assert run["exitCode"] == 75 and run["exitDecision"]["code"] == 75, run
    assert run["error"] and "planted: the store is down" in run["error"], run
    assert _absolute_paths(run, [str(svc.root)]) == [], run
