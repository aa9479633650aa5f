"""One verdict, every surface (issue 31's table), the service's part: the same outcome gives
the same exit code and decision label on the API's run endpoint (``exitCode``,
``exitDecision``), its compare endpoint, the run page (plain and ``?compare=``) and
``goldeval compare`` / ``goldeval gate`` on the run.json downloaded from the API, on SQLite and
on PostgreSQL. tests/reliability/test_verdict_table.py has the whole table through pytest,
run.json, summary.json, ``goldeval gate`` and ``goldeval compare``.

Rows a service client causes with the run request alone: pass, regression, not comparable (a
baseline run of another protocol), cancelled (SIGTERM), killed (SIGKILL), provider down, auth
error, the run budget (``deadlineSeconds``) and the finalisation fault (the run folder's disk).

The run request carries no pytest arguments, no token/cost budget and no provider callable (it
refuses unknown fields: docs/service.md, "What a run request cannot carry"), so a client cannot
cause ``-x``, ``--golden-max-tokens``, pytest-timeout's ``--timeout`` or a provider that calls
``pytest.fail``. The operator's project can: the service runs pytest in the project root, so
its ``pytest.ini`` (``addopts``) and ``conftest.py`` (a ``golden_provider`` fixture) apply to
every run. Those rows are made that way here, and so is the store fault (a trigger planted in
the service's own store, as tests/reliability plants one in the plugin's).

One service, one project and one model server per backend (cheap): a live run answered from
the recorded fixtures is the baseline every row is compared with.
"""

from __future__ import annotations

import html
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from goldeval.testing.llm_server import FakeLLMServer, Fault
from goldeval.testing.llm_server.fixtures import fixture_responder
from tests.helpers import app_provider_conftest
from tests.server.conftest import Service, _raw_connect

LIVE = {"dataset": "demo-v1", "mode": "live", "model": "fake-llm:latest"}

#: The project's own app as the provider (the operator's conftest.py): it answers the recorded
#: fixtures, except for the row the HOW file names, which fails (pytest.fail) or stalls past
#: pytest-timeout's limit.
APP_CONFTEST = app_provider_conftest(
    "golden/demo/fixtures",
    "greeting",
    '(ROOT / "HOW").read_text(encoding="utf-8").strip() if (ROOT / "HOW").is_file() else ""',
)


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


def _download(svc: Service, client: httpx.Client, run: dict[str, Any]) -> str | None:
    """The run's run.json as the API serves it, saved outside the project (None: the run has
    none, a killed process)."""
    response = client.get(f"/api/eval/runs/{run['id']}/artifacts/RUN_JSON")
    if response.status_code != 200:
        return None
    folder = svc.root.parent / "downloads"
    folder.mkdir(exist_ok=True)
    path = folder / f"{run['id']}.run.json"
    path.write_bytes(response.content)
    return str(path)


def _cli(svc: Service, *args: str) -> tuple[int, str]:
    env = {k: v for k, v in svc.env.items() if k != "GOLDEVAL_API_KEYS"}
    done = subprocess.run(
        [sys.executable, "-m", "goldeval.cli.main", *args, "--json"],
        cwd=svc.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        return done.returncode, str(json.loads(done.stdout)["exitDecision"]["reason"])
    except (ValueError, KeyError, TypeError):
        return done.returncode, done.stdout + done.stderr


def _cli_verdicts(
    svc: Service, client: httpx.Client, good: dict[str, Any], bad: dict[str, Any]
) -> dict[str, tuple[int, str]]:
    """``goldeval compare`` and ``goldeval gate`` on the two runs' downloaded run.json, or on
    their store records when the API has no run.json of the run (a killed process)."""
    base = _download(svc, client, good)
    assert base is not None, good
    candidate = _download(svc, client, bad)
    store: list[str] = []
    if candidate is None:
        candidate, store = str(bad["storeRunId"]), ["--store", svc.store_url]
    return {
        "goldeval compare": _cli(svc, "compare", base, candidate, *store),
        "goldeval gate": _cli(svc, "gate", candidate, "--baseline", base, *store),
    }


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


def _run_surfaces(svc: Service, client: httpx.Client, run_id: str) -> dict[str, tuple[int, str]]:
    """What the run endpoint and the plain run page say of the run."""
    run = svc.wait_status(run_id)
    decision = run.get("exitDecision") or {}
    plain = _page_decision(client.get(f"/ui/runs/{run_id}.html").text)
    return {
        "API run exitCode": (run["exitCode"], decision.get("reason")),
        "API run exitDecision": (decision.get("code"), decision.get("reason")),
        "run page": plain or (-1, "no exit status shown"),
    }


def _compare_surfaces(
    svc: Service, client: httpx.Client, good: dict[str, Any], run_id: str
) -> dict[str, tuple[int, str]]:
    """What the compare endpoint, the run page ?compare= and the CLI say of the run against
    ``good``."""
    run = svc.wait_status(run_id)
    compared = client.get(f"/api/eval/runs/{run_id}/compare/{good['id']}")
    decision = compared.json().get("exitDecision") or {}
    seen = {f"API compare ({compared.status_code})": (decision.get("code"), decision.get("reason"))}
    page = client.get(f"/ui/runs/{run_id}.html", params={"compare": good["id"]})
    seen["run page ?compare"] = _page_decision(page.text) or (-1, page.text[-300:])
    if run.get("storeRunId"):
        seen.update(_cli_verdicts(svc, client, good, run))
    return seen


def _surfaces(
    svc: Service, client: httpx.Client, good: dict[str, Any], run_id: str
) -> dict[str, tuple[int, str]]:
    return {**_run_surfaces(svc, client, run_id), **_compare_surfaces(svc, client, good, run_id)}


@contextmanager
def _project_config(svc: Service, ini: str = "", conftest: str | None = None) -> Iterator[None]:
    """The operator's pytest.ini (``addopts``) and conftest.py in the project root, for the
    runs started inside the block (each run is a new pytest process that reads them)."""
    ini_path, conftest_path = svc.root / "pytest.ini", svc.root / "conftest.py"
    ini_path.write_text(f"[pytest]\n{ini}\n", encoding="utf-8")
    if conftest is not None:
        conftest_path.write_text(conftest, encoding="utf-8")
    try:
        yield
    finally:
        ini_path.unlink()
        conftest_path.unlink(missing_ok=True)


@contextmanager
def _attempts_refused(svc: Service) -> Iterator[None]:
    """A real trigger in the service's store that refuses every attempt the plugin writes."""
    if svc.backend == "sqlite":
        conn = sqlite3.connect(svc.store_url)
        conn.execute(
            "CREATE TRIGGER planted BEFORE INSERT ON attempts BEGIN "
            "SELECT RAISE(ABORT, 'planted: attempts refused'); END"
        )
        conn.commit()
        drop = ["DROP TRIGGER planted"]
    else:
        conn = _raw_connect(svc.store_url)
        conn.execute(
            "CREATE FUNCTION planted_refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'planted: attempts refused'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER planted BEFORE INSERT ON attempts "
            "FOR EACH ROW EXECUTE FUNCTION planted_refuse()"
        )
        drop = ["DROP TRIGGER planted ON attempts", "DROP FUNCTION planted_refuse()"]
    try:
        yield
    finally:
        for statement in drop:
            conn.execute(statement)
        conn.commit()
        conn.close()


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

        # Not comparable: a run asked to compare with a baseline of another protocol (2
        # attempts per case, not 1) is refused before any item runs; a saved run of that
        # protocol compared with the baseline is refused the same way.
        refused = _run_surfaces(svc, client, start("incomparable", attempts=2))
        other = start("other-protocol", attempts=2, noGate=True, baselineRunId=None)
        assert svc.wait_status(other)["exitCode"] == 0
        table["not comparable"] = (
            65,
            "mismatch",
            {**refused, **_compare_surfaces(svc, client, good, other)},
        )

        fixture = svc.root / "golden" / "demo" / "fixtures" / "greeting.out.md"
        recorded = fixture.read_text(encoding="utf-8")
        fixture.write_text("Good morning.\n", encoding="utf-8")  # no "hello"/"welcome": FAIL
        llm.responder = fixture_responder(svc.root / "golden" / "demo")
        table["regression"] = (1, "GATE FAIL", _surfaces(svc, client, good, start("bad")))
        with _project_config(svc, "addopts = -x"):
            table["cut short by -x (project pytest.ini)"] = (
                1,
                "stopped early",
                _surfaces(svc, client, good, start("exitfirst")),
            )

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

        # One call at a time: the call answered at once is the first item's, so an attempt
        # is graded before the slow ones (with 8 in flight, the quick answer may go to a later
        # item, and nothing is graded until the slow calls end).
        with _project_config(svc, "addopts = --golden-concurrency=1"):
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
            # The first call answers, the next hangs past the run budget (deadlineSeconds):
            # the worker's stop (SIGTERM) ends the run INTERRUPTED, infrastructure (75).
            llm.script([None])
            llm.set_fault(Fault.hang(60))
            table["deadline"] = (
                75,
                "terminated by SIGTERM",
                _surfaces(svc, client, good, start("deadline", deadlineSeconds=8)),
            )
        llm.set_fault(None)

        # One call at a time (with 8 in flight, all could start before the first one's
        # tokens are counted). Gated, so the gate's completeness rule words it (1, as the
        # ungated "not started over the token/cost budget" of tests/reliability).
        with _project_config(svc, "addopts = --golden-max-tokens=1 --golden-concurrency=1"):
            table["budget (project pytest.ini)"] = (
                1,
                "the budget (--golden-max-cost / --golden-max-tokens) was spent",
                _surfaces(svc, client, good, start("budget")),
            )

        llm.set_fault(Fault.status(503))
        table["provider down"] = (
            75,
            "infrastructure failure",
            _surfaces(svc, client, good, start("down")),
        )
        llm.set_fault(Fault.status(401))
        table["auth error"] = (4, "AUTH_FAILED", _surfaces(svc, client, good, start("auth")))

        # The project's own app as the provider names itself in the protocol, so its rows are
        # compared with a baseline made by the same app.
        how = svc.root / "HOW"
        with _project_config(svc, "addopts = --timeout=2", APP_CONFTEST):
            app_good = svc.wait_status(start("app-good", noGate=True, baselineRunId=None))
            assert app_good["exitCode"] == 0, app_good
            how.write_text("fail", encoding="utf-8")
            table["provider raised pytest.fail (project conftest.py)"] = (
                75,
                "infrastructure errors",
                _surfaces(svc, client, app_good, start("app-fail", baselineRunId=app_good["id"])),
            )
            how.write_text("stall", encoding="utf-8")
            table["timeout plugin fired (project pytest.ini)"] = (
                75,
                "infrastructure errors",
                _surfaces(svc, client, app_good, start("app-stall", baselineRunId=app_good["id"])),
            )
            how.unlink()

        with _attempts_refused(svc):
            table["store fault"] = (
                75,
                "the run is INCOMPLETE in the store",
                _surfaces(svc, client, good, start("store-fault")),
            )

        # Finishing the run fails (a folder where the LATEST pointer goes, as a full disk
        # would): the fault is recorded with the run, so every surface says 75 and why.
        latest = svc.root / ".goldeval" / "runs" / "LATEST"
        latest.unlink(missing_ok=True)
        latest.mkdir()
        table["finalisation fault"] = (
            75,
            "could not finish the run",
            _surfaces(svc, client, good, start("unfinished")),
        )
        latest.rmdir()
    lines = [f"backend: {svc.backend}"]
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
    # Every row was asked on every surface (a surface missing from a row is not a pass).
    surfaces = {"API run exitCode", "API run exitDecision", "run page", "run page ?compare"}
    surfaces |= {"goldeval compare", "goldeval gate"}
    for name, (_, _, seen) in table.items():
        assert surfaces <= set(seen), (name, sorted(seen))
        assert any(where.startswith("API compare") for where in seen), name
    # The service names no server path (the CLI, run where the files are, may).
    for name, (_, _, seen) in table.items():
        for where, (_, reason) in seen.items():
            assert where.startswith("goldeval") or str(svc.root) not in str(reason), (name, where)
