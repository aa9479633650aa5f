"""A third-party grader for pytest-goldeval: every key of the answer's JSON is snake_case.

It owns the ``expect`` key ``json_keys_snake_case``; a row that uses the key is graded by it,
and a typo in the key is a collection error (no grader owns the misspelt key). Load it from a
``conftest.py`` (``pytest_plugins = ["snake_case_grader"]``) or install it as a plugin with a
``pytest11`` entry point (see pyproject.toml).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from goldeval import ExpectKey, GradeContext, Grader, GraderOutcome, Violation

SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")
FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


def parse_json(text: str) -> Any:
    """The answer's JSON: the whole text, else the first fenced block. Raises ValueError."""
    candidates = [text.strip()] + [m.group(1).strip() for m in FENCE.finditer(text)]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise ValueError("no JSON value in the answer")


def bad_keys(value: Any, path: str = "$") -> Iterator[str]:
    """JSON paths of every object key that is not snake_case, depth first."""
    if isinstance(value, dict):
        for key, child in value.items():
            where = f"{path}.{key}"
            if not SNAKE_CASE.match(key):
                yield where
            yield from bad_keys(child, where)
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from bad_keys(child, f"{path}[{i}]")


class SnakeCaseKeysGrader(Grader):
    name = "json_keys_snake_case"
    expect_keys = (
        ExpectKey(
            "json_keys_snake_case", "bool", "true: every key of the answer's JSON is snake_case"
        ),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        if expect.get("json_keys_snake_case") is False:
            return [("expect.json_keys_snake_case", "false checks nothing: leave the key out")]
        return []

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        def violation(category: str, reason: str) -> Violation:
            return Violation(case_id=ctx.case.id, category=category, severity="HIGH",
                             grader=self.name, reason=reason)

        try:
            value = parse_json(ctx.answer.text or "")
        except ValueError as exc:
            violations = [violation("FORMAT", str(exc))]
        else:
            violations = [violation("NAMING", f"key {path} is not snake_case")
                          for path in bad_keys(value)]
        return GraderOutcome(grader=self.name, passed=not violations, violations=violations)


@pytest.hookimpl
def pytest_goldeval_register_graders(config: pytest.Config) -> list[Grader]:
    return [SnakeCaseKeysGrader()]
