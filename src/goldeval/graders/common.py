"""Plumbing shared by the built-in graders: answer text, short renderings, JSON values, and the
:class:`BuiltinGrader` base (primary keys, outcome and violation builders, capped reports).

Options: a grader reads ``ctx.options[<grader name>]`` when that is a mapping, else
``ctx.options`` itself, so the pipeline may pass either one grader's options or the manifest's
whole ``grader_options``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

from goldeval.core.models import GraderOutcome, Severity, Violation
from goldeval.graders.base import GradeContext, Grader

if TYPE_CHECKING:
    from goldeval.dataset.case import GoldenCase

__all__ = [
    "MAX_REPORTED",
    "REGEX_SCAN_LIMIT",
    "BuiltinGrader",
    "answer_text",
    "excerpt",
    "grader_options",
    "is_number",
    "json_eq",
    "json_type",
    "present",
    "scan",
    "show",
]

#: Characters of the answer searched by regex-based checks (regex, cites, schema ``pattern``).
REGEX_SCAN_LIMIT = 1_000_000
#: Most violations one grader reports for one answer (the rest are counted).
MAX_REPORTED = 50

HIGH = Severity.HIGH


def answer_text(ctx: GradeContext) -> str:
    """The answer as text: ``None`` is the empty string, bytes are decoded leniently."""
    text: Any = ctx.answer.text
    if text is None:
        return ""
    if isinstance(text, bytes):
        return text.decode("utf-8", "replace")
    return text if isinstance(text, str) else str(text)


def excerpt(text: str, limit: int = 160) -> str:
    """The start of ``text`` on one line, at most ``limit`` characters (``…`` when cut)."""
    head = text[: limit * 4]
    flat = " ".join(head.split())
    if len(flat) > limit or len(head) < len(text):
        return flat[:limit] + "…"
    return flat


def show(value: Any, limit: int = 80) -> str:
    """A short JSON rendering of a value for messages."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def grader_options(ctx: GradeContext, name: str) -> Mapping[str, Any]:
    """This grader's options (see the module docstring)."""
    opts: Any = ctx.options or {}
    if not isinstance(opts, Mapping):
        return {}
    nested = opts.get(name)
    if isinstance(nested, Mapping):
        return nested
    return opts


def present(expect: Mapping[str, Any], key: str) -> bool:
    return expect.get(key) is not None


def is_number(value: Any) -> TypeGuard[int | float]:
    """A JSON number: ints and floats, never booleans."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value (``integer`` for ints, ``number`` for floats)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def json_eq(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0``, but booleans never equal numbers; deep for containers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) and is_number(b):
        return bool(a == b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_eq(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_eq(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def scan(text: str) -> tuple[str, str]:
    """(searched text, note for messages): the first REGEX_SCAN_LIMIT characters."""
    if len(text) <= REGEX_SCAN_LIMIT:
        return text, ""
    return text[:REGEX_SCAN_LIMIT], (
        f" (answer truncated: only the first {REGEX_SCAN_LIMIT:,} of {len(text):,} characters "
        "were searched)"
    )


class BuiltinGrader(Grader):
    """Shared plumbing: primary keys decide ``applies``; outcome and violation builders."""

    #: Keys whose presence makes the grader apply (secondary keys only modify them).
    primary: tuple[str, ...] = ()

    def applies(self, case: GoldenCase) -> bool:
        return any(case.expect.get(k) is not None for k in self.primary)

    def violation(
        self, ctx: GradeContext, category: str, reason: str, severity: Severity = HIGH
    ) -> Violation:
        return Violation(
            case_id=ctx.case.id,
            category=category,
            severity=severity,
            grader=self.name,
            reason=reason,
        )

    def outcome(
        self,
        violations: list[Violation],
        *,
        passed: bool | None = None,
        score: float | None = None,
        threshold: float | None = None,
    ) -> GraderOutcome:
        return GraderOutcome(
            grader=self.name,
            passed=not violations if passed is None else passed,
            hard=self.hard,
            score=score,
            threshold=threshold,
            violations=violations,
        )

    def capped(self, ctx: GradeContext, violations: list[Violation]) -> list[Violation]:
        if len(violations) <= MAX_REPORTED:
            return violations
        rest = len(violations) - MAX_REPORTED
        kept = violations[:MAX_REPORTED]
        kept.append(
            self.violation(ctx, kept[-1].category, f"... and {rest} more", kept[-1].severity)
        )
        return kept

    def config_error(self, ctx: GradeContext, reason: str) -> GraderOutcome:
        """The row's expect value is unusable (a row built without dataset validation)."""
        return self.outcome([self.violation(ctx, "GRADER_CONFIG", reason)])

    def requires(self, expect: Mapping[str, Any], key: str, needs: str) -> list[tuple[str, str]]:
        if present(expect, key) and not present(expect, needs):
            return [(f"expect.{key}", f"has no effect without expect.{needs}")]
        return []
