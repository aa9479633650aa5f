"""The run document's writers and readers know the same fields (issue 31): RunJson, the
TypedDict the writers build, and RunDocument, the model the readers take."""

from __future__ import annotations

import typing

import pytest

from goldeval.results.documents import RunDocument
from goldeval.results.run_json import RUN_JSON_KEYS, RunJson, as_run_json


def test_the_writers_keys_are_the_readers_fields() -> None:
    readers = {field.alias or name for name, field in RunDocument.model_fields.items()}
    assert RUN_JSON_KEYS == readers


def test_every_key_is_optional_while_the_document_is_assembled() -> None:
    assert RunJson.__required_keys__ == frozenset()
    hints = typing.get_type_hints(RunJson)
    assert set(hints) == RUN_JSON_KEYS


def test_an_unknown_key_is_refused_where_the_json_is_assembled() -> None:
    assert as_run_json({"runId": "r", "casesTotal": 2}) == {"runId": "r", "casesTotal": 2}
    with pytest.raises(ValueError, match="not a field of the run document: caseCount, runid"):
        as_run_json({"runId": "r", "runid": "r", "caseCount": 2})
