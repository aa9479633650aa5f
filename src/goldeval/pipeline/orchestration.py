"""One attempt from start to finish: deadline and budget → provider call → screening →
graders → judge, ending in a typed :class:`AttemptOutcome`.

Pure of pytest (the import-linter contracts forbid it here): a host (the pytest plugin) hands
plain inputs — the pipeline (dataset, graders, retriever), the provider, the judge, the budget
and the deadline — and turns the outcome into its own (pytest's pass, skip or fail). A host
whose callables may raise its own outcome exceptions (``pytest.fail`` or ``pytest.skip`` in a
provider, a timeout plugin's failure) names them in ``host_outcomes`` and says what each makes
of the attempt through ``classify``; without them only a ProviderError ends an attempt.

The two phases stay apart because pytest reports them apart: :meth:`AttemptRunner.call` and
:meth:`AttemptRunner.settle` are the item's setup (an infrastructure fault is a pytest ERROR),
:meth:`AttemptRunner.grade` its call (a quality FAIL). :meth:`AttemptRunner.run` is both.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from goldeval.core.errors import RERUN_HINT, ProviderError
from goldeval.core.models import (
    MAX_TOKEN_COUNT,
    AttemptRecord,
    JudgeRecord,
    Mode,
    Status,
    shown_count,
    token_count_problem,
)
from goldeval.core.settings import ProviderSettings
from goldeval.dataset.case import GoldenCase
from goldeval.pipeline.attempt import Pipeline, failure_message
from goldeval.providers.base import Answer, Provider, error_from_exception, resolve
from goldeval.providers.budget import Budget, estimate_usage
from goldeval.providers.fixture import FixtureProvider, answer_sidecar

#: errorKind of an attempt whose grading ran a second time in one process (a rerun plugin).
RERUN_KIND = "RERUN"

_T = TypeVar("_T")


@dataclass(frozen=True)
class SkippedByOutcome:
    """A host's skip inside a call (``pytest.skip()``): the attempt is SKIPPED with this
    reason."""

    reason: str


@dataclass(frozen=True)
class NotStarted:
    """The call was not started: ``deadline`` (the run's deadline had passed) or ``budget``
    (the cost/token budget was spent)."""

    reason: str


DEADLINE_PASSED = NotStarted("deadline")
BUDGET_SPENT = NotStarted("budget")

#: What one provider call gave: the answer, or why there is none. Futures keep any of them.
CallResult = Answer | ProviderError | SkippedByOutcome | NotStarted | BaseException
#: What a host's outcome exception raised during the named call (provider, retriever, grader,
#: judge) makes of the attempt; None when the exception is not (and was not raised from) one.
Classify = Callable[[BaseException, str], "ProviderError | SkippedByOutcome | None"]


class AttemptJudge(Protocol):
    def judge(
        self, case: GoldenCase, record: AttemptRecord, answer: Answer, retrieved: list[str]
    ) -> Any: ...


@dataclass
class AttemptOutcome:
    """How one attempt ended: its record, and the text a host shows for it (the failure's
    violations, the ERROR, the skip reason; empty for a PASS)."""

    record: AttemptRecord
    message: str = ""
    #: ``deadline`` or ``budget`` when the provider call was never started.
    not_started: str | None = None
    #: The graders ran (PASS or FAIL): a verdict, not an ERROR or a skip.
    graded: bool = False

    @property
    def status(self) -> Status:
        return self.record.status


def _no_host_outcome(exc: BaseException, surface: str) -> ProviderError | SkippedByOutcome | None:
    return None


class AttemptRunner:
    """Runs the attempts of one pipeline against one provider (thread-safe :meth:`call`, so a
    host may start several calls ahead; :meth:`grade` runs one attempt at a time)."""

    def __init__(
        self,
        pipeline: Pipeline,
        provider: Provider,
        *,
        mode: Mode = Mode.FIXTURE,
        provider_settings: ProviderSettings | None = None,
        judge: AttemptJudge | None = None,
        budget: Budget | None = None,
        deadline_at: float | None = None,
        graded: set[Hashable] | None = None,
        host_outcomes: tuple[type[BaseException], ...] = (),
        classify: Classify = _no_host_outcome,
    ) -> None:
        self.pipeline = pipeline
        self.provider = provider
        self.mode = mode
        self.provider_settings = provider_settings
        self.judge = judge
        self.budget = budget if budget is not None else Budget()
        #: ``time.monotonic()`` after which no call starts (None: no deadline).
        self.deadline_at = deadline_at
        #: Keys of the attempts graded so far (shared by every runner of a session): a key
        #: graded twice is a rerun, an ERROR.
        self.graded: set[Hashable] = graded if graded is not None else set()
        self.host_outcomes = host_outcomes
        self.classify = classify
        #: What ends an attempt as ERROR or SKIPPED around a call.
        self._ends: tuple[type[BaseException], ...] = (ProviderError, *host_outcomes)

    # -- setup: the provider call ----------------------------------------------------------

    def call(self, case: GoldenCase, attempt: int, model: str | None) -> CallResult:
        """One provider call; returns the Answer or why there is none (never raises for a
        fault of the call: futures keep either)."""
        if self.deadline_at is not None and time.monotonic() > self.deadline_at:
            return DEADLINE_PASSED
        budget = self.budget
        if budget.active and budget.exhausted():
            return BUDGET_SPENT
        pipeline, provider = self.pipeline, self.provider
        start = time.perf_counter()
        try:
            # Inside the try: a prompt template that fails to render is a TEMPLATE_ERROR; the
            # retriever runs here too (its first call for this case).
            req = pipeline.request(case, attempt, model)
        except self._ends as exc:
            return timed(self.classify(exc, "retriever") or exc, start)
        try:
            answer: CallResult = resolve(provider.complete(req))
        except self._ends as exc:
            return timed(self.classify(exc, "provider") or exc, start)
        except KeyboardInterrupt:
            raise  # Ctrl-C, or the plugin's own stop: the run's, not this attempt's
        except BaseException as exc:
            # A Provider subclass's own exception, classified as a callable's; also what is no
            # Exception (a library's sys.exit(), CancelledError): it ends this attempt, never
            # the run (let through, pytest's fixture cache broke and later items were ERROR).
            return timed(error_from_exception(exc, provider.name or type(provider).__name__), start)
        if isinstance(answer, Answer) and self.mode is not Mode.FIXTURE:
            # No usage in the answer (a stream without it, a plain callable): estimated, so the
            # budget still sees the call and the run says the figure is an estimate.
            estimate_usage(answer, req, self.provider_settings, model)
            if budget.active:
                budget.spend_answer(answer)
        if not isinstance(answer, Answer) or isinstance(provider, FixtureProvider):
            # A replayed fixture is a committed file, screened when it was recorded: fixture
            # runs pay nothing for masking.
            return answer
        try:
            # Every answer enters the run here: masked before anything grades or keeps it.
            return pipeline.screen(case, answer)
        except ProviderError as exc:  # record mode refused an answer holding a secret
            exc.duration_ms = answer.duration_ms  # type: ignore[attr-defined]
            return exc

    def settle(
        self, case: GoldenCase, attempt: int, model: str | None, result: CallResult
    ) -> Answer | AttemptOutcome:
        """The answer to grade, or the outcome of an attempt that got none (SKIPPED: not
        started, or the call skipped; ERROR: the call failed)."""
        pipeline = self.pipeline
        if isinstance(result, SkippedByOutcome):
            record = pipeline.skipped_record(case, attempt, result.reason, model)
            return AttemptOutcome(record, result.reason)
        if isinstance(result, NotStarted):
            record = pipeline.skipped_record(case, attempt, result.reason, model)
            if result.reason == "deadline":
                message = "deadline: attempt not started before --golden-deadline"
            else:
                self.budget.skipped += 1
                message = f"budget: attempt not started, spent {self.budget.describe()}"
            return AttemptOutcome(record, message, not_started=result.reason)
        if isinstance(result, ProviderError):
            elapsed = getattr(result, "duration_ms", 0)
            record = pipeline.error_record(case, attempt, result, model, elapsed)
            record.queue_ms = getattr(result, "queue_ms", None)
            return AttemptOutcome(record, _setup_error_message(case, attempt, result, record))
        if isinstance(result, BaseException):
            raise result  # an outcome of the host's that the classifier did not map
        answer = result
        usage = _usage_out_of_range(answer)
        if usage is not None:  # an app's Answer(input_tokens=10**30): no count, unstorable
            error = ProviderError("PARSER_ERROR", usage)
            record = pipeline.error_record(case, attempt, error, model, answer.duration_ms)
            return AttemptOutcome(record, _setup_error_message(case, attempt, error, record))
        if answer.text is not None and not _utf8_clean(answer.text):
            # A lone surrogate (a model cut mid-emoji, a broken app) cannot be written as UTF-8
            # anywhere downstream: grade and store the text with it replaced.
            answer.text = answer.text.encode("utf-8", "replace").decode("utf-8")
        if answer.model is None:
            answer.model = model
        return answer

    # -- call: grading ---------------------------------------------------------------------

    def grade(
        self,
        case: GoldenCase,
        attempt: int,
        answer: Answer,
        model: str | None,
        key: Hashable | None = None,
    ) -> AttemptOutcome:
        """Grade with the graders (a FAIL lists its violations), then the judge (soft: its
        fault is recorded on its result, the hard verdict stands). ``key`` names the attempt
        for the rerun check: grading one key twice is an ERROR, never a silent second try."""
        if key is not None:
            if key in self.graded:
                return self.rerun_outcome(case, attempt, model)
            self.graded.add(key)
        pipeline = self.pipeline
        try:
            record = pipeline.grade(case, attempt, answer, model)
        except self._ends as exc:
            # A grader crashed, called the host's fail/skip or ran into a timeout: never a
            # quality FAIL, never a pass.
            ended = self.classify(exc, "grader") or exc
            if isinstance(ended, SkippedByOutcome):
                skipped = pipeline.skipped_record(case, attempt, ended.reason, model)
                return AttemptOutcome(skipped, ended.reason)
            if not isinstance(ended, ProviderError):
                raise
            record = pipeline.error_record(case, attempt, ended, model)
            return AttemptOutcome(
                record,
                f"golden case {case.id} attempt {attempt}: ERROR {ended.kind}: {ended.message}",
            )
        if self.mode is Mode.RECORD:
            # Tool calls, finish reason and usage go to the fixture's JSON sidecar.
            record.recorded_answer = answer_sidecar(answer)
        if self.judge is not None:
            self._judge(case, record, answer)
        message = failure_message(record) if record.status is Status.FAIL else ""
        return AttemptOutcome(record, message, graded=True)

    def _judge(self, case: GoldenCase, record: AttemptRecord, answer: Answer) -> None:
        assert self.judge is not None
        try:
            self.judge.judge(case, record, answer, self.pipeline.retrieve(case))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            # The judge is soft: its fault is recorded on its result, the hard verdict stands
            # (docs/methodology.md), also when the fault is a host outcome, a timeout or a
            # judge's sys.exit().
            fault = self.classify(exc, "judge") if isinstance(exc, self.host_outcomes) else None
            what = (
                f"SKIPPED: {fault.reason}"
                if isinstance(fault, SkippedByOutcome)
                else fault or error_from_exception(exc, "the judge")
            )
            record.judge = JudgeRecord(decision="PENDING", error=f"JUDGE_ERROR: {what}")

    def rerun_outcome(self, case: GoldenCase, attempt: int, model: str | None) -> AttemptOutcome:
        """A rerun plugin (flaky, a rerun marker) graded this attempt again: the earlier try
        is hidden or would be overwritten. An ERROR the run is refused for."""
        message = (
            f"golden case {case.id} attempt {attempt} ran its call phase again in one "
            f"session (a rerun plugin such as flaky or pytest-rerunfailures): {RERUN_HINT}"
        )
        record = AttemptRecord(
            case_id=case.id,
            index=attempt,
            model=model,
            status=Status.ERROR,
            error_kind=RERUN_KIND,
            error_message=message,
        )
        return AttemptOutcome(record, message)

    def run(
        self, case: GoldenCase, attempt: int, model: str | None, key: Hashable | None = None
    ) -> AttemptOutcome:
        """The whole attempt: call, settle, grade."""
        settled = self.settle(case, attempt, model, self.call(case, attempt, model))
        if isinstance(settled, AttemptOutcome):
            return settled
        return self.grade(case, attempt, settled, model, key)


def _usage_out_of_range(answer: Answer) -> str | None:
    """Why the answer's token counts are no counts, else None. The HTTP providers and
    fixture sidecars check theirs as they read them; an app's own Answer is checked here,
    where every answer is settled."""
    for name, value in (("input", answer.input_tokens), ("output", answer.output_tokens)):
        if value is not None and token_count_problem(value) is not None:
            return (
                f"the answer reports {shown_count(value)} {name} tokens: not a count from 0 to "
                f"{MAX_TOKEN_COUNT:,}"
            )
    return None


def timed(outcome: _T, start: float) -> _T:
    """A ProviderError with the time it took (the HTTP providers set their own)."""
    if isinstance(outcome, ProviderError) and getattr(outcome, "duration_ms", None) is None:
        outcome.duration_ms = max(1, round((time.perf_counter() - start) * 1000))  # type: ignore[attr-defined]
    return outcome


def _setup_error_message(
    case: GoldenCase, attempt: int, error: ProviderError, record: AttemptRecord
) -> str:
    return (
        f"golden case {case.id} attempt {attempt}: ERROR {error.kind} after "
        f"{error.tries} tr{'y' if error.tries == 1 else 'ies'}: "
        f"{record.error_message}\n"
        + (
            "(infrastructure, not a quality verdict: retry the run)"
            if error.retryable
            else "(not a quality verdict; retrying will not help: change the model, "
            "configuration or row)"
        )
    )


def _utf8_clean(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
