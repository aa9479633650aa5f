"""``json_schema``: the answer's JSON validates against ``expect.json_schema`` (JSON Schema
Draft 2020-12; the rules are in :mod:`goldeval.graders.json_schema_check`).

The check lives in its own module, imported the first time a row uses ``json_schema``: the
jsonschema library (with referencing and rpds) is a noticeable part of the start-up of every
collection, and most datasets never use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from goldeval.core.models import GraderOutcome
from goldeval.graders.base import ExpectKey, GradeContext
from goldeval.graders.common import BuiltinGrader, answer_text
from goldeval.graders.json_extract import extract_json

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["JsonSchemaGrader"]


def _check() -> ModuleType:
    """:mod:`goldeval.graders.json_schema_check`, imported on first use (see above)."""
    import goldeval.graders.json_schema_check as check

    return check


class JsonSchemaGrader(BuiltinGrader):
    name = "json_schema"
    #: 2: the jsonschema library (Draft 2020-12) instead of version 1's hand-written subset.
    version = 2
    primary = ("json_schema",)
    expect_keys = (
        ExpectKey(
            "json_schema", "object", "the answer's JSON must validate (JSON Schema Draft 2020-12)"
        ),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        schema = expect.get("json_schema")
        if not isinstance(schema, dict):
            return []
        return [("expect.json_schema", message) for message in _check().check_schema(schema)]

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        schema = ctx.case.expect.get("json_schema")
        problems = (
            _check().check_schema(schema) if isinstance(schema, dict) else ["must be an object"]
        )
        if problems:
            return self.config_error(ctx, f"expect.json_schema: {problems[0]}")
        found = extract_json(answer_text(ctx))
        if not found.found:
            return self.outcome([self.violation(ctx, "FORMAT", found.error)])
        violations = [
            self.violation(ctx, "SCHEMA", f"{path}: {message}")
            for path, message in _check().validate_json(found.value, schema)
        ]
        return self.outcome(self.capped(ctx, violations))
