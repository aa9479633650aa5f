"""One verdict, every surface (issue 31's table): the same outcome gives the same exit code and
decision label through pytest, the saved run (run.json, summary.json), ``goldeval gate`` and
``goldeval compare``.

Each row makes one real run of one throwaway project (pytester in process; a subprocess for
SIGTERM), then asks the CLI about the saved run. The label is the part of the reason every
surface must carry (the 75 reason may add the command that resumes it). The service's API and
run page are the same table's subset in tests/server/test_verdict_table.py.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from goldeval.store import open_store
from goldeval.testing.llm_server import FakeLLMServer, Fault
from tests.helpers import app_provider_conftest, chat_calls, run_cli

HAPPY = "golden/generation/fixtures/e2e-login-happy-alice.out.md"
BASELINE = "baselines/generation-v1.json"
FIXTURE = ["--golden=generation-v1", "-p", "no:cacheprovider"]
LIVE = [
    *FIXTURE,
    "--golden-mode=live",
    "--golden-model=fake-llm:latest",
    "--golden-no-gate",
    "--golden-retries=0",
]

#: The team's own app as the provider: each row answers its recorded fixture, except the one
#: HOW names, which fails (pytest.fail) or stalls past pytest-timeout's limit.
CONFTEST = app_provider_conftest(
    "golden/generation/fixtures", "e2e-login-happy-alice", 'os.environ.get("HOW", "")'
)


@dataclass(frozen=True)
class Row:
    code: int
    #: What every surface's reason says (the decision label).
    label: str
    #: The run is gated against the committed baseline (else --no-gate on the CLI).
    gated: bool = True
    #: The session saves a run (else only pytest's own exit status and line are checked).
    saved: bool = True


TABLE: dict[str, Row] = {
    "pass": Row(0, "GATE PASS"),
    "regression": Row(1, "GATE FAIL"),
    "not comparable": Row(65, "mismatch"),
    "cut short by -x": Row(1, "stopped early"),
    "cut short by SIGTERM": Row(75, "terminated by SIGTERM", gated=False),
    # SIGTERM while the first attempt's call is in flight: the stop request lets that item
    # finish (pytest_plugin/stopping.py), so the run is saved with it and read back the same.
    "SIGTERM before any attempt was graded": Row(75, "terminated by SIGTERM", gated=False),
    "deadline": Row(75, "infrastructure failure", gated=False),
    "budget": Row(1, "not started over the token/cost budget", gated=False),
    "provider down": Row(75, "infrastructure failure", gated=False),
    "auth error": Row(4, "AUTH_FAILED", gated=False),
    "provider raised pytest.fail": Row(75, "infrastructure errors", gated=False),
    "timeout plugin fired": Row(75, "infrastructure errors", gated=False),
    "store fault": Row(75, "the run is INCOMPLETE in the store"),
    "finalisation fault": Row(75, "could not finish the run"),
}


@dataclass
class Session:
    """What the pytest session said, and where it saved the run (None: nothing saved)."""

    code: int
    output: str
    run_json: Path | None


def _decision_line(output: str) -> str:
    lines = [ln for ln in output.splitlines() if ln.startswith("goldeval decision: exit ")]
    errors = [ln for ln in output.splitlines() if ln.startswith("goldeval: error: ")]
    assert len(lines) + len(errors) >= 1, output[-3000:]
    return (lines or errors)[-1]


def _only_run(project: Path) -> Path:
    (run_json,) = (project / ".goldeval" / "runs").glob("*/run.json")
    return run_json


def _plant_trigger(project: Path, sql: str) -> None:
    """A real SQLite trigger that makes one of the store's writes fail."""
    store = project / ".goldeval" / "goldeval.sqlite3"
    with open_store(str(store)):
        pass  # creates the schema
    conn = sqlite3.connect(store)
    conn.execute(sql)
    conn.commit()
    conn.close()


def _in_process(pytester: pytest.Pytester, *args: str) -> Session:
    result = pytester.runpytest(*args)
    output = result.stdout.str() + result.stderr.str()
    runs = list((pytester.path / ".goldeval" / "runs").glob("*/run.json"))
    return Session(int(result.ret), output, runs[0] if len(runs) == 1 else None)


def _sigterm(project: Path, llm: FakeLLMServer, calls: int = 3) -> Session:
    """A live run stopped by SIGTERM once ``calls`` calls were made (one at a time: the
    calls before the last were graded)."""
    llm.latency = 0.3
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            *LIVE,
            f"--golden-base-url={llm.base_url}",
            "--golden-timeout=30",
            "--golden-concurrency=1",
        ],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        # An event to wait for, not a guessed delay.
        while chat_calls(llm) < calls:
            assert proc.poll() is None and time.monotonic() < deadline, "no model call"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    runs = list((project / ".goldeval" / "runs").glob("*/run.json"))
    return Session(proc.returncode, output, runs[0] if len(runs) == 1 else None)


def _make(name: str, pytester: pytest.Pytester, project: Path, llm: FakeLLMServer) -> Session:
    url = f"--golden-base-url={llm.base_url}"
    makes: dict[str, Callable[[], Session]] = {
        "pass": lambda: _in_process(pytester, *FIXTURE),
        "regression": lambda: _in_process(pytester, *FIXTURE),
        "cut short by -x": lambda: _in_process(pytester, *FIXTURE, "-x"),
        "cut short by SIGTERM": lambda: _sigterm(project, llm),
        "SIGTERM before any attempt was graded": lambda: _sigterm(project, llm, calls=1),
        "deadline": lambda: _in_process(
            pytester,
            *LIVE,
            url,
            "--golden-timeout=10",
            "--golden-concurrency=2",
            "--golden-deadline=3",
        ),
        "budget": lambda: _in_process(pytester, *LIVE, url, "--golden-max-tokens=1"),
        "provider down": lambda: _in_process(pytester, *LIVE, url),
        "auth error": lambda: _in_process(pytester, *LIVE, url),
        "provider raised pytest.fail": lambda: _in_process(pytester, *LIVE),
        "timeout plugin fired": lambda: _in_process(pytester, *LIVE, "--timeout=1"),
        "store fault": lambda: _in_process(pytester, *FIXTURE),
        "finalisation fault": lambda: _in_process(pytester, *FIXTURE),
    }
    if name in ("regression", "cut short by -x"):
        (project / HAPPY).write_text("RAG: po-chain, seed-account\n// Invalid password\n")
    elif name == "deadline":
        llm.set_fault(Fault.hang(60))
    elif name == "provider down":
        llm.set_fault(Fault.status(503))
    elif name == "auth error":
        llm.set_fault(Fault.status(401))
    elif name in ("provider raised pytest.fail", "timeout plugin fired"):
        pytester.makeconftest(CONFTEST)
        os.environ["HOW"] = "fail" if name.endswith("fail") else "stall"
    elif name == "store fault":
        _plant_trigger(
            project,
            "CREATE TRIGGER planted BEFORE INSERT ON attempts BEGIN "
            "SELECT RAISE(ABORT, 'planted: attempts refused'); END",
        )
    elif name == "finalisation fault":
        _plant_trigger(
            project,
            "CREATE TRIGGER planted BEFORE UPDATE ON runs WHEN "
            "NEW.status = 'COMPLETED' BEGIN "
            "SELECT RAISE(ABORT, 'planted: no COMPLETED'); END",
        )
    if name == "not comparable":
        # Refused before any item ran (nothing saved); the CLI is asked about a saved run
        # against the same incomparable baseline.
        refused = _in_process(pytester, *FIXTURE, "--golden-baseline=baselines/holdout-v1.json")
        saved = _in_process(pytester, *FIXTURE)
        assert saved.code == 0, saved.output[-3000:]
        return Session(refused.code, refused.output, saved.run_json)
    return makes[name]()


def _cli(project: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    done = run_cli(*args, "--json", cwd=project)
    text = done.stdout + done.stderr
    try:
        doc = json.loads(done.stdout)
    except ValueError:
        doc = {}
    return done.returncode, doc if isinstance(doc, dict) else {}, text


def _reason(doc: dict[str, Any], text: str) -> str:
    decision = doc.get("exitDecision")
    return str(decision.get("reason")) if isinstance(decision, dict) else text


@pytest.mark.parametrize("name", list(TABLE))
def test_one_outcome_one_code_and_label_on_every_surface(
    pytester: pytest.Pytester,
    golden_project: Path,
    llm: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    row = TABLE[name]
    monkeypatch.setenv("HOW", "")
    session = _make(name, pytester, golden_project, llm)
    seen: dict[str, tuple[int, str]] = {}
    seen["pytest"] = (session.code, _decision_line(session.output))
    run_json = session.run_json
    if not row.saved:
        assert run_json is None and session.code == row.code, session.output[-3000:]
        assert row.label in seen["pytest"][1], session.output[-3000:]
        return
    assert run_json is not None, session.output[-3000:]
    run = json.loads(run_json.read_text(encoding="utf-8"))
    if name != "not comparable":  # the refused session saved nothing; this run is another's
        seen["run.json"] = (run["exitDecision"]["code"], run["exitDecision"]["reason"])
        summary = json.loads((run_json.parent / "summary.json").read_text(encoding="utf-8"))
        seen["summary.json"] = (summary["exitDecision"]["code"], summary["exitDecision"]["reason"])
    no_gate = [] if row.gated else ["--no-gate"]
    if name == "not comparable":
        code, doc, text = _cli(
            golden_project, "gate", str(run_json), "--baseline", "baselines/holdout-v1.json"
        )
    else:
        code, doc, text = _cli(golden_project, "gate", str(run_json), *no_gate)
    seen["goldeval gate"] = (code, _reason(doc, text))
    baseline = "baselines/holdout-v1.json" if name == "not comparable" else BASELINE
    code, doc, text = _cli(golden_project, "compare", baseline, str(run_json), *no_gate)
    seen["goldeval compare"] = (code, _reason(doc, text))
    table = "\n".join(f"  {surface:18} exit {c:3} — {r[:160]}" for surface, (c, r) in seen.items())
    print(f"{name}:\n{table}")
    wrong = {s: v for s, v in seen.items() if v[0] != row.code or row.label not in v[1]}
    assert not wrong, f"{name}: want exit {row.code} '{row.label}' everywhere\n{table}"
    if "run.json" in seen:  # a saved run regated says what the session said, word for word
        reason = seen["run.json"][1]
        assert reason in seen["pytest"][1], table
        assert seen["summary.json"][1] == seen["goldeval gate"][1] == reason, table
        assert seen["goldeval compare"][1] == reason, table


def test_a_run_folder_without_run_json_is_read_from_the_store(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    """A run killed while its folder was written leaves the folder without run.json: named by
    its id, ``goldeval gate`` reads the store's record (the same verdict), not a usage error."""
    session = _in_process(pytester, *FIXTURE)
    assert session.code == 0 and session.run_json is not None, session.output[-3000:]
    run_id = session.run_json.parent.name
    session.run_json.unlink()
    code, doc, text = _cli(golden_project, "gate", run_id)
    assert code == 0, text
    assert doc["exitDecision"]["reason"].startswith("GATE PASS"), text
