"""The service's comparison is `goldeval compare`'s: the same comparison, gate and exit decision
for the same two runs, through the API and the run page, naming the run compared with (no
server paths). Issue 31."""

from __future__ import annotations

import html
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import Service

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


def _run(svc: Service, client: httpx.Client, key: str) -> dict[str, Any]:
    response = client.post("/api/eval/runs", json={"dataset": "demo-v1", "idempotencyKey": key})
    assert response.status_code == 202, response.text
    return svc.wait_status(response.json()["id"])


def _cli_compare(svc: Service, good: dict[str, Any], bad: dict[str, Any]) -> tuple[int, Any]:
    runs = svc.root / ".goldeval" / "runs"
    env = {k: v for k, v in svc.env.items() if k != "GOLDEVAL_API_KEYS"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "goldeval.cli.main",
            "compare",
            str(runs / good["storeRunId"] / "run.json"),
            str(runs / bad["storeRunId"] / "run.json"),
            "--json",
        ],
        cwd=svc.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, json.loads(proc.stdout)


def _regress_greeting(svc: Service) -> None:
    fixture = svc.root / "golden" / "demo" / "fixtures" / "greeting.out.md"
    fixture.write_text("Good morning.\n", encoding="utf-8")  # no "hello"/"welcome": FAIL


def test_compare_endpoint_gives_goldeval_compare_verdict(service: Service) -> None:
    """A regressed run compared with a good one is REGRESSION, exit 1, gate FAIL — as the CLI
    says — not the comparison's bare NO_REGRESSION."""
    with service.client("EVAL") as client:
        good = _run(service, client, "good")
        assert good["exitCode"] == 0, good
        _regress_greeting(service)
        bad = _run(service, client, "bad")
        assert bad["exitCode"] == 1, bad
        response = client.get(f"/api/eval/runs/{bad['id']}/compare/{good['id']}")
        assert response.status_code == 200, response.text
        body = response.json()
    code, cli = _cli_compare(service, good, bad)
    assert code == 1
    assert body["decision"] == "REGRESSION" == cli["comparison"]["decision"]
    assert body["counts"]["NEW_FAILURE"] == 1
    assert body["qualityGate"]["verdict"] == "FAIL"
    assert body["qualityGate"] == cli["qualityGate"]
    assert body["exitDecision"] == cli["exitDecision"]
    assert body["exitDecision"]["code"] == 1
    assert body["runId"] == bad["id"] and body["comparedWith"] == good["id"]
    for key, value in cli["comparison"].items():
        assert body[key] == value, key
    assert str(service.root) not in response.text

    # noGate=true: reported, not gated (the CLI's --no-gate).
    with service.client("EVAL") as client:
        ungated = client.get(
            f"/api/eval/runs/{bad['id']}/compare/{good['id']}", params={"noGate": "true"}
        ).json()
    assert ungated["qualityGate"] is None
    assert ungated["counts"]["NEW_FAILURE"] == 1
    # Not gated, the new failure is still not called NO_REGRESSION (as in every other surface)
    assert ungated["decision"] == "NEW_FAILURES_NOT_GATED", ungated
    assert "no gate weighs them" in ungated["decisionWhy"]


@SQLITE_ONLY
def test_run_page_compare_shows_the_same_verdict_and_names_the_run(
    service: Service,
) -> None:
    with service.client("EVAL") as client:
        good = _run(service, client, "good")
        # Committed as the dataset's baseline: the bad run compares with it on its own, and
        # its run document records the baseline's absolute path.
        baselines = service.root / "baselines"
        baselines.mkdir()
        run_json = service.root / ".goldeval" / "runs" / good["storeRunId"] / "run.json"
        (baselines / "demo-v1.json").write_bytes(run_json.read_bytes())
        _regress_greeting(service)
        bad = _run(service, client, "bad")
        page = client.get(f"/ui/runs/{bad['id']}.html", params={"compare": good["id"]})
        plain = client.get(f"/ui/runs/{bad['id']}.html")
        api = client.get(f"/api/eval/runs/{bad['id']}/compare/{good['id']}").json()
    assert page.status_code == 200, page.text
    assert api["decision"] == "REGRESSION"
    assert "REGRESSION" in page.text and "NO_REGRESSION" not in page.text
    assert f"vs <code>run {good['id']}</code>" in page.text
    shown = html.unescape(page.text)
    assert f"Exit status <strong>1</strong>: {api['exitDecision']['reason']}" in shown
    assert "vs <code>baselines/demo-v1.json</code>" in plain.text
    for text in (page.text, plain.text):
        assert str(service.root) not in text


@SQLITE_ONLY
def test_compare_with_a_dataset_this_server_does_not_have_is_refused(service: Service) -> None:
    """Without the dataset's manifest the gate policy is unknown: no silent NO_REGRESSION."""
    with service.client("EVAL") as client:
        good = _run(service, client, "good")
        bad = _run(service, client, "bad")
        manifest = service.root / "golden" / "demo" / "dataset.yaml"
        manifest.rename(manifest.with_suffix(".moved"))
        response = client.get(f"/api/eval/runs/{bad['id']}/compare/{good['id']}")
        assert response.status_code == 409, response.text
        assert response.json()["type"] == "/problems/no-gate-policy"
        assert "noGate" in response.json()["detail"]
        assert str(service.root) not in response.text
        ungated = client.get(
            f"/api/eval/runs/{bad['id']}/compare/{good['id']}", params={"noGate": "true"}
        )
        assert ungated.status_code == 200, ungated.text
        assert ungated.json()["exitDecision"]["code"] == 0
    assert Path(manifest.with_suffix(".moved")).exists()
