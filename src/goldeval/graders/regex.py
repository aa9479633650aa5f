"""``regex``: every ``regex`` pattern matches and no ``not_regex`` pattern does.

:func:`re.search` semantics without flags (use inline flags such as ``(?i)``). Only the first
:data:`~goldeval.graders.common.REGEX_SCAN_LIMIT` characters (1 MB) of the answer are
searched; the violation says so when the answer was longer. For ``not_regex`` a longer answer
fails (the tail cannot be shown free of the pattern). Every user pattern (here, in
``json_schema`` ``pattern`` and in the ``cites`` option) is evaluated by the ``regex`` engine in
its ``re``-compatible mode under a time budget (:mod:`goldeval.graders.budget`,
``GOLDEVAL_GRADER_TIMEOUT``, default 2 s per grader and attempt): a pattern that backtracks
catastrophically (``(a|aa)+$``) makes the attempt ERROR with ``errorKind: GRADER_TIMEOUT``
instead of hanging the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from goldeval.core.models import GraderOutcome, Violation
from goldeval.graders.base import ExpectKey, GradeContext
from goldeval.graders.budget import matches_any_text, pattern_error
from goldeval.graders.budget import search as budget_search
from goldeval.graders.common import BuiltinGrader, answer_text, excerpt, scan

__all__ = ["RegexGrader"]


def _pattern_list(value: Any) -> list[str] | None:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _compile_errors(key: str, value: Any) -> list[tuple[str, str]]:
    if value is None:
        return []
    patterns = _pattern_list(value)
    if patterns is None:
        return [(f"expect.{key}", "must be a regular expression or a list of them")]
    if not patterns:
        return [(f"expect.{key}", "must not be an empty list")]
    errors: list[tuple[str, str]] = []
    for i, pattern in enumerate(patterns):
        fld = f"expect.{key}" if isinstance(value, str) else f"expect.{key}[{i}]"
        problem = pattern_error(pattern)
        if problem is not None:
            errors.append((fld, f"invalid regular expression {pattern!r}: {problem}"))
        elif matches_any_text(pattern):
            # As contains_any refuses "": a check that cannot fail is no check.
            what = "passes whatever the answer" if key == "regex" else "fails every answer"
            errors.append(
                (fld, f"{pattern!r} is found in any text (even an empty one): the row {what}")
            )
    return errors


class RegexGrader(BuiltinGrader):
    name = "regex"
    primary = ("regex", "not_regex")
    expect_keys = (
        ExpectKey("regex", "any", "pattern (or list): each must match somewhere (re.search)"),
        ExpectKey("not_regex", "any", "pattern (or list): none may match"),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        return _compile_errors("regex", expect.get("regex")) + _compile_errors(
            "not_regex", expect.get("not_regex")
        )

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        text, note = scan(answer_text(ctx))
        violations: list[Violation] = []
        for key, must in (("regex", True), ("not_regex", False)):
            value = ctx.case.expect.get(key)
            if value is None:
                continue
            patterns = _pattern_list(value)
            if patterns is None or _compile_errors(key, value):
                violations.append(
                    self.violation(
                        ctx, "GRADER_CONFIG", f"expect.{key} is not a valid pattern list"
                    )
                )
                continue
            for pattern in patterns:
                # Within the grader's time budget: a pattern that backtracks catastrophically
                # ends as an ERROR attempt (GRADER_TIMEOUT), not as a hung run.
                match = budget_search(pattern, text, grader=self.name)
                if must and match is None:
                    violations.append(
                        self.violation(
                            ctx,
                            "PATTERN",
                            f"no match for /{pattern}/{note}; answer: «{excerpt(text)}»",
                        )
                    )
                elif not must and match is not None:
                    violations.append(
                        self.violation(
                            ctx,
                            "PATTERN",
                            f"forbidden pattern /{pattern}/ matched "
                            f"«{excerpt(match.group(0), 80)}» "
                            f"at character {match.start()}",
                        )
                    )
                elif not must and note:
                    violations.append(
                        self.violation(
                            ctx,
                            "PATTERN",
                            f"cannot show the answer free of /{pattern}/{note}",
                        )
                    )
        return self.outcome(violations)
