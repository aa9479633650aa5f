"""``must_not``: no banned string (the row's top-level ``must_not``) occurs in the answer.

Only for rows without contract keys: the contract grader checks ``must_not`` itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from goldeval.core.models import GraderOutcome
from goldeval.graders.base import GradeContext
from goldeval.graders.budget import each
from goldeval.graders.common import BuiltinGrader, answer_text
from goldeval.graders.contract import CONTRACT_KEYS

if TYPE_CHECKING:
    from goldeval.dataset.case import GoldenCase

__all__ = ["MustNotGrader"]


class MustNotGrader(BuiltinGrader):
    """Top-level ``must_not`` for rows the contract grader does not handle."""

    name = "must_not"
    expect_keys = ()

    def applies(self, case: GoldenCase) -> bool:
        return bool(case.must_not) and not any(k in case.expect for k in CONTRACT_KEYS)

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        text = answer_text(ctx)
        violations = [
            self.violation(ctx, "FORBIDDEN", f"contains banned {banned!r}")
            for banned in each(dict.fromkeys(ctx.case.must_not), grader=self.name, doing="must_not")
            if isinstance(banned, str) and banned and banned in text
        ]
        return self.outcome(violations)
