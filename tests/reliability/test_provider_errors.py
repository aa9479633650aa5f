"""Providers: async providers, non-retryable error kinds, retry messages (issue 15).

Black box with pytester against the real local LLM server; the team's own async provider is a
conftest override of ``golden_provider``, run serially (and with ``-n 2`` through the live
prefetch pool).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from goldeval.testing.llm_server import FakeLLMServer, Fault, Reply, fixture_responder
from tests.builders import run_document
from tests.helpers import LIVE_NO_GATE, SERIAL_ONLY, RunFiles, chat_calls

CASES = 10

# --------------------------------------------------------------------------- async providers

ASYNC_CALLABLE = """
import asyncio, json, os, threading
from pathlib import Path
import pytest

FIX = Path(__file__).parent / "golden" / "generation" / "fixtures"
_lock = threading.Lock()
_state = {"now": 0, "max": 0}

def _enter():
    with _lock:
        _state["now"] += 1
        _state["max"] = max(_state["max"], _state["now"])

def _leave():
    with _lock:
        _state["now"] -= 1
    name = "inflight-" + os.environ.get("PYTEST_XDIST_WORKER", "main") + ".json"
    Path(name).write_text(json.dumps(_state["max"]))

@pytest.fixture(scope="session")
def golden_provider():
    async def answer(case):
        _enter()
        try:
            await asyncio.sleep(0.05)
            return (FIX / f"{case.id}.out.md").read_text(encoding="utf-8")
        finally:
            _leave()
    return answer
"""

ASYNC_PROVIDER_CLASS = """
import asyncio
from pathlib import Path
import pytest
from goldeval.providers.base import Answer, Provider

FIX = Path(__file__).parent / "golden" / "generation" / "fixtures"

class AsyncApp(Provider):
    name = "async-app"
    async def complete(self, request):
        await asyncio.sleep(0.01)
        return Answer(text=(FIX / f"{request.case.id}.out.md").read_text(encoding="utf-8"))

@pytest.fixture(scope="session")
def golden_provider():
    return AsyncApp()
"""

RETURNS_COROUTINE = """
import asyncio
from pathlib import Path
import pytest

FIX = Path(__file__).parent / "golden" / "generation" / "fixtures"

async def _fetch(case_id):
    await asyncio.sleep(0)
    return (FIX / f"{case_id}.out.md").read_text(encoding="utf-8")

class App:
    def __call__(self, case):  # a plain callable that hands back a coroutine
        return _fetch(case.id)

@pytest.fixture(scope="session")
def golden_provider():
    return App()
"""


def _outputs(run: dict) -> list[str]:
    return [a.get("output") or "" for c in run["cases"] for a in c["attempts"]]


@pytest.mark.parametrize(
    "conftest",
    [ASYNC_CALLABLE, ASYNC_PROVIDER_CLASS, RETURNS_COROUTINE],
    ids=["async-def-callable", "async-complete", "callable-returning-coroutine"],
)
@SERIAL_ONLY
def test_async_provider_is_awaited_in_fixture_mode(
    pytester: pytest.Pytester,
    golden_project: Path,
    run_files: RunFiles,
    plugin_args: list[str],
    conftest: str,
) -> None:
    pytester.makeconftest(conftest)
    result = pytester.runpytest(
        "--golden=generation-v1",
        "--golden-artifacts=always",
        "-p",
        "no:cacheprovider",
        *plugin_args,
    )
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=CASES)
    outputs = _outputs(run_files.latest())
    assert len(outputs) == CASES
    assert not any("coroutine" in o for o in outputs)


def test_async_callable_runs_concurrently_through_the_live_prefetch_pool(
    pytester: pytest.Pytester,
    golden_project: Path,
    run_files: RunFiles,
    plugin_args: list[str],
) -> None:
    pytester.makeconftest(ASYNC_CALLABLE)
    result = pytester.runpytest(
        "--golden=generation-v1",
        "--golden-mode=live",
        "--golden-model=app",
        "--golden-no-gate",
        "--golden-concurrency=4",
        "--golden-artifacts=always",
        "-p",
        "no:cacheprovider",
        *plugin_args,
    )
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=CASES)
    run = run_files.latest()
    assert not any("coroutine" in o for o in _outputs(run))
    peaks = [json.loads(p.read_text()) for p in golden_project.glob("inflight-*.json")]
    assert peaks and max(peaks) >= 2, peaks  # calls overlapped on the shared loop


# --------------------------------------------------------------------------- error kinds

LIVE = [*LIVE_NO_GATE, "--golden-retries=3"]


def _provider_args(protocol: str, srv: FakeLLMServer) -> list[str]:
    if protocol == "openai":
        return ["--golden-provider=openai", f"--golden-base-url={srv.openai_base_url}"]
    return [f"--golden-base-url={srv.base_url}"]


OLLAMA_CONTEXT = {"error": "the input length exceeds the context length"}
OPENAI_CONTEXT = {
    "error": {
        "message": "This model's maximum context length is 4096 tokens. "
        "However, you requested 5000 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
TWO_CASES = "api-login-wrong-password-401 or e2e-login-happy-alice"
VLLM_CONTEXT_500 = {
    "object": "error",
    "message": "prompt is too long for the model",
    "type": "BadRequestError",
    "code": 500,
}


@pytest.mark.parametrize(
    "protocol,fault,kind",
    [
        ("openai", Fault.context_length(), "CONTEXT_LENGTH"),
        ("ollama", Fault.context_length(), "CONTEXT_LENGTH"),
        ("openai", Fault.status(400, body=OPENAI_CONTEXT), "CONTEXT_LENGTH"),
        ("ollama", Fault.status(400, body=OLLAMA_CONTEXT), "CONTEXT_LENGTH"),
        ("openai", Fault.status(500, body=VLLM_CONTEXT_500), "CONTEXT_LENGTH"),
        (
            "ollama",
            Fault.error_field("input length exceeds maximum context length"),
            "CONTEXT_LENGTH",
        ),
        ("ollama", Fault.model_not_found(), "MODEL_NOT_FOUND"),
        ("openai", Fault.model_not_found(), "MODEL_NOT_FOUND"),
        (
            "ollama",
            Fault.status(404, body={"error": 'model "qwen9" not found, try pulling it first'}),
            "MODEL_NOT_FOUND",
        ),
        ("openai", Fault.status(401), "AUTH_FAILED"),
        ("openai", Fault.status(422), "BAD_REQUEST"),
    ],
    ids=[
        "openai-context",
        "ollama-context",
        "openai-context-body",
        "ollama-context-body",
        "context-as-500",
        "ollama-context-error-field",
        "ollama-model",
        "openai-model",
        "ollama-model-body",
        "401",
        "422",
    ],
)
def test_non_retryable_errors_are_not_retried_and_do_not_exit_75(
    pytester: pytest.Pytester,
    llm: FakeLLMServer,
    run_files: RunFiles,
    protocol: str,
    fault: Fault,
    kind: str,
) -> None:
    llm.set_fault(fault)
    result = pytester.runpytest(*LIVE, *_provider_args(protocol, llm), "-k", TWO_CASES)
    out = result.stdout.str()
    assert result.ret == 4, out
    assert "Traceback" not in out and "INTERNALERROR" not in out
    result.assert_outcomes(errors=2)
    assert chat_calls(llm) == 2  # one try each: --golden-retries=3 did not apply
    attempts = [a for c in run_files.latest()["cases"] for a in c["attempts"]]
    assert {(a["status"], a["errorKind"], a["tries"]) for a in attempts} == {("ERROR", kind, 1)}
    result.stdout.fnmatch_lines(
        [
            f"*ERROR {kind} after 1 try*",
            "*retrying will not help*",
            "*goldeval decision: exit 4 — configuration error*",
        ]
    )
    assert "retry the run" not in out


@SERIAL_ONLY
def test_one_case_over_the_context_window_among_passing_cases_exits_4(
    pytester: pytest.Pytester,
    golden_project: Path,
    llm: FakeLLMServer,
    run_files: RunFiles,
    plugin_args: list[str],
) -> None:
    inner = fixture_responder(golden_project / "golden" / "generation")

    def responder(request):  # type: ignore[no-untyped-def]
        if "401" in (request.last_user_message or "") and "Gradle" not in (
            request.last_user_message or ""
        ):
            return Reply(status=400, error=OLLAMA_CONTEXT["error"])
        return inner(request)

    llm.responder = responder
    result = pytester.runpytest(*LIVE, *_provider_args("ollama", llm), *plugin_args)
    assert result.ret == 4, result.stdout.str()
    run = run_files.latest()
    errored = [a for c in run["cases"] for a in c["attempts"] if a["status"] == "ERROR"]
    graded = [a for c in run["cases"] for a in c["attempts"] if a["status"] in ("PASS", "FAIL")]
    assert errored and graded
    assert {a["errorKind"] for a in errored} == {"CONTEXT_LENGTH"}
    assert run["exitDecision"]["code"] == 4
    assert "CONTEXT_LENGTH" in run["exitDecision"]["reason"]


def test_retryable_errors_still_exit_75(
    pytester: pytest.Pytester, llm: FakeLLMServer, run_files: RunFiles
) -> None:
    llm.set_fault(Fault.status(503))
    result = pytester.runpytest(
        *LIVE,
        *_provider_args("ollama", llm),
        "--golden-retries=1",
        "-k",
        "api-login-wrong-password-401",
    )
    assert result.ret == 75, result.stdout.str()
    assert chat_calls(llm) == 2


@pytest.mark.parametrize("mode", ["live", "record"])
def test_openai_without_a_model_is_a_usage_error_before_any_call(
    pytester: pytest.Pytester, llm: FakeLLMServer, golden_project: Path, mode: str
) -> None:
    result = pytester.runpytest(
        "--golden=generation-v1",
        f"--golden-mode={mode}",
        "--golden-provider=openai",
        "--golden-overwrite-fixtures",
        f"--golden-base-url={llm.openai_base_url}",
        "-p",
        "no:cacheprovider",
    )
    assert result.ret == 4
    err = result.stderr.str()
    assert "--golden-model" in err and "Traceback" not in err
    assert chat_calls(llm) == 0
    assert not (golden_project / ".goldeval" / "runs" / "LATEST").exists()


# --------------------------------------------------------------------------- retry messages


def test_after_n_tries_is_said_once(
    pytester: pytest.Pytester, llm: FakeLLMServer, run_files: RunFiles
) -> None:
    llm.set_fault(Fault.status(503))
    result = pytester.runpytest(
        *LIVE,
        *_provider_args("ollama", llm),
        "--golden-retries=2",
        "--junitxml=junit.xml",
        "-k",
        "api-login-wrong-password-401",
    )
    assert result.ret == 75
    out = result.stdout.str()
    assert "after 3 tries" in out
    for line in out.splitlines():
        # "after N tries" once; the summary's own "retries:" line counts retries, not this.
        assert len(re.findall(r"\d+ tries", line)) <= 1, line
    (case,) = run_files.latest()["cases"]
    (attempt,) = case["attempts"]
    assert attempt["tries"] == 3 and "tries" not in attempt["errorMessage"]
    junit = (pytester.path / "junit.xml").read_text(encoding="utf-8")
    assert junit.count("after 3 tries") >= 1
    assert "tries (after" not in junit and "tries)" not in junit


# --------------------------------------------------------------------------- the exit table


def _run(*attempts: tuple[str, str | None]) -> dict:
    """One case per attempt (c0, c1, ...), each attempt with its errorKind."""
    return run_document({f"c{i}": [attempt] for i, attempt in enumerate(attempts)})


@pytest.mark.parametrize(
    "attempts,code",
    [
        ([("ERROR", "TIMEOUT")], 75),
        ([("ERROR", "CONTEXT_LENGTH")], 4),
        ([("PASS", None), ("ERROR", "HTTP_ERROR")], 75),
        ([("PASS", None), ("ERROR", "MODEL_NOT_FOUND")], 4),
        ([("ERROR", "TIMEOUT"), ("ERROR", "BAD_REQUEST")], 4),  # a mix: no rerun completes it
        ([("PASS", None), ("ERROR", "GRADER_TIMEOUT")], 4),
        ([("PASS", None), ("ERROR", "GRADER_ERROR")], 75),
    ],
)
def test_decide_exit_gives_4_when_no_retry_can_fix_the_errors(
    attempts: list[tuple[str, str | None]], code: int
) -> None:
    from tests.helpers import decide_run_exit

    decision = decide_run_exit(_run(*attempts), None, None, pytest_status=0)
    assert decision.code == code, decision
    if code == 4:
        assert decision.reason.startswith("configuration error") and "retrying will not help" in (
            decision.reason
        )
