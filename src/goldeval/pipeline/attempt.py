"""One attempt through the pipeline: prompt → provider → retriever → graders → record.

Pure of pytest: the plugin calls these from fixtures and the test function, and the same code
serves live, record and fixture modes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from goldeval.core.errors import SECRET_IN_ANSWER, ProviderError
from goldeval.core.models import (
    AttemptRecord,
    CaseInfo,
    ContractResult,
    GraderOutcome,
    Status,
    TokenUsage,
)
from goldeval.core.secrets import SecretMasker
from goldeval.core.textsafe import one_line
from goldeval.dataset.case import GoldenCase
from goldeval.dataset.profiles import JAVA_SYSTEM_INTRO, Profile, get_profile
from goldeval.dataset.request import merge_request
from goldeval.dataset.rows import Dataset
from goldeval.dataset.templates import CompiledTemplates, TemplateProblem
from goldeval.dataset.variants import Variant
from goldeval.graders.applicability import Applicability
from goldeval.graders.base import GradeContext, Grader
from goldeval.graders.budget import GraderTimeout, budget, grader_timeout
from goldeval.graders.contract import ContractGrader
from goldeval.graders.retrieval import grade_retrieval
from goldeval.pipeline.truncation import truncation_outcome
from goldeval.providers.base import Answer, ProviderRequest, masked_answer

#: The java-autotest profile's system prompt intro (kept here under its old name).
SYSTEM_INTRO = JAVA_SYSTEM_INTRO
#: The violation kind of an answer cut at the token limit (finish_reason ``length``).


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
    #: The session's secrets (goldeval.core.secrets): masked in every answer by :meth:`screen`
    #: and in every error message (AttemptRunner.call skips replayed fixtures).
    masker: SecretMasker = field(default_factory=SecretMasker)
    #: Record mode: an answer that held a secret is an ERROR (SECRET_IN_ANSWER), not a fixture.
    refuse_secrets: bool = False
    #: The manifest variant this pipeline answers for: its prompt parts replace the
    #: manifest's, and its name goes on every request (goldeval.dataset.variants).
    variant: Variant | None = None
    _retrieved: dict[str, list[str]] = field(default_factory=dict)
    _templates: CompiledTemplates | None = field(default=None, init=False)
    _profile: Profile | None = field(default=None, init=False)
    _applicability: Applicability = field(init=False)
    #: (grader, "hard" | "soft") of each grader the manifest does not switch off, in order.
    _modes: list[tuple[Grader, str]] = field(init=False)
    #: Seconds each grader call may spend in patterns (GOLDEVAL_GRADER_TIMEOUT), read once:
    #: reading the environment for every grader call of every attempt showed in profiles.
    _grader_seconds: float = field(init=False)

    def __post_init__(self) -> None:
        manifest = self.dataset.manifest
        self._templates = (
            manifest.templates()
            if self.variant is None
            else self.variant.templates(manifest.prompt)
        )
        self._profile = get_profile(self.dataset.manifest.profile)
        modes = self.dataset.grader_modes
        self._modes = [
            (g, mode)
            for g in self.graders
            if (mode := modes.get(g.name, "hard" if g.hard else "soft")) != "off"
        ]
        self._applicability = Applicability([g for g, _ in self._modes])
        self._grader_seconds = grader_timeout()

    def retrieve(self, case: GoldenCase) -> list[str]:
        if case.refuse:
            return []
        cached = self._retrieved.get(case.id)
        if cached is None:
            try:
                cached = list(self.retriever.retrieve(case.prompt))
            except (KeyboardInterrupt, ProviderError):
                raise
            except BaseException as exc:  # see _foreign_error
                raise _foreign_error("RETRIEVER_ERROR", "the retriever", exc) from exc
            self._retrieved[case.id] = cached
        return cached

    def system_prompt(self, case: GoldenCase, retrieved: Sequence[str]) -> str:
        """The manifest's ``prompt.system`` template, else the profile's default: for
        java-autotest reference 3.8 (intro, rules, skill; then context, ADR and the retrieved
        chunks), for generic the retrieved chunks, if any."""
        pack = self.dataset.pack
        if self._templates is not None and self._templates.has("system"):
            return self._templates.render("system", case, self._chunks(retrieved), pack)
        if pack is None:
            return ""
        profile = self._profile
        assert profile is not None
        parts = [profile.system_intro] if profile.system_intro else []
        parts += [t for t in (pack.text(p) for p in profile.prompt_parts) if t is not None]
        if not case.refuse:
            parts += [t for t in (pack.text(p) for p in profile.context_parts) if t is not None]
            for chunk_id in retrieved:
                chunk = pack.chunk(chunk_id)
                if chunk is not None:
                    parts.append(f"### RAG id={chunk_id}\n{chunk.text}")
        return "\n\n".join(parts)

    def _chunks(self, retrieved: Sequence[str]) -> list[dict[str, Any]]:
        pack = self.dataset.pack
        out = []
        for chunk_id in retrieved:
            chunk = pack.chunk(chunk_id) if pack is not None else None
            out.append(
                {
                    "id": chunk_id,
                    "heading": chunk.heading if chunk else "",
                    "text": chunk.text if chunk else "",
                }
            )
        return out

    def user_prompt(self, case: GoldenCase, retrieved: Sequence[str]) -> str:
        """The ``prompt.user`` template, else the row's prompt (a conversation row's last
        user text: the template does not apply to its turns)."""
        if case.messages is None and self._templates is not None and self._templates.has("user"):
            return self._templates.render("user", case, self._chunks(retrieved), self.dataset.pack)
        return case.prompt

    def options(self, case: GoldenCase) -> dict[str, Any]:
        """The request options of ``case``: the manifest's, then the variant's, the row's."""
        own = self.variant.options if self.variant is not None else None
        base = merge_request(self.dataset.manifest.request or {}, own or {})
        return merge_request(base, case.request)

    def messages(self, case: GoldenCase, retrieved: Sequence[str]) -> list[dict[str, Any]] | None:
        """A conversation row's turns, the system prompt first unless the row has its own
        system turn; None for a prompt row (the provider sends system + user)."""
        if case.messages is None:
            return None
        turns = list(case.messages)
        if not any(t.get("role") == "system" for t in turns):
            system = self.system_prompt(case, retrieved)
            if system:
                turns.insert(0, {"role": "system", "content": system})
        return turns

    def rendered(self, case: GoldenCase) -> list[dict[str, Any]] | None:
        """The messages sent for ``case`` as reports show them (only for rows that use a
        template or a conversation: the reference prompt is the row's)."""
        if self._templates is None and case.messages is None:
            return None
        retrieved = self.retrieve(case)
        try:
            turns = self.messages(case, retrieved)
            if turns is None:
                system = self.system_prompt(case, retrieved)
                turns = ([{"role": "system", "content": system}] if system else []) + [
                    {"role": "user", "content": self.user_prompt(case, retrieved)}
                ]
        except TemplateProblem:
            return None
        return [_shown_turn(t) for t in turns]

    def request(self, case: GoldenCase, attempt: int, model: str | None) -> ProviderRequest:
        """The provider request; a template that fails to render is a TEMPLATE_ERROR (the
        attempt is an ERROR, not a quality verdict)."""
        retrieved = self.retrieve(case)
        try:
            user = self.user_prompt(case, retrieved)
            messages = self.messages(case, retrieved)
            system: str | Callable[[], str]
            if self._templates is not None and self._templates.has("system"):
                system = self.system_prompt(case, retrieved)
            else:
                system = lambda: self.system_prompt(case, retrieved)  # noqa: E731
        except TemplateProblem as exc:
            owner = f"variant {self.variant.name!r}'s " if self.variant is not None else ""
            raise ProviderError(
                "TEMPLATE_ERROR",
                f"{owner}{exc.field} of {self.dataset.manifest_path.name} for row {case.id} "
                f"(line {case.line}): {exc.message}",
            ) from None
        return ProviderRequest(
            case=case,
            attempt=attempt,
            system=system,
            user=user,
            model=model,
            retrieved=retrieved,
            options=self.options(case),
            messages=messages,
            variant=self.variant.name if self.variant is not None else None,
        )

    def screen(self, case: GoldenCase, answer: Answer) -> Answer:
        """The provider's answer as the run may keep it: every secret the run knows masked
        (text, tool-call arguments, model, finish reason), before anything grades, stores,
        reports or records it. The graders read the masked answer: a row's expectations never
        contain the run's live key, and graders that send the answer on (judge, embeddings)
        must not carry it to another server.

        In record mode an answer that held a secret raises ``ProviderError(SECRET_IN_ANSWER)``
        (an ERROR no retry fixes, exit 4): its fixture would put the key into a file meant for
        git, and a fixture with ``***`` in place of the key would not be what the model said.
        """
        masked = masked_answer(answer, self.masker)
        if masked is not answer and self.refuse_secrets:
            raise ProviderError(
                SECRET_IN_ANSWER,
                f"the answer for row {case.id} (line {case.line}) contains a credential this "
                "run uses (API key, token or password, masked here); record mode writes no "
                "fixture for the row: find why the model or app echoes it (a prompt or pack "
                "document holding it, a proxy repeating headers) and record again",
                tries=answer.tries,
            )
        return masked

    # -- records ---------------------------------------------------------------------------

    def _base(self, case: GoldenCase, attempt: int, model: str | None) -> dict[str, Any]:
        return {"case_id": case.id, "index": attempt, "model": model}

    def retrieval_for(self, case: GoldenCase) -> Any:
        if case.refuse or "rag" not in case.expect:
            return grade_retrieval(True, [], []) if case.refuse else None
        return grade_retrieval(False, case.expected_rag, self.retrieve(case))

    def _retrieval_of_unanswered(self, case: GoldenCase) -> Any:
        """Retrieval for an ERROR or SKIPPED record; none when the retriever itself failed."""
        try:
            return self.retrieval_for(case)
        except ProviderError:
            return None

    def grade(
        self, case: GoldenCase, attempt: int, answer: Answer, model: str | None
    ) -> AttemptRecord:
        start = time.perf_counter()
        ctx = GradeContext(
            case=case,
            answer=answer,
            retrieved=self.retrieve(case),
            pack=self.dataset.pack,
            options=self.dataset.manifest.grader_options,
        )
        contract, outcomes, hard_failed = self._run_graders(case, ctx)
        truncated = truncation_outcome(
            case.id, answer.finish_reason, self.dataset.manifest.truncated
        )
        if truncated is not None:
            outcomes.append(truncated)
            hard_failed = hard_failed or truncated.hard
        retrieval = self.retrieval_for(case)
        if retrieval is not None and retrieval.applicable and not retrieval.passed:
            hard_failed = True
        grading_ms = max(1, round((time.perf_counter() - start) * 1000))
        # ``model`` is the run's model identity (the caller's): every record of a run carries
        # the same one, whatever name the answer gives, so one run is never split in two.
        return AttemptRecord(
            **self._base(case, attempt, model),
            status=Status.FAIL if hard_failed else Status.PASS,
            contract=contract,
            retrieval=retrieval,
            graders=outcomes,
            tokens=_token_usage(answer),
            served_model=answer.served_model,
            duration_ms=answer.duration_ms if answer.duration_ms > 0 else grading_ms,
            tries=answer.tries,
            queue_ms=answer.queue_ms,
            ttft_ms=answer.ttft_ms,
            output=answer.text,
            finish_reason=answer.finish_reason,
            prompt_messages=None if not hard_failed else self.rendered(case),
        )

    def _run_graders(
        self, case: GoldenCase, ctx: GradeContext
    ) -> tuple[ContractResult | None, list[GraderOutcome], bool]:
        """The contract and general graders that apply to ``case``, in configured order.

        Returns (contract result or None, the general graders' outcomes, whether a hard one
        failed).
        """
        contract: ContractResult | None = None
        outcomes: list[GraderOutcome] = []
        hard_failed = False
        flags = self._applicability.flags(case)
        for (grader, mode), applies in zip(self._modes, flags, strict=True):
            if not applies:
                continue
            if isinstance(grader, ContractGrader):
                try:
                    with budget(grader.name, self._grader_seconds):
                        contract = grader.contract(ctx)
                except GraderTimeout as exc:
                    raise ProviderError("GRADER_TIMEOUT", str(exc)) from None
                if mode == "hard" and not contract.passed:
                    hard_failed = True
                continue
            outcome = self._grade_one(grader, ctx)
            outcome.hard = mode == "hard"
            outcomes.append(outcome)
            if outcome.hard and not outcome.passed:
                hard_failed = True
        return contract, outcomes, hard_failed

    def _grade_one(self, grader: Grader, ctx: GradeContext) -> GraderOutcome:
        """One general grader's outcome; what it raises becomes an ERROR (exit 4)."""
        try:
            # Each grader call gets a time budget for the user patterns it evaluates.
            with budget(grader.name, self._grader_seconds):
                return grader.grade(ctx)
        except GraderTimeout as exc:  # over budget: an ERROR no retry fixes (exit 4)
            raise ProviderError("GRADER_TIMEOUT", str(exc)) from None
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # see _foreign_error
            raise _foreign_error("GRADER_ERROR", f"grader {grader.name}", exc) from exc

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
            retrieval=self._retrieval_of_unanswered(case),
            error_kind=error.kind,
            # The HTTP clients mask their own credentials; a plugin's provider may not.
            error_message=self.masker.mask_message(error.message),
            tries=error.tries,
            duration_ms=duration_ms,
        )

    def skipped_record(
        self, case: GoldenCase, attempt: int, reason: str, model: str | None
    ) -> AttemptRecord:
        return AttemptRecord(
            **self._base(case, attempt, model),
            status=Status.SKIPPED,
            retrieval=self._retrieval_of_unanswered(case),
            skip_reason=reason,
            error_message=reason,
        )


def _token_usage(answer: Answer) -> TokenUsage:
    """The answer's token counts and cost; the total only when at least one count is known."""
    total = None
    if answer.input_tokens is not None or answer.output_tokens is not None:
        total = (answer.input_tokens or 0) + (answer.output_tokens or 0)
    return TokenUsage(
        input_tokens=answer.input_tokens,
        output_tokens=answer.output_tokens,
        total_tokens=total,
        estimated_cost=answer.cost,
        estimated=answer.tokens_estimated or None,
    )


def _foreign_error(kind: str, who: str, exc: BaseException) -> ProviderError:
    """An ERROR for what a grader or retriever (the team's code) raised, chained to it:
    any BaseException but KeyboardInterrupt (Ctrl-C, the plugin's stop). pytest.fail/skip,
    CancelledError and ``sys.exit()`` end the attempt, never the run (let through, pytest's
    fixture cache broke). The pytest plugin maps pytest's outcomes from ``__cause__``."""
    return ProviderError(kind, f"{who} raised {type(exc).__name__}: {exc}")


def _shown_turn(turn: dict[str, Any]) -> dict[str, Any]:
    """A turn for reports: an image part by its file or a short note, never its bytes."""
    content = turn.get("content")
    if isinstance(content, list):
        shown = []
        for part in content:
            if part.get("type") == "image":
                shown.append({"type": "image", "path": part.get("path") or "(data URL)"})
            else:
                shown.append(part)
        return {**turn, "content": shown}
    return turn


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
