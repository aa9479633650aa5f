"""The LLM judge wired to a provider: a soft signal that never changes the hard verdict."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from goldeval.core import limits
from goldeval.core.errors import ProviderError
from goldeval.core.models import AttemptRecord, JudgeRecord, Status, TokenUsage
from goldeval.core.secrets import SecretMasker
from goldeval.core.settings import ProviderSettings
from goldeval.dataset.case import GoldenCase
from goldeval.judge.parse import (
    JudgeDecision,
    apply_contract_wins,
    build_judge_messages,
    judge_stability,
    parse_judge_output,
)
from goldeval.providers.base import Answer, Provider, ProviderRequest, masked_answer, resolve
from goldeval.providers.budget import Budget, estimate_usage

DEFAULT_RUBRIC = (
    "You grade one candidate answer against the case's expectations. Judge only what the "
    "expectations and the retrieved context support."
)


@dataclass
class Judge:
    """Calls the judge model for an attempt graded PASS or FAIL.

    Every call carries ``max_tokens`` (the verdict is a small JSON object: the
    ``judge_max_tokens`` limit, 512 unless ``--golden-judge-max-tokens`` says otherwise), so a
    judge that rambles cannot hold a one-slot server past the read timeout. Its tokens (the
    reported ones, else estimated) spend the run's ``budget``: judge calls of an attempt
    already started always run, so the budget stops the *next* attempts.
    """

    provider: Provider
    model: str | None
    rubric: str
    repetitions: int = 1
    max_tokens: int = int(limits.default("judge_max_tokens"))
    budget: Budget | None = None
    #: The judge's settings, for the price of estimated tokens (None: no price).
    settings: ProviderSettings | None = None
    #: The session's secrets: the judge's reply is stored (reasons, raw output) like an
    #: answer, so it is masked like one (goldeval.core.secrets).
    masker: SecretMasker = field(default_factory=SecretMasker)

    def judge(
        self, case: GoldenCase, record: AttemptRecord, answer: Answer, retrieved: Sequence[str]
    ) -> None:
        """Fill ``record.judge`` (and ``judge_stability``); refuse rows are not judged."""
        if case.refuse or record.status not in (Status.PASS, Status.FAIL):
            return
        system, user = build_judge_messages(
            self.rubric,
            case.id,
            case.prompt,
            case.expect,
            list(case.must_not),
            list(retrieved),
            answer.text or "",
        )
        decisions: list[JudgeDecision | None] = []
        last = None
        raw = None
        usage = _Usage()
        for n in range(1, self.repetitions + 1):
            request = ProviderRequest(
                case=case,
                attempt=record.index * 1000 + n,
                system=system,
                user=user,
                model=self.model,
                retrieved=list(retrieved),
                options={"max_tokens": self.max_tokens},
            )
            try:
                reply = resolve(self.provider.complete(request))
            except ProviderError as exc:
                # A judge fault is recorded apart: the attempt's hard verdict stands.
                after = f" after {exc.tries} tries" if exc.tries > 1 else ""
                record.judge = JudgeRecord(
                    decision="PENDING",
                    error=f"JUDGE_ERROR: {exc.kind}{after}: "
                    + self.masker.mask_message(exc.message),
                    tokens=usage.dump(),
                )
                return
            reply = masked_answer(reply, self.masker)
            self._spend(reply, request)
            usage.add(reply)
            raw = reply.text
            last = parse_judge_output(reply.text)
            decisions.append(last.decision)
        assert last is not None
        _, judged = apply_contract_wins(record.status is Status.PASS, last)
        assert judged is not None
        record.judge = JudgeRecord(
            decision=judged.decision.value,
            score=judged.score,
            reasons=list(judged.reasons),
            schema_valid=judged.schema_valid,
            override_attempted=judged.override_attempted or None,
            tokens=usage.dump(),
        )
        record.judge_output = raw
        if self.repetitions > 1:
            record.judge_stability = judge_stability(decisions)

    def _spend(self, reply: Answer, request: ProviderRequest) -> None:
        """Estimate the tokens of a reply without usage; count them against the budget."""
        estimate_usage(reply, request, self.settings, self.model)
        if self.budget is not None:
            self.budget.spend_answer(reply)


class _Usage:
    """The judge calls' tokens, summed over repetitions; unknown stays unknown."""

    def __init__(self) -> None:
        self.input: int | None = None
        self.output: int | None = None
        self.estimated = False

    def add(self, reply: Answer) -> None:
        if reply.input_tokens is not None:
            self.input = (self.input or 0) + reply.input_tokens
        if reply.output_tokens is not None:
            self.output = (self.output or 0) + reply.output_tokens
        self.estimated = self.estimated or reply.tokens_estimated

    def dump(self) -> TokenUsage | None:
        if self.input is None and self.output is None:
            return None
        return TokenUsage(
            input_tokens=self.input,
            output_tokens=self.output,
            total_tokens=(self.input or 0) + (self.output or 0),
            estimated=self.estimated or None,
        )
