"""One attempt through the pipeline: prompt → provider → retriever → graders → record.

Pure of pytest: the plugin calls these from fixtures and the test function, and the same code
serves live, record and fixture modes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from goldeval.core.errors import ProviderError
from goldeval.core.models import AttemptRecord, CaseInfo, GraderOutcome, Status, TokenUsage
from goldeval.core.textsafe import one_line
from goldeval.dataset.case import GoldenCase
from goldeval.dataset.pack import CONTEXT_PARTS, PROMPT_PARTS
from goldeval.dataset.rows import Dataset
from goldeval.graders.base import GradeContext, Grader
from goldeval.graders.budget import GraderTimeout, budget
from goldeval.graders.contract import ContractGrader
from goldeval.graders.retrieval import grade_retrieval
from goldeval.providers.base import Answer, ProviderRequest

SYSTEM_INTRO = "Ты QA-агент в AI-first workflow. Соблюдай rules, skill, RAG и ADR."


class Retriever(Protocol):
    def retrieve(self, query: str) -> list[str]: ...


class NoRetriever:
    """For datasets without a pack: nothing is retrieved, retrieval is not graded."""

    def retrieve(self, query: str) -> list[str]:
        return []


def as_retriever(value: Any) -> Retriever:
    if hasattr(value, "retrieve"):
        return value  # type: ignore[no-any-return]
    if callable(value):
        func: Callable[[str], Sequence[str]] = value

        class _Wrapped:
            def retrieve(self, query: str) -> list[str]:
                return list(func(query))

        return _Wrapped()
    raise TypeError(f"golden_retriever must have .retrieve(query) or be callable, got {value!r}")


def case_facts(case: GoldenCase) -> dict[str, Any]:
    """``case_info(case).dump()`` built directly: the controller makes one per case at the
    end of a run, and the model round trip cost more than the rest of the roll-up."""
    return {
        "caseId": case.id,
        "kinds": case.kinds,
        "prompt": case.prompt,
        "tags": list(case.tags),
        "red": case.red,
        "line": case.line,
    }


def case_info(case: GoldenCase) -> CaseInfo:
    return CaseInfo(
        case_id=case.id,
        kinds=case.kinds,
        prompt=case.prompt,
        tags=list(case.tags),
        red=case.red,
        line=case.line,
    )


@dataclass
class Pipeline:
    dataset: Dataset
    graders: list[Grader]
    retriever: Retriever
    model: str | None = None
    _retrieved: dict[str, list[str]] = field(default_factory=dict)

    def retrieve(self, case: GoldenCase) -> list[str]:
        if case.refuse:
            return []
        cached = self._retrieved.get(case.id)
        if cached is None:
            cached = list(self.retriever.retrieve(case.prompt))
            self._retrieved[case.id] = cached
        return cached

    def system_prompt(self, case: GoldenCase, retrieved: Sequence[str]) -> str:
        """Reference 3.8: intro, rules, skill; then context, ADR and the retrieved chunks."""
        pack = self.dataset.pack
        if pack is None:
            return ""
        parts = [SYSTEM_INTRO]
        parts += [t for t in (pack.text(p) for p in PROMPT_PARTS) if t is not None]
        if not case.refuse:
            parts += [t for t in (pack.text(p) for p in CONTEXT_PARTS) if t is not None]
            for chunk_id in retrieved:
                chunk = pack.chunk(chunk_id)
                if chunk is not None:
                    parts.append(f"### RAG id={chunk_id}\n{chunk.text}")
        return "\n\n".join(parts)

    def request(self, case: GoldenCase, attempt: int, model: str | None) -> ProviderRequest:
        retrieved = self.retrieve(case)
        return ProviderRequest(
            case=case,
            attempt=attempt,
            system=lambda: self.system_prompt(case, retrieved),
            user=case.prompt,
            model=model,
            retrieved=retrieved,
        )

    # -- records ---------------------------------------------------------------------------

    def _base(self, case: GoldenCase, attempt: int, model: str | None) -> dict[str, Any]:
        return {"case_id": case.id, "index": attempt, "model": model}

    def retrieval_for(self, case: GoldenCase) -> Any:
        if case.refuse or "rag" not in case.expect:
            return grade_retrieval(True, [], []) if case.refuse else None
        return grade_retrieval(False, case.expected_rag, self.retrieve(case))

    def grade(
        self, case: GoldenCase, attempt: int, answer: Answer, model: str | None
    ) -> AttemptRecord:
        start = time.perf_counter()
        retrieved = self.retrieve(case)
        ctx = GradeContext(
            case=case,
            answer=answer,
            retrieved=retrieved,
            pack=self.dataset.pack,
            options=self.dataset.manifest.grader_options,
        )
        contract = None
        outcomes: list[GraderOutcome] = []
        hard_failed = False
        modes = self.dataset.grader_modes
        for grader in self.graders:
            mode = modes.get(grader.name, "hard" if grader.hard else "soft")
            if mode == "off" or not grader.applies(case):
                continue
            if isinstance(grader, ContractGrader):
                try:
                    with budget(grader.name):
                        contract = grader.contract(ctx)
                except GraderTimeout as exc:
                    raise ProviderError("GRADER_TIMEOUT", str(exc)) from None
                if mode == "hard" and not contract.passed:
                    hard_failed = True
                continue
            try:
                # Each grader call gets a time budget for the user patterns it evaluates.
                with budget(grader.name):
                    outcome = grader.grade(ctx)
            except GraderTimeout as exc:  # over budget: an ERROR no retry fixes (exit 4)
                raise ProviderError("GRADER_TIMEOUT", str(exc)) from None
            except Exception as exc:  # a grader bug must not masquerade as a model failure
                raise ProviderError(
                    "GRADER_ERROR", f"grader {grader.name} raised {type(exc).__name__}: {exc}"
                ) from exc
            outcome.hard = mode == "hard"
            outcomes.append(outcome)
            if outcome.hard and not outcome.passed:
                hard_failed = True
        retrieval = self.retrieval_for(case)
        if retrieval is not None and retrieval.applicable and not retrieval.passed:
            hard_failed = True
        grading_ms = max(1, round((time.perf_counter() - start) * 1000))
        duration = answer.duration_ms if answer.duration_ms > 0 else grading_ms
        total = None
        if answer.input_tokens is not None or answer.output_tokens is not None:
            total = (answer.input_tokens or 0) + (answer.output_tokens or 0)
        return AttemptRecord(
            **self._base(case, attempt, model or answer.model),
            status=Status.FAIL if hard_failed else Status.PASS,
            contract=contract,
            retrieval=retrieval,
            graders=outcomes,
            tokens=TokenUsage(
                input_tokens=answer.input_tokens,
                output_tokens=answer.output_tokens,
                total_tokens=total,
                estimated_cost=answer.cost,
            ),
            duration_ms=duration,
            tries=answer.tries,
            queue_ms=answer.queue_ms,
            ttft_ms=answer.ttft_ms,
            output=answer.text,
        )

    def error_record(
        self,
        case: GoldenCase,
        attempt: int,
        error: ProviderError,
        model: str | None,
        duration_ms: int = 0,
    ) -> AttemptRecord:
        return AttemptRecord(
            **self._base(case, attempt, model),
            status=Status.ERROR,
            retrieval=self.retrieval_for(case),
            error_kind=error.kind,
            error_message=error.message,
            tries=error.tries,
            duration_ms=duration_ms,
        )

    def skipped_record(
        self, case: GoldenCase, attempt: int, reason: str, model: str | None
    ) -> AttemptRecord:
        return AttemptRecord(
            **self._base(case, attempt, model),
            status=Status.SKIPPED,
            retrieval=self.retrieval_for(case),
            skip_reason=reason,
            error_message=reason,
        )


def failure_message(record: AttemptRecord) -> str:
    """Readable failure text for pytest/JUnit: one line per violation, grader named.

    Violation reasons quote the answer, and pytest prints this text: each line goes through
    goldeval.core.textsafe (escape sequences, ``\\r``, bidi overrides shown escaped, one line each).
    """
    lines = [f"golden case {record.case_id} attempt {record.index}: FAIL"]
    if record.contract is not None:
        for v in record.contract.taxonomy:
            lines.append(f"  [{v.category}/{v.severity.value}] {v.grader}: {one_line(v.reason)}")
    if record.retrieval is not None and record.retrieval.applicable and not record.retrieval.passed:
        r = record.retrieval
        lines.append(
            "  "
            + one_line(
                f"[RETRIEVAL/HIGH] RetrievalGrader: retrieved {r.retrieved} != expected "
                f"{r.expected} (missing {r.missing}, unexpected {r.unexpected})"
            )
        )
    for g in record.graders:
        if g.hard and not g.passed:
            for v in g.violations:
                lines.append(
                    f"  [{v.category}/{v.severity.value}] {one_line(v.grader)}: "
                    f"{one_line(v.reason)}"
                )
            if not g.violations:
                lines.append(f"  {one_line(g.grader)}: failed")
    return "\n".join(lines)
