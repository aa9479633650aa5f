"""One attempt's orchestration (goldeval.pipeline.orchestration), without pytest items.

The runner gets plain inputs: the repository's golden/generation dataset with the plugin's
graders, a real provider (the dataset's fixtures, or a plain callable as a conftest would
give), the real Judge over a callable judge, a Budget and a deadline.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from goldeval.core.errors import ProviderError
from goldeval.core.models import Mode, Status
from goldeval.dataset.case import GoldenCase
from goldeval.dataset.rows import Dataset, load_dataset
from goldeval.graders.contract import ContractGrader
from goldeval.graders.registry import builtin_graders
from goldeval.judge.runner import DEFAULT_RUBRIC, Judge
from goldeval.pipeline.attempt import Pipeline
from goldeval.pipeline.orchestration import (
    RERUN_KIND,
    AttemptRunner,
    SkippedByOutcome,
)
from goldeval.pipeline.retriever import LexicalRetriever
from goldeval.providers.base import Answer, as_provider
from goldeval.providers.budget import Budget
from goldeval.providers.fixture import FixtureProvider

ROOT = Path(__file__).resolve().parents[2]
CASE_ID = "api-login-wrong-password-401"


@pytest.fixture(scope="module")
def dataset() -> Dataset:
    graders = [ContractGrader(), *builtin_graders()]
    return load_dataset(
        ROOT / "golden" / "generation",
        project_root=ROOT,
        graders=graders,
        require_fixtures=False,
    )


def _pipeline(dataset: Dataset) -> Pipeline:
    # As the plugin's session does: the contract's domain constants come from the manifest.
    graders = [ContractGrader(dataset.domain.contract), *builtin_graders()]
    assert dataset.pack is not None
    return Pipeline(
        dataset, graders, LexicalRetriever(dataset.pack.chunks, dataset.domain.retriever)
    )


def _case(dataset: Dataset, case_id: str = CASE_ID) -> GoldenCase:
    return next(c for c in dataset.cases if c.id == case_id)


class Calls:
    """A plain callable provider that counts its calls and answers ``reply`` (or raises it)."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.cases: list[str] = []

    def __call__(self, case: GoldenCase) -> Any:
        self.cases.append(case.id)
        if isinstance(self.reply, BaseException):
            raise self.reply
        return self.reply


def test_a_recorded_good_answer_passes(dataset: Dataset) -> None:
    runner = AttemptRunner(_pipeline(dataset), FixtureProvider(dataset.dir))
    case = _case(dataset)
    outcome = runner.run(case, 1, None)
    assert outcome.status is Status.PASS
    assert outcome.graded and outcome.message == "" and outcome.not_started is None
    assert outcome.record.contract is not None and outcome.record.contract.passed
    fixture = (dataset.dir / "fixtures" / f"{CASE_ID}.out.md").read_text(encoding="utf-8")
    assert outcome.record.output == fixture


def test_a_contract_fail_stands_over_a_judge_that_accepts(dataset: Dataset) -> None:
    accepting = Calls('{"decision": "ACCEPT", "score": 1.0, "reasons": ["looks right"]}')
    judge = Judge(as_provider(accepting), "judge-model", DEFAULT_RUBRIC)
    app = Calls("Sure! Here is a test: assert True")
    runner = AttemptRunner(_pipeline(dataset), as_provider(app), mode=Mode.LIVE, judge=judge)
    outcome = runner.run(_case(dataset), 1, "m")
    assert app.cases == [CASE_ID] and accepting.cases == [CASE_ID]
    assert outcome.status is Status.FAIL and outcome.graded
    assert outcome.record.contract is not None and not outcome.record.contract.passed
    judged = outcome.record.judge
    assert judged is not None and judged.decision == "ACCEPT" and judged.override_attempted
    assert outcome.message.startswith(f"golden case {CASE_ID} attempt 1: FAIL\n  [")


def test_a_provider_error_is_an_error_of_its_kind_not_a_fail(dataset: Dataset) -> None:
    app = Calls(ProviderError("RATE_LIMIT", "429 from the app", tries=3))
    runner = AttemptRunner(_pipeline(dataset), as_provider(app), mode=Mode.LIVE)
    outcome = runner.run(_case(dataset), 2, "m")
    assert outcome.status is Status.ERROR and not outcome.graded
    assert outcome.record.error_kind == "RATE_LIMIT" and outcome.record.tries == 3
    assert outcome.record.duration_ms >= 1  # the time the failed call took
    assert outcome.message.startswith(
        f"golden case {CASE_ID} attempt 2: ERROR RATE_LIMIT after 3 tries"
    )
    assert "infrastructure, not a quality verdict: retry the run" in outcome.message


def test_an_app_that_crashes_is_a_provider_error(dataset: Dataset) -> None:
    runner = AttemptRunner(
        _pipeline(dataset), as_provider(Calls(RuntimeError("boom"))), mode=Mode.LIVE
    )
    outcome = runner.run(_case(dataset), 1, "m")
    assert outcome.status is Status.ERROR
    assert outcome.record.error_kind == "PROVIDER_ERROR"
    assert "RuntimeError" in (outcome.record.error_message or "")


def test_no_call_starts_after_the_deadline(dataset: Dataset) -> None:
    app = Calls("never asked")
    runner = AttemptRunner(
        _pipeline(dataset), as_provider(app), mode=Mode.LIVE, deadline_at=time.monotonic() - 1
    )
    outcome = runner.run(_case(dataset), 1, "m")
    assert app.cases == []
    assert outcome.status is Status.SKIPPED and outcome.not_started == "deadline"
    assert outcome.record.skip_reason == "deadline"
    assert outcome.message == "deadline: attempt not started before --golden-deadline"


def test_a_spent_budget_stops_the_next_attempts(dataset: Dataset) -> None:
    budget = Budget(max_tokens=1)
    app = Calls("an answer without usage: its tokens are estimated and spent")
    runner = AttemptRunner(_pipeline(dataset), as_provider(app), mode=Mode.LIVE, budget=budget)
    first = runner.run(_case(dataset), 1, "m")
    assert first.status in (Status.PASS, Status.FAIL)  # started before the budget was spent
    assert first.record.tokens is not None and first.record.tokens.estimated
    second = runner.run(_case(dataset), 2, "m")
    assert app.cases == [CASE_ID]  # the second attempt never called the app
    assert second.status is Status.SKIPPED and second.not_started == "budget"
    assert second.record.skip_reason == "budget"
    assert budget.skipped == 1
    assert second.message.startswith("budget: attempt not started, spent ")


def test_grading_one_attempt_twice_is_a_rerun_error(dataset: Dataset) -> None:
    runner = AttemptRunner(_pipeline(dataset), FixtureProvider(dataset.dir))
    case = _case(dataset)
    assert runner.run(case, 1, None, key="item-1").status is Status.PASS
    again = runner.run(case, 1, None, key="item-1")
    assert again.status is Status.ERROR and not again.graded
    assert again.record.error_kind == RERUN_KIND
    assert "ran its call phase again" in again.message


class HostSkip(BaseException):
    """A host framework's outcome exception (as pytest.skip is a BaseException)."""


def _classify(exc: BaseException, surface: str) -> ProviderError | SkippedByOutcome | None:
    if isinstance(exc, HostSkip):
        return SkippedByOutcome(f"the {surface} skipped: {exc}")
    return None


def test_a_host_outcome_in_the_provider_ends_only_that_attempt(dataset: Dataset) -> None:
    runner = AttemptRunner(
        _pipeline(dataset),
        as_provider(Calls(HostSkip("not today"))),
        mode=Mode.LIVE,
        host_outcomes=(HostSkip,),
        classify=_classify,
    )
    outcome = runner.run(_case(dataset), 1, "m")
    assert outcome.status is Status.SKIPPED
    assert outcome.record.skip_reason == "the provider skipped: not today"


def test_a_host_outcome_in_the_judge_is_the_judges_fault_only(dataset: Dataset) -> None:
    judge = Judge(as_provider(Calls(HostSkip("judge away"))), "judge-model", DEFAULT_RUBRIC)
    runner = AttemptRunner(
        _pipeline(dataset),
        FixtureProvider(dataset.dir),
        judge=judge,
        host_outcomes=(HostSkip,),
        classify=_classify,
    )
    outcome = runner.run(_case(dataset), 1, None)
    assert outcome.status is Status.PASS  # the hard verdict stands
    assert outcome.record.judge is not None
    assert outcome.record.judge.error == "JUDGE_ERROR: SKIPPED: the judge skipped: judge away"


def test_what_is_no_exception_ends_only_its_attempt(dataset: Dataset) -> None:
    """A library's sys.exit(), asyncio's CancelledError, an app's own BaseException: an
    ERROR of the provider's attempt and a fault of the judge's result (the hard verdict
    stands); never the run. Ctrl-C (KeyboardInterrupt) still ends the run."""
    import asyncio

    for raised in (SystemExit(3), asyncio.CancelledError(), HostSkip("unknown to the host")):
        runner = AttemptRunner(_pipeline(dataset), as_provider(Calls(raised)), mode=Mode.LIVE)
        outcome = runner.run(_case(dataset), 1, "m")
        assert outcome.status is Status.ERROR, raised
        assert outcome.record.error_kind == "PROVIDER_ERROR"
        assert type(raised).__name__ in (outcome.record.error_message or "")
        judged = AttemptRunner(
            _pipeline(dataset),
            FixtureProvider(dataset.dir),
            judge=Judge(as_provider(Calls(raised)), "judge-model", DEFAULT_RUBRIC),
        ).run(_case(dataset), 1, None)
        assert judged.status is Status.PASS
        assert judged.record.judge is not None
        assert (judged.record.judge.error or "").startswith("JUDGE_ERROR:"), judged.record.judge
    runner = AttemptRunner(
        _pipeline(dataset), as_provider(Calls(KeyboardInterrupt())), mode=Mode.LIVE
    )
    with pytest.raises(KeyboardInterrupt):
        runner.run(_case(dataset), 1, "m")


def test_settle_keeps_a_lone_surrogate_out_of_the_run(dataset: Dataset) -> None:
    runner = AttemptRunner(_pipeline(dataset), FixtureProvider(dataset.dir))
    settled = runner.settle(_case(dataset), 1, "m", Answer(text="cut \ud83d"))
    assert isinstance(settled, Answer)
    assert settled.text == "cut ?" and settled.model == "m"
