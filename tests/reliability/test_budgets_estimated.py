"""Budgets count what they cannot see (issue 32), against the real fake server on 127.0.0.1.

- A server that sends no usage in streams (llama.cpp's): the tokens are estimated (characters /
  4), marked as estimated in run.json and report.md, and ``--golden-max-tokens`` applies to the
  estimate (before: ``tokens {}``, every row ran, exit 0).
- Judge calls carry ``max_tokens``, wait on the generation limiter of the same server and
  spend the same budget.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from goldeval.testing.llm_server import FakeLLMServer, RecordedRequest, Reply, fixture_responder
from tests.helpers import RunFiles, chat_calls

CASES = 10
VERDICT = '{"decision":"ACCEPT","score":0.9,"reasons":["ok"]}'


def _attempts(run: dict) -> list[dict]:
    return [a for c in run["cases"] for a in c["attempts"]]


def _judge_or_fixture(
    golden_project: Path, judge_prompt_tokens: int = 100
) -> Callable[[RecordedRequest], Reply | str]:
    """Judge requests get a verdict, the model's calls their recorded fixture."""
    fixtures = fixture_responder(golden_project / "golden" / "generation")

    def respond(req: RecordedRequest) -> Reply | str:
        if "CANDIDATE:" in (req.last_user_message or ""):
            return Reply(VERDICT, prompt_tokens=judge_prompt_tokens, completion_tokens=7)
        return fixtures(req)

    return respond


def _judge_calls(srv: FakeLLMServer) -> list[RecordedRequest]:
    return [r for r in srv.requests if "CANDIDATE:" in (r.last_user_message or "")]


@pytest.mark.parametrize("protocol", ["openai", "ollama"])
def test_stream_without_usage_is_estimated_and_the_budget_stops_the_run(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, protocol: str
) -> None:
    with FakeLLMServer() as srv:
        srv.responder = fixture_responder(golden_project / "golden" / "generation")
        srv.usage_in_streams = False  # llama.cpp: no usage in streams, even when asked
        url = srv.openai_base_url if protocol == "openai" else srv.base_url
        result = pytester.runpytest(
            "--golden=generation-v1",
            "--golden-mode=live",
            f"--golden-provider={protocol}",
            "--golden-model=fake-llm:latest",
            f"--golden-base-url={url}",
            "--golden-stream",
            "--golden-concurrency=1",
            "--golden-max-tokens=100",
            "--golden-no-gate",
            "-rs",
        )
        calls = chat_calls(srv)
    assert result.ret == 1, result.stdout.str()  # cut short by the budget: never exit 0
    assert calls < CASES
    run = run_files.latest()
    assert run["status"] == "INCOMPLETE" and run["notStartedOverBudget"] == CASES - calls
    answered = [a for a in _attempts(run) if a["status"] != "SKIPPED"]
    assert len(answered) == calls
    for attempt in answered:
        tokens = attempt["tokens"]
        assert tokens["estimated"] is True
        assert tokens["inputTokens"] > 0 and tokens["outputTokens"] > 0
    totals = run["metrics"]["tokens"]
    assert totals["estimated"] is True and totals["estimatedAttempts"] == calls
    assert totals["totalTokens"] >= 100  # what stopped the run
    report = (run_files.latest_dir() / "report.md").read_text(encoding="utf-8")
    assert "estimated for" in report and "characters / 4" in report
    result.stdout.fnmatch_lines(["*budget: attempt not started*estimated*"])


def test_reported_usage_is_not_marked_estimated(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    with FakeLLMServer() as srv:
        srv.responder = fixture_responder(golden_project / "golden" / "generation")
        result = pytester.runpytest(
            "--golden=generation-v1",
            "--golden-mode=live",
            "--golden-model=fake-llm:latest",
            f"--golden-base-url={srv.base_url}",
            "--golden-stream",
            "--golden-no-gate",
        )
    assert result.ret == 0, result.stdout.str()
    run = run_files.latest()
    assert all("estimated" not in a["tokens"] for a in _attempts(run))
    assert "estimated" not in run["metrics"]["tokens"]


def _peak_overlap(starts: list[float], seconds: float) -> int:
    """The most intervals [start, start + seconds) open at one instant."""
    events = sorted([(t, 1) for t in starts] + [(t + seconds, -1) for t in starts])
    peak = open_now = 0
    for _, step in events:  # an end sorts before a start at the same instant
        open_now += step
        peak = max(peak, open_now)
    return peak


def test_judge_calls_carry_max_tokens_and_wait_on_the_generation_limiter(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    with FakeLLMServer(latency=0.15) as srv:
        srv.responder = _judge_or_fixture(golden_project)
        result = pytester.runpytest(
            "--golden=generation-v1",
            "--golden-mode=live",
            "--golden-model=fake-llm:latest",
            f"--golden-base-url={srv.base_url}",
            "--golden-judge",
            "--golden-no-gate",
            "--golden-concurrency=2",
            "--golden-concurrency-mode=fixed",
        )
        judge_calls = _judge_calls(srv)
        # Calls overlapping during their 0.15 s of model time. Not srv.max_in_flight: the
        # server counts a call until its handler returns, after the client has read the
        # answer and freed its slot, so a loaded machine shows a third call in that gap.
        peak = _peak_overlap([r.received_at for r in srv.requests], 0.15)
    assert result.ret == 0, result.stdout.str()
    assert judge_calls
    # Ollama protocol: max_tokens travels as options.num_predict; the default is 512.
    assert {r.json["options"].get("num_predict") for r in judge_calls} == {512}
    # The judge (main thread) and the prefetched model calls share one limiter of 2 slots.
    assert peak <= 2
    run = run_files.latest()
    assert run["metrics"]["tokens"]["judge"]["inputTokens"] == 100 * len(judge_calls)


def test_judge_tokens_spend_the_budget_and_the_option_sets_max_tokens(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    with FakeLLMServer() as srv:
        # One judge call costs more than the whole budget; the model's own calls far less.
        srv.responder = _judge_or_fixture(golden_project, judge_prompt_tokens=100_000)
        result = pytester.runpytest(
            "--golden=generation-v1",
            "--golden-mode=live",
            "--golden-provider=openai",
            "--golden-model=fake-llm:latest",
            f"--golden-base-url={srv.openai_base_url}",
            "--golden-judge",
            "--golden-no-gate",
            "--golden-concurrency=1",
            "--golden-max-tokens=50000",
            "--golden-judge-max-tokens=64",
            "-rs",
        )
        judge_calls = _judge_calls(srv)
        calls = chat_calls(srv) - len(judge_calls)
    assert result.ret == 1, result.stdout.str()  # the judge's tokens spent the budget
    assert calls == 1 and len(judge_calls) == 1
    assert judge_calls[0].json["max_tokens"] == 64
    run = run_files.latest()
    assert run["status"] == "INCOMPLETE" and run["notStartedOverBudget"] == CASES - 1


def test_judge_max_tokens_from_the_ini(pytester: pytest.Pytester, golden_project: Path) -> None:
    pytester.makeini("[pytest]\ngolden_judge_max_tokens = 200\n")
    with FakeLLMServer() as srv:
        srv.responder = _judge_or_fixture(golden_project)
        result = pytester.runpytest(
            "--golden=generation-v1",
            "--golden-mode=live",
            "--golden-model=fake-llm:latest",
            f"--golden-base-url={srv.base_url}",
            "--golden-judge",
            "--golden-no-gate",
        )
        judge_calls = _judge_calls(srv)
    assert result.ret == 0, result.stdout.str()
    assert judge_calls and {r.json["options"]["num_predict"] for r in judge_calls} == {200}


def test_a_bad_judge_max_tokens_in_the_ini_is_a_usage_error(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    pytester.makeini("[pytest]\ngolden_judge_max_tokens = lots\n")
    result = pytester.runpytest(
        "--golden=generation-v1",
        "--golden-mode=live",
        "--golden-model=fake-llm:latest",
        "--golden-base-url=http://127.0.0.1:9",
        "--golden-judge",
    )
    assert result.ret == 4
    assert "golden_judge_max_tokens" in result.stderr.str()
