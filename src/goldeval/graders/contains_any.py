"""``contains_any``: at least one of the listed strings occurs in the answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from goldeval.core.models import GraderOutcome
from goldeval.graders.base import ExpectKey, GradeContext
from goldeval.graders.budget import each
from goldeval.graders.common import BuiltinGrader, answer_text, excerpt, show

__all__ = ["ContainsAnyGrader"]


class ContainsAnyGrader(BuiltinGrader):
    name = "contains_any"
    primary = ("contains_any",)
    expect_keys = (
        ExpectKey("contains_any", "list[str]", "at least one of these substrings must occur"),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        value = expect.get("contains_any")
        if not isinstance(value, list):
            return []
        if not value:
            return [("expect.contains_any", "must not be empty")]
        if any(isinstance(v, str) and not v for v in value):
            return [("expect.contains_any", "must not contain an empty string (it always matches)")]
        return []

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        options = ctx.case.expect.get("contains_any")
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            return self.config_error(ctx, "expect.contains_any must be a list of strings")
        text = answer_text(ctx)
        if any(o in text for o in each(options, grader=self.name, doing="contains_any")):
            return self.outcome([])
        return self.outcome(
            [
                self.violation(
                    ctx,
                    "CONTENT",
                    f"none of {show(options)} occurs in the answer: «{excerpt(text)}»",
                )
            ]
        )
