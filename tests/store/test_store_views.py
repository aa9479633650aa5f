"""Store views equal the run: ``goldeval export/show`` give what the run's run.json says.

Every kind of run (fixture, live, judged, resumed by run key, two shards of one run key) on
both backends: the export is compared with run.json field by field.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from goldeval.store import open_store
from goldeval.testing.llm_server import FakeLLMServer, Reply, fixture_responder
from tests.helpers import RunFiles, run_cli
from tests.store.conftest import Target

LIVE = ["--golden=generation-v1", "--golden-mode=live", "--golden-model=fake-llm:latest"]

# Keys of the export that run.json does not have: the store's identity of the run (its run
# key and the model of the stored row). Everything else must be equal.
STORE_ONLY = {"runKey", "model"}


@pytest.fixture
def llm(golden_project: Path) -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        replay = fixture_responder(golden_project / "golden" / "generation")

        def responder(req: Any) -> Any:
            if "CANDIDATE:" in (req.last_user_message or ""):  # the judge's prompt
                return Reply(content='{"decision":"ACCEPT","score":0.9,"reasons":["ok"]}')
            return replay(req)

        srv.responder = responder
        yield srv


def _cli(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=project)


def _export(project: Path, url: str, run: str) -> dict[str, Any]:
    out = _cli(project, "export", run, "--store", url)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def _assert_same(run: dict[str, Any], exported: dict[str, Any]) -> None:
    extra = set(exported) - set(run) - STORE_ONLY
    missing = set(run) - set(exported)
    assert not extra and not missing, (extra, missing)
    for key, value in run.items():
        assert exported[key] == value, key


def _check(project: Path, target: Target, run_files: RunFiles, run: str) -> None:
    doc = run_files.latest()
    _assert_same(doc, _export(project, target.url, run))
    # `show` prints the run's report.md (the same renderer over the same document).
    show = _cli(project, "show", run, "--store", target.url)
    assert show.returncode == 0, show.stderr
    report = (run_files.latest_dir() / "report.md").read_text(encoding="utf-8")
    assert show.stdout == report


@pytest.mark.parametrize(
    "kind", ["fixture", "fixture-n2", "fixture-failing", "live", "judged", "resumed", "sharded"]
)
def test_export_and_show_equal_run_json(
    pytester: pytest.Pytester,
    golden_project: Path,
    target: Target,
    run_files: RunFiles,
    llm: FakeLLMServer,
    kind: str,
) -> None:
    store = f"--golden-store={target.url}"
    live = [*LIVE, f"--golden-base-url={llm.base_url}", store]
    if kind in ("fixture", "fixture-n2", "fixture-failing"):
        if kind == "fixture-failing":  # a gate FAIL, a comparison and notes are kept too
            fixture = next((golden_project / "golden/generation/fixtures").glob("*.out.md"))
            fixture.write_text("nothing useful\n", encoding="utf-8")
        xdist = ["-n", "2"] if kind == "fixture-n2" else []
        result = pytester.runpytest("--golden=generation-v1", store, *xdist)
        assert result.ret == (1 if kind == "fixture-failing" else 0), result.stdout.str()
        doc = run_files.latest()
        assert doc["qualityGate"] and doc["comparison"] and doc["exitDecision"]
        run = doc["runId"]
    elif kind == "live":
        result = pytester.runpytest(*live, "--golden-no-gate")
        assert result.ret == 0, result.stdout.str()
        run = run_files.latest()["runId"]
    elif kind == "judged":
        result = pytester.runpytest(
            *live, "--golden-judge", "--golden-judge-model=judge-m", "--golden-no-gate"
        )
        assert result.ret == 0, result.stdout.str()
        doc = run_files.latest()
        assert doc["metrics"]["judgeAcceptRate"]["total"] > 0
        run = doc["runId"]
    elif kind == "resumed":
        args = [*live, "--golden-run-key=resume-1", "--golden-no-gate"]
        first = pytester.runpytest(*args, "-k", "api or e2e")
        assert first.ret == 0, first.stdout.str()
        second = pytester.runpytest(*args)
        assert second.ret == 0, second.stdout.str()
        assert run_files.latest()["attemptsTotal"] == 10
        run = "resume-1"
    else:
        args = ["--golden=generation-v1", store, "--golden-run-key=shard-1"]
        a = pytester.runpytest(*args, "--golden-no-gate", "-k", "api or e2e")
        assert a.ret == 0, a.stdout.str()
        b = pytester.runpytest(*args, "-k", "not (api or e2e)")
        assert b.ret == 0, b.stdout.str()
        doc = run_files.latest()
        assert doc["attemptsTotal"] == 10 and doc["qualityGate"]["verdict"] == "PASS"
        run = "shard-1"
    _check(golden_project, target, run_files, run)


def test_export_does_not_show_a_verdict_about_other_attempts(
    pytester: pytest.Pytester, golden_project: Path, target: Target, run_files: RunFiles
) -> None:
    """Attempts recorded after the last finished session (a shard still running, a crash):
    the recorded gate judged fewer attempts, so the export leaves it out and says why."""
    result = pytester.runpytest(
        "--golden=generation-v1",
        f"--golden-store={target.url}",
        "--golden-run-key=late-1",
        "--golden-no-gate",
        "-k",
        "api",
    )
    assert result.ret == 0, result.stdout.str()
    with open_store(target.url) as store:
        row = store.get_run("late-1")
        assert row is not None
        known = {a["caseId"] for a in store.attempts(row.run_id)}
        (first,) = [c for c in store.cases(row.run_id)][:1]
        extra_id = "late-extra-case"
        case = {**first, "caseId": extra_id}
        store.record_cases(row.run_id, [case])
        attempt = next(a for a in store.attempts(row.run_id) if a["caseId"] in known)
        late = {**attempt, "caseId": extra_id, "status": "FAIL"}
        store.record_attempt_texts(
            row.run_id, [(extra_id, 1, late.get("model"), "FAIL", json.dumps(late))]
        )
    exported = _export(golden_project, target.url, "late-1")
    assert exported["attemptsTotal"] == run_files.latest()["attemptsTotal"] + 1
    assert run_files.latest()["exitDecision"]["code"] == 0
    for key in ("qualityGate", "comparison", "exitDecision"):
        assert key not in exported
    assert any("goldeval gate --run-key" in note for note in exported["notes"])


def test_a_run_stored_with_absolute_paths_is_exported_with_relative_ones(
    pytester: pytest.Pytester, golden_project: Path, target: Target, run_files: RunFiles
) -> None:
    """A run recorded before run.json held relative paths (issue 33): its stored document
    names the machine's folders; the store's view makes them relative to its project root."""
    result = pytester.runpytest(
        "--golden=generation-v1", f"--golden-store={target.url}", "--golden-run-key=old-1"
    )
    assert result.ret == 0, result.stdout.str()
    with open_store(target.url) as store:
        row = store.get_run("old-1")
        assert row is not None and isinstance(row.summary, dict)
        summary = dict(row.summary)
        doc = dict(summary["runDocument"])
        assert doc["projectRoot"] == "." and doc["goldenRoot"] == "golden"
        doc["projectRoot"] = str(golden_project)
        doc["goldenRoot"] = str(golden_project / "golden")
        doc["baselinePath"] = str(golden_project / "baselines" / "generation-v1.json")
        doc["configuration"] = {
            **doc["configuration"],
            "outputDir": str(golden_project / ".goldeval" / "runs"),
        }
        summary["runDocument"] = doc
        store.finish_run(row.run_id, row.status, summary)
    exported = _export(golden_project, target.url, "old-1")
    assert exported["projectRoot"] == "."
    assert exported["goldenRoot"] == "golden"
    assert exported["baselinePath"] == "baselines/generation-v1.json"
    assert exported["configuration"]["outputDir"] == ".goldeval/runs"
    assert str(golden_project) not in json.dumps(exported)
