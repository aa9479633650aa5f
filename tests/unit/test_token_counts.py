"""Token counts are counts: an integer from 0 to MAX_TOKEN_COUNT, wherever an answer comes
from. A count past 2**63 reached the store and ended the session in an INTERNALERROR
(OverflowError, exit 1 read as "quality gate failed", no run folder)."""

from __future__ import annotations

import pytest

from goldeval.core.errors import DatasetError
from goldeval.core.models import MAX_TOKEN_COUNT, Mode, Status
from goldeval.dataset.rows import Dataset
from goldeval.pipeline.orchestration import AttemptRunner
from goldeval.providers.base import Answer, as_provider
from goldeval.providers.fixture import parse_sidecar
from goldeval.providers.http.wire import token_count
from tests.unit.test_attempt_orchestration import _case, _pipeline, dataset  # noqa: F401


@pytest.mark.parametrize(
    ("value", "count"),
    [
        (12, 12),
        (12.0, 12),
        (MAX_TOKEN_COUNT, MAX_TOKEN_COUNT),
        (MAX_TOKEN_COUNT + 1, None),
        (2**63, None),
        (1.5e300, None),
        (float("inf"), None),
        (-1, None),
        (True, None),
        ("12", None),
    ],
)
def test_a_providers_usage_is_a_count_or_none(value: object, count: int | None) -> None:
    assert token_count(value) == count


@pytest.mark.parametrize("value", ["9223372036854775808", "-1", "1.5", '"7"', "true"])
def test_a_sidecar_count_out_of_range_names_the_file_and_field(value: str) -> None:
    with pytest.raises(DatasetError) as err:
        parse_sidecar(f'{{"inputTokens": {value}}}', "fixtures/greeting.out.json")
    assert "fixtures/greeting.out.json: field inputTokens" in str(err.value)
    assert "from 0 to 1,000,000,000,000" in str(err.value)


def test_an_apps_answer_with_an_impossible_count_is_a_parser_error(
    dataset: Dataset,  # noqa: F811
) -> None:
    answer = Answer(text="hello", input_tokens=10**30)
    runner = AttemptRunner(_pipeline(dataset), as_provider(lambda case: answer), mode=Mode.LIVE)
    outcome = runner.run(_case(dataset), 1, "m")
    assert outcome.status is Status.ERROR
    assert outcome.record.error_kind == "PARSER_ERROR"
    assert "1000000000000000000000000000000 input tokens" in (outcome.record.error_message or "")


def test_a_count_too_long_to_print_is_described_not_printed() -> None:
    """A 5,000-digit count cannot be repr'd (Python's int-to-text limit): the message that
    refused it raised ValueError instead."""
    from goldeval.core.models import token_count_problem

    assert token_count_problem(10**5000) == (
        "must be an integer from 0 to 1,000,000,000,000, got an integer of more than 40 digits"
    )
    assert token_count_problem(7) is None
