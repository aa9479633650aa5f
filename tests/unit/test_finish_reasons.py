"""The finish reasons the providers and the pipeline read alike: an answer cut short is graded
under the manifest's ``truncated`` policy (also an empty one), a failed generation is an ERROR."""

from __future__ import annotations

from goldeval.pipeline.truncation import CUT_ANSWERS, truncation_outcome
from goldeval.providers.http.failures import CUT_FINISH, FAILED_FINISH, failed_finish


def test_the_providers_let_through_exactly_what_the_truncated_grader_weighs() -> None:
    assert set(CUT_ANSWERS) == CUT_FINISH
    for reason in CUT_FINISH:
        outcome = truncation_outcome("c1", reason, "hard")
        assert outcome is not None and not outcome.passed and outcome.hard


def test_a_failed_generation_is_a_retried_provider_error() -> None:
    for reason in FAILED_FINISH:
        failure = failed_finish("openai", reason)
        assert failure is not None and failure.retryable, reason
    assert failed_finish("openai", "stop") is None and failed_finish("openai", None) is None
    assert not FAILED_FINISH & CUT_FINISH
