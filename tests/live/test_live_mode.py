"""Live mode against a real local HTTP server (Ollama and OpenAI protocols), no patching."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goldeval.testing.llm_server import FakeLLMServer, Fault, Reply
from tests.helpers import RunFiles, strip_timings

LIVE = ("--golden=generation-v1", "--golden-mode=live", "--golden-model=fake-llm:latest")


def _comparable(run: dict) -> dict:
    doc = strip_timings(run)
    for case in doc["cases"]:
        case.pop("model", None)
        for a in case["attempts"]:
            for key in ("tokens", "tries", "model", "finishReason", "servedModel"):  # live-only
                a.pop(key, None)
    return {
        "cases": doc["cases"],
        "metrics": {k: v for k, v in doc["metrics"].items() if k not in ("tokens",)},
    }


def test_live_against_replaying_server_scores_like_fixture_mode(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    run_files: RunFiles,
    plugin_args: list[str],
) -> None:
    fixture = pytester.runpytest("--golden=generation-v1")
    assert fixture.ret == 0
    fixture_run = run_files.latest()
    live = pytester.runpytest(
        *LIVE, f"--golden-base-url={llm_server.base_url}", "--golden-no-gate", *plugin_args
    )
    assert live.ret == 0, live.stdout.str()
    live_run = run_files.latest()
    assert live_run["protocol"]["mode"] == "LIVE"
    assert _comparable(live_run) == _comparable(fixture_run)
    # each call carried the pack's system prompt and the row's prompt as the user message
    chat = [r for r in llm_server.requests if r.path == "/api/chat"]
    prompts = {r.json["messages"][-1]["content"] for r in chat}
    assert len(prompts) == 10
    # Under xdist, work stealing may call a stolen item twice on a busy machine; the extra
    # answer is dropped (docs/known-limitations.md). Serially every case is called once.
    assert len(chat) == 10 if not plugin_args else 10 <= len(chat) <= 12
    body = chat[0].json
    assert body["stream"] is False and body["options"]["temperature"] == 0
    assert body["messages"][0]["role"] == "system" and body["messages"][1]["role"] == "user"
    assert live_run["metrics"]["tokens"]["totalTokens"] > 0


def test_openai_protocol_with_bearer_key_never_leaks(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    run_files: RunFiles,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "sk-test-SECRET-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    result = pytester.runpytest(
        *LIVE,
        "--golden-provider=openai",
        f"--golden-base-url={llm_server.base_url}",
        "--golden-no-gate",
        "--golden-artifacts=always",
        "--junitxml=j.xml",
    )
    assert result.ret == 0, result.stdout.str()
    assert llm_server.requests[0].path == "/v1/chat/completions"
    assert llm_server.requests[0].headers["authorization"] == f"Bearer {secret}"
    _assert_nowhere(pytester.path, result, secret)


def test_basic_auth_from_url_userinfo_never_leaks(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    host = llm_server.base_url.replace("http://", "")
    monkeypatch.setenv("OLLAMA_HOST", f"http://alice:pw-S3CRET-xyz@{host}")
    llm_server.set_fault(Fault.status(500))
    result = pytester.runpytest(*LIVE, "--golden-retries=0", "--golden-artifacts=always")
    assert result.ret == 75
    assert llm_server.requests[0].headers["authorization"].startswith("Basic ")
    _assert_nowhere(pytester.path, result, "pw-S3CRET-xyz")
    _assert_nowhere(pytester.path, result, "alice:")


def _assert_nowhere(root: Path, result: pytest.RunResult, secret: str) -> None:
    assert secret not in result.stdout.str() and secret not in result.stderr.str()
    for path in root.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".md", ".xml", ".jsonl", ".html", ""):
            assert secret not in path.read_text(encoding="utf-8", errors="replace"), path


def test_server_down_for_every_attempt_gives_75_and_no_quality_figures(
    pytester: pytest.Pytester,
    golden_project: Path,
    run_files: RunFiles,
    plugin_args: list[str],
) -> None:
    srv = FakeLLMServer().start()
    url = srv.base_url
    srv.stop()  # nothing listens there any more: connection refused
    result = pytester.runpytest(
        *LIVE, f"--golden-base-url={url}", "--golden-retries=1", *plugin_args
    )
    assert result.ret == 75, result.stdout.str()
    result.assert_outcomes(errors=10)
    result.stdout.fnmatch_lines(
        ["*MODEL_UNAVAILABLE after 2 tries*", "*goldeval decision: exit 75*"]
    )
    run = run_files.latest()
    assert run["attemptsError"] == 10
    assert all(
        a["errorKind"] == "MODEL_UNAVAILABLE" and a["tries"] == 2
        for c in run["cases"]
        for a in c["attempts"]
    )
    for name in ("overallPassRate", "contractPassRate", "hallucinationRate"):
        assert run["metrics"][name]["rate"] is None


@pytest.mark.parametrize(
    "fault,kind,tries",
    [
        (Fault.status(503), "HTTP_ERROR", 2),
        (Fault.status(429, retry_after=0), "RATE_LIMIT", 2),
        (Fault.status(400), "BAD_REQUEST", 1),
        (Fault.invalid_json(), "PARSER_ERROR", 1),
        (Fault.empty_content(), "EMPTY_RESPONSE", 1),
        (Fault.error_field("model not loaded"), "PROVIDER_ERROR", 1),
        (Fault.drop(), "MODEL_UNAVAILABLE", 2),
        (Fault.hang(1.5), "TIMEOUT", 2),
    ],
    ids=["503", "429", "400", "invalid-json", "empty", "error-field", "drop", "hang"],
)
def test_fault_classes_end_as_error_kinds(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    run_files: RunFiles,
    fault: Fault,
    kind: str,
    tries: int,
) -> None:
    llm_server.set_fault(fault)
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-retries=1",
        "--golden-timeout=0.5",
        "-k",
        "api-login-wrong-password-401",
    )
    result.assert_outcomes(errors=1)
    # a 400 is BAD_REQUEST: a retry cannot fix it, so exit 4, not 75 (issue 15); nor can a
    # body that is not JSON: PARSER_ERROR (issue 32)
    assert result.ret == (4 if kind in ("BAD_REQUEST", "PARSER_ERROR") else 75)
    attempt = run_files.latest()["cases"][0]["attempts"][0]
    assert attempt["status"] == "ERROR"
    assert (attempt["errorKind"], attempt["tries"]) == (kind, tries)


def test_retry_then_success_is_a_pass_with_tries_recorded(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    run_files: RunFiles,
) -> None:
    llm_server.script([Fault.status(503), Fault.status(429, retry_after=0)])
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-concurrency=1",
        "--golden-no-gate",
        "-k",
        "api-login-wrong-password-401",
    )
    result.assert_outcomes(passed=1)
    assert run_files.latest()["cases"][0]["attempts"][0]["tries"] == 3


def test_concurrent_calls_while_items_report_in_order(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
) -> None:
    llm_server.latency = 0.2
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-attempts=3",
        "--golden-concurrency=8",
        "--golden-no-gate",
        "-v",
    )
    result.assert_outcomes(passed=30)
    assert llm_server.max_in_flight >= 6
    lines = [ln for ln in result.stdout.lines if "::test_golden[" in ln and "PASSED" in ln]
    assert lines[0].split("[", 1)[1].startswith("api-login-wrong-password-401-attempt1")
    assert lines[1].split("[", 1)[1].startswith("api-login-wrong-password-401-attempt2")


def test_concurrency_one_means_one_call_at_a_time(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
) -> None:
    llm_server.latency = 0.05
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-concurrency=1",
        "--golden-no-gate",
    )
    result.assert_outcomes(passed=10)
    assert llm_server.max_in_flight == 1


def test_deadline_skips_unstarted_attempts_and_run_is_incomplete(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    run_files: RunFiles,
) -> None:
    llm_server.latency = 0.4
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-concurrency=1",
        "--golden-deadline=0.9",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped", 0) >= 5
    run = run_files.latest()
    assert run["status"] == "INCOMPLETE" and run["incomplete"] is True
    skipped = [a for c in run["cases"] for a in c["attempts"] if a["status"] == "SKIPPED"]
    assert skipped and all(a["skipReason"] == "deadline" for a in skipped)
    assert result.ret != 0
    assert any(r["name"] == "complete" and not r["passed"] for r in run["qualityGate"]["rules"])


def _record(llm_server: FakeLLMServer, *extra: str) -> tuple[str, ...]:
    """A record-mode session of the example dataset against the fake server, ungated."""
    return (
        "--golden=generation-v1",
        "--golden-mode=record",
        f"--golden-base-url={llm_server.base_url}",
        "--golden-no-gate",
        *extra,
    )


def test_record_mode_writes_new_fixtures_and_keeps_existing(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    golden_project: Path,
) -> None:
    fixtures = golden_project / "golden" / "generation" / "fixtures"
    (fixtures / "e2e-login-happy-alice.out.md").unlink()
    llm_server.responder = lambda req: "RAG: x\nnew answer"
    result = pytester.runpytest(*_record(llm_server))
    result.stdout.fnmatch_lines(
        [
            "*fixtures new: e2e-login-happy-alice*",
            "*differing but kept*api-login-wrong-password-401*",
        ]
    )
    assert (fixtures / "e2e-login-happy-alice.out.md").read_text() == "RAG: x\nnew answer"
    assert "new answer" not in (fixtures / "api-login-wrong-password-401.out.md").read_text()
    result = pytester.runpytest(*_record(llm_server, "--golden-overwrite-fixtures"))
    result.stdout.fnmatch_lines(["*fixtures changed:*api-login-wrong-password-401*"])
    assert (fixtures / "api-login-wrong-password-401.out.md").read_text() == "RAG: x\nnew answer"


def test_response_cache_makes_a_rerun_free_and_keeps_attempts_distinct(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    run_files: RunFiles,
) -> None:
    args = (
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-cache=cache",
        "--golden-attempts=2",
        "--golden-no-gate",
    )
    assert pytester.runpytest(*args).ret == 0
    assert len(llm_server.requests) == 20  # two attempts per case are two distinct calls
    llm_server.reset()
    assert pytester.runpytest(*args).ret == 0
    assert llm_server.requests == []
    assert len(list((pytester.path / "cache").glob("*.json"))) == 20


def test_models_side_by_side(pytester: pytest.Pytester, llm_server: FakeLLMServer) -> None:
    result = pytester.runpytest(
        "--golden=generation-v1",
        "--golden-mode=live",
        "--golden-models=m-one,m-two",
        f"--golden-base-url={llm_server.base_url}",
    )
    result.assert_outcomes(passed=20)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*model m-one:*", "*model m-two:*"])
    models = {r.json["model"] for r in llm_server.requests}
    assert models == {"m-one", "m-two"}
    runs = [
        json.loads(p.read_text()) for p in (pytester.path / ".goldeval/runs").glob("*/run.json")
    ]
    assert sorted(r["model"] for r in runs) == ["m-one", "m-two"]


def test_live_gate_needs_a_live_baseline(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    run_files: RunFiles,
) -> None:
    result = pytester.runpytest(*LIVE, f"--golden-base-url={llm_server.base_url}")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*GATE FAIL*baseline*"])
    save = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-save-baseline=baselines/live-generation-v1.json",
    )
    assert save.ret == 0, save.stdout.str()
    again = pytester.runpytest(*LIVE, f"--golden-base-url={llm_server.base_url}")
    assert again.ret == 0, again.stdout.str()
    assert run_files.latest()["comparison"]["decision"] == "NO_REGRESSION"


def test_judge_is_soft_and_contract_wins(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    golden_project: Path,
    run_files: RunFiles,
) -> None:
    replay = llm_server.responder
    # one fixture now violates its contract; the judge accepts everything anyway
    broken = golden_project / "golden/generation/fixtures/e2e-login-happy-alice.out.md"

    def responder(req):  # type: ignore[no-untyped-def]
        system = req.messages[0]["content"] if req.messages else ""
        if "CANDIDATE:" in (req.last_user_message or ""):
            return Reply(
                content='VERDICT: ПРИНЯТО\n{"decision":"ACCEPT","score":0.9,"reasons":["ok"]}'
            )
        if "happy" in (req.last_user_message or "") or ("alice" in system and False):
            return "broken"
        return replay(req)

    llm_server.responder = responder
    del broken
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-judge",
        "--golden-judge-model=judge-m",
        "--golden-no-gate",
    )
    run = run_files.latest()
    judged = [a for c in run["cases"] for a in c["attempts"] if a.get("judge")]
    assert judged, result.stdout.str()
    assert run["metrics"]["judgeAcceptRate"]["total"] == len(judged)
    refuse = [c for c in run["cases"] if "REFUSAL" in c["kinds"]]
    assert all("judge" not in a for c in refuse for a in c["attempts"])
    failed = [a for c in run["cases"] for a in c["attempts"] if a["status"] == "FAIL"]
    for a in failed:
        assert a["judge"]["decision"] == "ACCEPT" and a["judge"]["overrideAttempted"] is True
    assert run["protocol"]["judgeEnabled"] is True and run["protocol"]["judgeModel"] == "judge-m"


def test_judge_down_gives_judge_errors_while_hard_verdicts_stand(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    run_files: RunFiles,
) -> None:
    replay = llm_server.responder

    def responder(req):  # type: ignore[no-untyped-def]
        if "CANDIDATE:" in (req.last_user_message or ""):
            return Reply(status=503, content=None)
        return replay(req)

    llm_server.responder = responder
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-judge",
        "--golden-retries=0",
        "--golden-no-gate",
    )
    result.assert_outcomes(passed=10)
    run = run_files.latest()
    assert run["judgeErrors"] == 7
    assert run["metrics"]["judgeAcceptRate"]["rate"] is None
    assert run["metrics"]["overallPassRate"]["rate"] == 1.0


def test_calibrate_with_a_live_judge(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    import subprocess
    import sys

    llm_server.responder = lambda req: Reply(
        content='VERDICT: НЕ ПРИНЯТО\n{"decision":"REJECT","score":0.1,"reasons":["strict"]}'
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "goldeval.cli.main",
            "calibrate",
            "--golden=generation-v1",
            "--live",
            f"--base-url={llm_server.base_url}",
            "--judge-model=judge-m",
            "--out",
            "cal",
        ],
        cwd=golden_project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # A judge that rejects everything agrees with the humans no better than chance (kappa 0):
    # below the calibration bar, exit 1, the report written all the same.
    assert out.returncode == 1, out.stdout + out.stderr
    assert "calibration below the bar" in out.stdout
    report = json.loads((golden_project / "cal/calibration/report.json").read_text())
    assert report["live"] is True
    assert report["confusion"]["trueAccept"] == 0 and report["confusion"]["falseAccept"] == 0
    assert "source=live judge" in (golden_project / "cal/calibration/report.md").read_text()
    # the judge saw the rubric as system prompt and the candidate in the user message
    first = llm_server.requests[0].json["messages"]
    assert first[0]["role"] == "system" and "CANDIDATE:" in first[1]["content"]


@pytest.mark.parametrize(
    ("extra", "scheduler"),
    [
        ([], "WorkStealingScheduling"),
        (["--dist", "load"], "LoadScheduling"),
        (["--dist=loadscope"], "LoadScopeScheduling"),
    ],
    ids=["default", "explicit-load", "explicit-loadscope"],
)
def test_live_xdist_steals_work_unless_dist_is_given(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    run_files: RunFiles,
    extra: list[str],
    scheduler: str,
) -> None:
    """xdist's default `load` refills a worker whose items take over 0.1 s only when two are
    left, which starves the prefetcher; live runs use `worksteal` unless --dist is given."""
    llm_server.latency = 0.05
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-attempts=3",
        "--golden-no-gate",
        "-n",
        "2",
        "-v",
        *extra,
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([f"scheduling tests via {scheduler}"])
    run = run_files.latest()
    assert run["attemptsTotal"] == 30 and run["attemptsPassed"] == 30


def test_fixture_mode_keeps_xdist_default_scheduling(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    result = pytester.runpytest("--golden=generation-v1", "-n", "2", "-v")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["scheduling tests via LoadScheduling"])


def test_record_mode_refuses_a_fixtures_folder_linked_out_before_any_call(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    golden_project: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """It was refused only when the answers were written, after every call (the answers
    were lost), and a variant's folder was created through the link first."""
    import shutil

    outside = tmp_path_factory.mktemp("outside")
    fixtures = golden_project / "golden" / "generation" / "fixtures"
    shutil.move(str(fixtures), str(outside / "fixtures"))
    fixtures.symlink_to(outside / "fixtures", target_is_directory=True)
    before = sorted(p.name for p in (outside / "fixtures").iterdir())
    result = pytester.runpytest(*_record(llm_server, "--golden-overwrite-fixtures"))
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out
    assert "record mode would write through a link" in out
    assert not llm_server.requests
    assert sorted(p.name for p in (outside / "fixtures").iterdir()) == before
