"""One verdict, every surface (issue 31's table), the service's part: for pass, regression, a
run cut short (cancelled: SIGTERM; killed: SIGKILL), a provider that is down, an auth error,
a run budget (deadline) and a run whose finalisation failed, the API's run
endpoint, its compare endpoint, the run page and ``goldeval compare`` on the saved runs give
the same exit code and decision label. tests/reliability/test_verdict_table.py has the whole
table through pytest, run.json, ``goldeval gate`` and ``goldeval compare``.

One service, one project and one model server for every row (cheap): a live run answered
from the recorded fixtures is the baseline every row is compared with.
"""

from __future__ import annotations

import html
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from goldeval.testing.llm_server import FakeLLMServer, Fault
from goldeval.testing.llm_server.fixtures import fixture_responder
from tests.server.conftest import Service

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
LIVE = {"dataset": "demo-v1", "mode": "live", "model": "fake-llm:latest"}


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


def _until(condition: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
    return value


def _pytest_pids(run_key: str) -> list[int]:
    """The pytest process of a service run (its command line names the run key)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"--golden-run-key={run_key}".encode() in argv and b"pytest" in argv:
            pids.append(int(entry.name))
    return pids


def _cli_compare(svc: Service, good: dict[str, Any], bad: dict[str, Any]) -> tuple[int, str]:
    """``goldeval compare`` on the two runs' run.json, or their store records when the run
    left no run.json (a killed process)."""
    runs = svc.root / ".goldeval" / "runs"
    env = {k: v for k, v in svc.env.items() if k != "GOLDEVAL_API_KEYS"}
    pair = [str(runs / r["storeRunId"] / "run.json") for r in (good, bad)]
    if not Path(pair[1]).is_file():
        pair = [good["storeRunId"], bad["storeRunId"], "--store", svc.store_url]
    done = subprocess.run(
        [sys.executable, "-m", "goldeval.cli.main", "compare", *pair, "--json"],
        cwd=svc.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        return done.returncode, str(json.loads(done.stdout)["exitDecision"]["reason"])
    except (ValueError, KeyError):
        return done.returncode, done.stdout + done.stderr


def _graded(client: httpx.Client, run_id: str) -> int:
    return len(client.get(f"/api/eval/runs/{run_id}/results").json().get("items") or [])


def _page_decision(text: str) -> tuple[int, str] | None:
    """The exit status a run page states (``Exit status <strong>N</strong>: reason``)."""
    shown = html.unescape(text)
    marker = "Exit status <strong>"
    if marker not in shown:
        return None
    rest = shown.split(marker, 1)[1]
    code, reason = rest.split("</strong>", 1)
    return int(code), reason.lstrip(": ").split("<", 1)[0].strip()


def _surfaces(
    svc: Service, client: httpx.Client, good: dict[str, Any], run_id: str
) -> dict[str, tuple[int, str]]:
    run = svc.wait_status(run_id)
    seen = {"API run exitCode": (run["exitCode"], (run.get("exitDecision") or {}).get("reason"))}
    decision = run.get("exitDecision") or {}
    seen["API run exitDecision"] = (decision.get("code"), decision.get("reason"))
    compared = client.get(f"/api/eval/runs/{run_id}/compare/{good['id']}")
    body = compared.json()
    decision = body.get("exitDecision") or {}
    seen[f"API compare ({compared.status_code})"] = (decision.get("code"), decision.get("reason"))
    if run.get("storeRunId"):
        seen["goldeval compare"] = _cli_compare(svc, good, run)
    plain = _page_decision(client.get(f"/ui/runs/{run_id}.html").text)
    seen["run page"] = plain or (-1, "no exit status shown")
    page = client.get(f"/ui/runs/{run_id}.html", params={"compare": good["id"]})
    seen["run page ?compare"] = _page_decision(page.text) or (-1, page.text[-300:])
    return seen


@SQLITE_ONLY
def test_the_service_gives_the_verdict_of_every_other_surface(
    service_factory: Any, llm: FakeLLMServer
) -> None:
    svc: Service = service_factory(rows=4, env={"OLLAMA_HOST": llm.base_url})
    llm.responder = fixture_responder(svc.root / "golden" / "demo")
    svc.serve(workers=1)
    table: dict[str, tuple[int, str, dict[str, tuple[int, str]]]] = {}
    with svc.client("EVAL") as client, svc.client("ADMIN") as admin:

        def start(key: str, **request: Any) -> str:
            request.setdefault("baselineRunId", good["id"])
            response = client.post(
                "/api/eval/runs", json={**LIVE, **request, "idempotencyKey": key}
            )
            assert response.status_code == 202, response.text
            return str(response.json()["id"])

        good: dict[str, Any] = {"id": None}
        good = svc.wait_status(start("good", noGate=True))
        assert good["exitCode"] == 0, good
        table["pass"] = (0, "GATE PASS", _surfaces(svc, client, good, start("pass")))

        fixture = svc.root / "golden" / "demo" / "fixtures" / "greeting.out.md"
        recorded = fixture.read_text(encoding="utf-8")
        fixture.write_text("Good morning.\n", encoding="utf-8")  # no "hello"/"welcome": FAIL
        llm.responder = fixture_responder(svc.root / "golden" / "demo")
        table["regression"] = (1, "GATE FAIL", _surfaces(svc, client, good, start("bad")))

        # Cut short once an attempt is graded, the next calls slow (30 s each): cancelled
        # (the worker's SIGTERM), then killed (SIGKILL: the plugin records nothing).
        fixture.write_text(recorded, encoding="utf-8")  # as the baseline again
        llm.responder = fixture_responder(svc.root / "golden" / "demo")

        def cancel(run_id: str) -> None:
            admin.post(f"/api/eval/runs/{run_id}/cancel")

        def kill(run_id: str) -> None:
            run_key = client.get(f"/api/eval/runs/{run_id}").json()["runKey"]
            for pid in _pytest_pids(run_key):
                os.kill(pid, signal.SIGKILL)

        def cut_short(key: str, stop: Callable[[str], None]) -> str:
            """A run stopped once an attempt is graded; again (up to 3 runs) when the run
            finished before the stop reached it (the worker acts on a cancel at its next
            heartbeat), which is not the case this row is about."""
            for attempt in range(3):
                llm.script([None])
                llm.set_fault(Fault.latency(30))
                run_id = start(f"{key}-{attempt}")
                _until(lambda r=run_id: _graded(client, r), "a graded attempt")
                stop(run_id)
                if svc.wait_status(run_id)["status"] != "COMPLETED":
                    return run_id
            raise AssertionError(f"{key}: every run finished before it was stopped")

        cancelled = cut_short("cancelled", cancel)
        table["cut short (cancel: SIGTERM)"] = (
            75,
            "terminated by SIGTERM",
            _surfaces(svc, client, good, cancelled),
        )
        killed = cut_short("killed", kill)
        table["cut short (killed: SIGKILL)"] = (
            75,
            "terminated by SIGKILL",
            _surfaces(svc, client, good, killed),
        )
        llm.set_fault(None)

        llm.set_fault(Fault.status(503))
        table["provider down"] = (
            75,
            "infrastructure failure",
            _surfaces(svc, client, good, start("down")),
        )
        llm.set_fault(Fault.status(401))
        table["auth error"] = (4, "AUTH_FAILED", _surfaces(svc, client, good, start("auth")))
        # Every call hangs past the run budget (deadlineSeconds): the plugin's deadline cuts
        # them, infrastructure (75), whatever the worker's own stop did.
        llm.set_fault(Fault.hang(60))
        table["deadline"] = (
            75,
            "infrastructure failure",
            _surfaces(svc, client, good, start("deadline", deadlineSeconds=3)),
        )
        # Finishing the run fails (a folder where the LATEST pointer goes, as a full disk
        # would): the fault is recorded with the run, so every surface says 75 and why.
        llm.set_fault(None)
        latest = svc.root / ".goldeval" / "runs" / "LATEST"
        latest.unlink(missing_ok=True)
        latest.mkdir()
        table["finalisation fault"] = (
            75,
            "could not finish the run",
            _surfaces(svc, client, good, start("unfinished")),
        )
        latest.rmdir()
    lines = []
    for name, (code, label, seen) in table.items():
        lines.append(f"{name}: want exit {code} '{label}'")
        lines += [f"  {where:24} exit {c} — {str(r)[:150]}" for where, (c, r) in seen.items()]
    report = "\n".join(lines)
    print(report)
    wrong = [
        (name, where)
        for name, (code, label, seen) in table.items()
        for where, (c, r) in seen.items()
        if c != code or label not in str(r)
    ]
    logs = svc.root / ".goldeval" / "service"
    tails = "\n".join(p.read_text(errors="replace")[-1500:] for p in sorted(logs.glob("*.log")))
    assert not wrong, f"{wrong}\n{report}\n{tails}"
    # The service names no server path (the CLI, run where the files are, may).
    for name, (_, _, seen) in table.items():
        for where, (_, reason) in seen.items():
            assert where == "goldeval compare" or str(svc.root) not in str(reason), (name, where)
