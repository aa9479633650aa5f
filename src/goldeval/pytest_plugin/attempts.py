"""One golden item's attempt, as pytest sees it: setup asks the runner for the answer, the call
phase has it graded; each :class:`~goldeval.pipeline.orchestration.AttemptOutcome` becomes
pytest's outcome here (PASS returns, SKIPPED skips, FAIL and ERROR fail without a traceback).

Everything that completes the attempt (deadline, budget, provider call, screening, graders,
judge, rerun check) lives in :mod:`goldeval.pipeline.orchestration`; this module only chooses
the inputs (the session's fixtures, the model) and translates the outcome.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from goldeval.core.errors import GoldevalError
from goldeval.core.models import Status
from goldeval.dataset.case import GoldenCase
from goldeval.graders.base import Grader
from goldeval.pipeline.orchestration import AttemptOutcome, AttemptRunner, CallResult, timed
from goldeval.providers.base import Answer
from goldeval.pytest_plugin.outcomes import PYTEST_OUTCOMES, attempt_outcome
from goldeval.pytest_plugin.params import GoldenParam, param_of
from goldeval.pytest_plugin.variant_providers import provider_for_variant, settings_of

if TYPE_CHECKING:
    from goldeval.pytest_plugin.state import GoldenSession


@dataclass
class PendingAttempt:
    """An item between its setup (the answer obtained) and its call phase (graded)."""

    item: pytest.Item
    runner: AttemptRunner
    param: GoldenParam
    model: str | None
    #: None once graded: the answer is let go with the call phase (see grade_attempt).
    answer: Answer | None


def session_fixtures(state: GoldenSession, item: pytest.Item) -> tuple[Any, Any, list[Grader]]:
    """golden_provider, golden_retriever and golden_graders, looked up on the first item.

    Through the item's own fixture request, so conftest overrides apply as usual; the
    per-item fixtures take no ``request`` (see goldeval.pytest_plugin.fixtures), hence the
    attribute.
    """
    if state._fixtures is None:
        # No public way: the prefetch needs the session fixtures before the item's own setup
        # (pytest builds the request then). tests/unit/test_pytest_internals.py checks it.
        request = getattr(item, "_request", None)
        if not isinstance(request, pytest.FixtureRequest):
            raise GoldevalError(f"{item.nodeid}: pytest gave the item no fixture request")
        state._fixtures = (
            request.getfixturevalue("golden_provider"),
            request.getfixturevalue("golden_retriever"),
            request.getfixturevalue("golden_graders"),
        )
    return state._fixtures


def attempt_model(state: GoldenSession, param: GoldenParam) -> str | None:
    """The model an attempt of ``param`` is recorded under: its ``--golden-models`` entry,
    else the run's model. Every record of the session (graded, ERROR, SKIPPED, lost) carries
    it, so one session is never split into "models side by side"."""
    return param.model or state.settings.provider.model


def runner_for(
    state: GoldenSession,
    provider: Any,
    retriever: Any,
    graders: list[Grader],
    variant: str | None = None,
) -> AttemptRunner:
    """The session's runner for these fixture values and variant (one per provider,
    graders, retriever and variant: made on first use)."""
    provider_obj = state.provider_for(provider_for_variant(state, provider, variant))
    key = (id(provider_obj), id(graders), id(retriever), variant)
    runner = state._runners.get(key)
    if runner is None:
        runner = AttemptRunner(
            state.pipeline(graders, retriever, variant),
            provider_obj,
            mode=state.settings.mode,
            provider_settings=settings_of(state, variant),
            judge=state.judge(variant),
            budget=state.budget,
            deadline_at=state.deadline_at,
            graded=state.graded_items,
            host_outcomes=PYTEST_OUTCOMES,
            classify=attempt_outcome,
        )
        state._runners[key] = runner
    return runner


def obtain_answer(
    state: GoldenSession, item: pytest.Item, param: GoldenParam, case: GoldenCase
) -> PendingAttempt:
    """Setup phase: call the provider. Infrastructure faults become a pytest ERROR."""
    fixtures = session_fixtures(state, item)
    runner = runner_for(state, *fixtures, param.variant)
    collected = param
    if case is not param.case:  # golden_case was overridden in a conftest
        param = GoldenParam(case, param.attempt, param.model, param.variant)
    model = attempt_model(state, param)
    prefetch = state.prefetcher() if runner.provider.thread_safe else None
    start = time.perf_counter()
    outcome: CallResult
    try:
        # Prefetch only when this item's case is the collected one (no golden_case override).
        if prefetch is not None and collected is param:
            # Another item's answer goes through its own variant's runner (its prompt); all
            # are made here, in this thread, not in the prefetch pool's.
            runners = {param.variant: runner}
            for name in state.variants.names if state.variants is not None else ():
                runners[name] = runner_for(state, *fixtures, name)

            def compute(it: pytest.Item) -> CallResult:
                p = param_of(it)
                assert p is not None
                return runners[p.variant].call(p.case, p.attempt, attempt_model(state, p))

            def eligible(it: pytest.Item) -> bool:
                return param_of(it) is not None

            outcome = prefetch.answer(item, compute, eligible)
        else:
            outcome = runner.call(case, param.attempt, model)
    except PYTEST_OUTCOMES as exc:
        # pytest-timeout's signal method fired while this thread waited for the call (the
        # prefetch pool runs it): the attempt ends here, as an ERROR TIMEOUT.
        outcome = timed(attempt_outcome(exc, "provider") or exc, start)
    settled = runner.settle(case, param.attempt, model, outcome)
    if isinstance(settled, AttemptOutcome):
        if settled.not_started == "deadline":
            state.skipped_by_deadline += 1
        state.records[item] = settled.record
        to_pytest(settled)
    assert isinstance(settled, Answer)
    return PendingAttempt(item, runner, param, model, settled)


def grade_attempt(state: GoldenSession, pending: PendingAttempt) -> BaseException | None:
    """Call phase: grade with the hard graders. Returns pytest's outcome to raise (a FAIL shows
    its violations, no traceback), None for a PASS.

    Returned, not raised: the caller raises it from a frame that holds no answer. A failure's
    traceback keeps the frames it passed through alive, with their locals, as long as anything
    keeps the failure (pytest-rerunfailures keeps every item's; pytest keeps the last one for
    post-mortem): raised from here it kept the answer and its record, up to a provider body
    each (32 MiB), for every failing attempt of the session.
    """
    item, param = pending.item, pending.param
    answer, pending.answer = pending.answer, None
    if answer is None:
        # Graded already (a rerun plugin runs the call phase again): the runner reports the
        # rerun from the key without reading the answer.
        answer = Answer(text="")
    # The run's model identity (the answer may name the model that answered differently).
    outcome = pending.runner.grade(param.case, param.attempt, answer, pending.model, key=item)
    state.records[item] = outcome.record
    if outcome.graded:
        hook = item.config.hook.pytest_goldeval_attempt_graded
        if hook.get_hookimpls():
            hook(config=item.config, record=outcome.record.dump())
    return pytest_ending(outcome)


def pytest_ending(outcome: AttemptOutcome) -> BaseException | None:
    """The attempt's outcome as pytest's exception: None for a PASS, a skip for SKIPPED, a
    failure with the outcome's text for FAIL and ERROR (no traceback: the text is the
    report)."""
    if outcome.status is Status.PASS:
        return None
    if outcome.status is Status.SKIPPED:
        return pytest.skip.Exception(outcome.message)
    return pytest.fail.Exception(outcome.message, pytrace=False)


def to_pytest(outcome: AttemptOutcome) -> None:
    """Raise :func:`pytest_ending` of ``outcome``, if any."""
    ending = pytest_ending(outcome)
    if ending is not None:
        raise ending
