"""The ``truncated`` outcome: an answer the provider says is not whole (goldeval.pipeline)."""

from __future__ import annotations

from goldeval.core.models import GraderOutcome, Severity, Violation

TRUNCATED = "TRUNCATED"

#: Finish reasons of an answer that is not whole, and the violation each gets (the
#: manifest's ``truncated`` says how hard): a content filter cuts an answer as surely as
#: the token limit (it passed as a whole answer).
CUT_ANSWERS = {
    "length": "the answer was cut at the token limit (finish_reason length); raise "
    "request.max_tokens, or set `truncated: soft` in the manifest",
    "model_length": "the answer was cut at the model's context length (finish_reason "
    "model_length); shorten the prompt or raise the context, or set `truncated: soft`",
    "content_filter": "the provider's content filter cut or withheld the answer "
    "(finish_reason content_filter); change the prompt, or set `truncated: soft`",
}


def truncation_outcome(
    case_id: str, finish_reason: str | None, truncated: str
) -> GraderOutcome | None:
    """The ``truncated`` grader outcome of an answer cut short (``truncated``: the manifest's
    ``hard``/``soft``/``off``), None for a whole answer or ``off``."""
    why = CUT_ANSWERS.get((finish_reason or "").lower())  # servers differ in case
    if why is None or truncated == "off":
        return None
    return GraderOutcome(
        grader="truncated",
        passed=False,
        violations=[
            Violation(
                case_id=case_id,
                category=TRUNCATED,
                severity=Severity.HIGH,
                grader="truncated",
                reason=why,
            )
        ],
        hard=truncated == "hard",
    )
