"""``json_equals``: the answer's JSON (see :mod:`goldeval.graders.json_extract`) equals
``expect.json_equals`` outside the ``json_ignore`` paths (see :mod:`goldeval.graders.json_paths`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from goldeval.core.models import GraderOutcome, Violation
from goldeval.graders.base import ExpectKey, GradeContext
from goldeval.graders.common import MAX_REPORTED, BuiltinGrader, answer_text, show
from goldeval.graders.json_extract import extract_json
from goldeval.graders.json_paths import json_diff, parse_path

__all__ = ["JsonEqualsGrader"]


class JsonEqualsGrader(BuiltinGrader):
    name = "json_equals"
    primary = ("json_equals",)
    expect_keys = (
        ExpectKey("json_equals", "any", "the answer's JSON must equal this value"),
        ExpectKey(
            "json_ignore", "list[str]", "JSON paths ($.a.b, $.items[*].id) or top-level keys"
        ),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        errors = self.requires(expect, "json_ignore", "json_equals")
        ignore = expect.get("json_ignore")
        if isinstance(ignore, list):
            for i, path in enumerate(ignore):
                if isinstance(path, str) and parse_path(path) is None:
                    errors.append(
                        (
                            f"expect.json_ignore[{i}]",
                            f"invalid JSON path {path!r} (e.g. $.meta.id, $.items[*].ts, or a "
                            "top-level key)",
                        )
                    )
        return errors

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        expected = ctx.case.expect.get("json_equals")
        raw_ignore = ctx.case.expect.get("json_ignore") or []
        ignore: list[list[Any]] = []
        if isinstance(raw_ignore, list):
            for path in raw_ignore:
                tokens = parse_path(path) if isinstance(path, str) else None
                if tokens is None:
                    return self.outcome(
                        [
                            self.violation(
                                ctx,
                                "GRADER_CONFIG",
                                f"expect.json_ignore: invalid path {show(path)}",
                            )
                        ]
                    )
                ignore.append(tokens)
        found = extract_json(answer_text(ctx))
        if not found.found:
            return self.outcome([self.violation(ctx, "FORMAT", found.error)])
        violations: list[Violation] = []
        try:
            for path, message in json_diff(expected, found.value, ignore):
                violations.append(self.violation(ctx, "MISMATCH", f"{path}: {message}"))
                if len(violations) > MAX_REPORTED:
                    break
        except RecursionError:  # pragma: no cover - json_diff is iterative; show() guards too
            violations.append(self.violation(ctx, "FORMAT", "JSON nested too deeply to compare"))
        return self.outcome(self.capped(ctx, violations))
