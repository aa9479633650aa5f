"""Live runs at provider scale through pytest: budgets, streaming, retries and queue wait in
the run, against the real fake server (no patching)."""

from __future__ import annotations

import pytest

from goldeval.testing.llm_server import FakeLLMServer, Fault
from tests.helpers import RunFiles, chat_calls

LIVE = ("--golden=generation-v1", "--golden-mode=live", "--golden-model=fake-llm:latest")
CASES = 10


def _attempts(run: dict) -> list[dict]:
    return [a for c in run["cases"] for a in c["attempts"]]


@pytest.mark.parametrize("gate", [[], ["--golden-no-gate"]], ids=["gate", "no-gate"])
def test_spent_token_budget_skips_the_rest_and_the_run_is_incomplete(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, run_files: RunFiles, gate: list[str]
) -> None:
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-concurrency=1",
        "--golden-max-tokens=1",
        "-rs",
        *gate,
    )
    assert result.ret == 1, result.stdout.str()  # never a green run
    run = run_files.latest()
    assert run["status"] == "INCOMPLETE" and run["incomplete"] is True
    attempts = _attempts(run)
    skipped = [a for a in attempts if a["status"] == "SKIPPED"]
    assert len(attempts) == CASES and len(skipped) == CASES - 1
    assert all(a["skipReason"] == "budget" for a in skipped)
    assert run["notStartedOverBudget"] == CASES - 1
    assert chat_calls(llm_server) == 1  # a skipped attempt never called the model
    result.stdout.fnmatch_lines(["*budget: attempt not started*--golden-max-tokens=1*"])


def test_budget_counts_xdist_workers_skips(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, run_files: RunFiles
) -> None:
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-concurrency=1",
        "--golden-max-tokens=2",
        "--golden-no-gate",
        "-n",
        "2",
    )
    assert result.ret == 1, result.stdout.str()
    run = run_files.latest()
    skipped = [a for a in _attempts(run) if a["status"] == "SKIPPED"]
    assert run["status"] == "INCOMPLETE" and run["notStartedOverBudget"] == len(skipped) >= 6


def test_cost_budget_needs_a_price(pytester: pytest.Pytester, llm_server: FakeLLMServer) -> None:
    result = pytester.runpytest(
        *LIVE, f"--golden-base-url={llm_server.base_url}", "--golden-max-cost=0.01"
    )
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["*--golden-max-cost needs a price for fake-llm:latest*golden_prices*"]
    )
    assert chat_calls(llm_server) == 0


def test_cost_budget_with_ini_prices(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, run_files: RunFiles
) -> None:
    pytester.makeini("[pytest]\ngolden_prices =\n    fake-llm:latest = 1000 1000\n")
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-concurrency=1",
        "--golden-max-cost=0.5",
        "--golden-no-gate",
    )
    assert result.ret == 1
    run = run_files.latest()
    graded = [a for a in _attempts(run) if a["status"] != "SKIPPED"]
    assert len(graded) == 1 and graded[0]["tokens"]["estimatedCost"] >= 0.5


def test_bad_price_line_is_a_usage_error(
    pytester: pytest.Pytester, llm_server: FakeLLMServer
) -> None:
    pytester.makeini("[pytest]\ngolden_prices =\n    fake-llm:latest = cheap\n")
    result = pytester.runpytest(*LIVE, f"--golden-base-url={llm_server.base_url}")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*golden_prices line 1*MODEL = INPUT OUTPUT*"])


@pytest.mark.parametrize("provider", ["ollama", "openai"])
def test_streamed_live_run_records_time_to_first_token(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, run_files: RunFiles, provider: str
) -> None:
    llm_server.stream_interval = 0.01
    base = llm_server.base_url if provider == "ollama" else llm_server.openai_base_url
    result = pytester.runpytest(
        *LIVE,
        f"--golden-provider={provider}",
        f"--golden-base-url={base}",
        "--golden-stream",
        "--golden-no-gate",
    )
    assert result.ret == 0, result.stdout.str()
    attempts = _attempts(run_files.latest())
    assert all(a["status"] == "PASS" for a in attempts)
    assert all(0 < a["ttftMs"] <= a["durationMs"] for a in attempts)
    assert all("queueMs" in a for a in attempts)
    assert all(
        r.json["stream"] is True
        for r in llm_server.requests
        if r.path.endswith("chat") or r.path.endswith("completions")
    )
    # totals apart from latency: in the terminal and in report.md
    result.stdout.fnmatch_lines(["*Queue wait avg / p95*ms", "*TTFT avg / p95*ms"])
    report = (run_files.latest_dir() / "report.md").read_text(encoding="utf-8")
    assert "| TTFT avg / p95 |" in report and "| Queue wait avg / p95 |" in report


def test_retries_are_counted_per_attempt_and_in_totals(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, run_files: RunFiles
) -> None:
    llm_server.script([Fault.status(503), Fault.status(503)])
    result = pytester.runpytest(
        *LIVE,
        f"--golden-base-url={llm_server.base_url}",
        "--golden-concurrency=1",
        "--golden-no-gate",
    )
    assert result.ret == 0, result.stdout.str()
    run = run_files.latest()
    tries = sorted(a["tries"] for a in _attempts(run))
    assert tries == [1] * (CASES - 1) + [3]
    shown = "retries: 1 attempt needed more than one provider try (2 retries)"
    result.stdout.fnmatch_lines([f"*{shown}*"])
    report = (run_files.latest_dir() / "report.md").read_text(encoding="utf-8")
    assert shown in report
    # the attempt's latency covers its three tries
    retried = next(a for a in _attempts(run) if a["tries"] == 3)
    assert retried["durationMs"] >= 1
