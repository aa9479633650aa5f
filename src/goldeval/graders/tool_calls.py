"""``tool_calls``: the expected tool calls were made (names, argument subsets, order).

Each expected call is ``{"name", "arguments"?}`` (or just the name as a string).
``arguments`` is a recursive subset: every expected key must be present with a matching value;
extra keys are allowed; lists must have the same length and match item by item; scalars compare
as JSON (``1 == 1.0``, ``true != 1``). ``tool_calls_order``: ``exact`` (exactly these calls, in
this order, nothing else), ``subsequence`` (default: in this order, other calls may come
between), ``any`` (each expected call matches a distinct actual call, any order, extras
allowed; see :mod:`goldeval.graders.matching`). Arguments that arrive as a JSON string are
parsed. ``tool_calls: []`` with ``exact`` asserts that no tool was called.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from goldeval.core.models import GraderOutcome, Violation
from goldeval.graders.base import ExpectKey, GradeContext
from goldeval.graders.budget import check_time, each
from goldeval.graders.common import BuiltinGrader, json_eq, json_type, show
from goldeval.graders.json_extract import loads
from goldeval.graders.json_paths import key_path
from goldeval.graders.matching import bipartite

__all__ = ["TOOL_ORDERS", "ToolCallsGrader"]

TOOL_ORDERS = ("exact", "subsequence", "any")


@dataclass(frozen=True)
class _Call:
    name: str
    arguments: Any


def _expected_calls(value: Any) -> list[_Call] | str:
    if not isinstance(value, list):
        return "must be a list of {name, arguments} objects"
    calls: list[_Call] = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            if not item:
                return f"[{i}]: the tool name must not be empty"
            calls.append(_Call(item, {}))
            continue
        if not isinstance(item, dict):
            return f"[{i}]: must be an object {{name, arguments}} or a tool name"
        unknown = [k for k in item if k not in ("name", "arguments")]
        if unknown:
            return f"[{i}]: unknown key {unknown[0]!r} (known: name, arguments)"
        name = item.get("name")
        if not isinstance(name, str) or not name:
            return f"[{i}].name: must be a non-empty string"
        args = item.get("arguments", {})
        if args is None:
            args = {}
        if not isinstance(args, dict):
            return f"[{i}].arguments: must be an object (the argument subset to match)"
        calls.append(_Call(name, args))
    return calls


def _actual_calls(ctx: GradeContext) -> list[_Call]:
    raw: Any = getattr(ctx.answer, "tool_calls", None)
    if not isinstance(raw, (list, tuple)):
        return []
    calls: list[_Call] = []
    for item in raw:
        if isinstance(item, Mapping):
            name, args = item.get("name"), item.get("arguments")
        else:
            name, args = getattr(item, "name", None), getattr(item, "arguments", None)
        if isinstance(args, str):
            ok, parsed = loads(args)
            args = parsed if ok else args
        if not isinstance(name, str):
            name = "" if name is None else str(name)
        calls.append(_Call(name, args))
    return calls


def _subset_diff(expected: Any, actual: Any, path: str = "$") -> str | None:
    """First place where ``expected`` is not a recursive subset of ``actual`` (None: it is)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, got {json_type(actual)} {show(actual, 40)}"
        for key, value in expected.items():
            at = key_path(path, key)
            if key not in actual:
                return f"{at}: missing (expected {show(value, 40)})"
            problem = _subset_diff(value, actual[key], at)
            if problem:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{path}: expected an array, got {json_type(actual)} {show(actual, 40)}"
        if len(expected) != len(actual):
            return f"{path}: expected {len(expected)} items, got {len(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            problem = _subset_diff(e, a, f"{path}[{i}]")
            if problem:
                return problem
        return None
    if not json_eq(expected, actual):
        return f"{path}: expected {show(expected, 40)}, got {show(actual, 40)}"
    return None


def _call_problem(expected: _Call, actual: _Call) -> str | None:
    if expected.name != actual.name:
        return f"expected {expected.name}, got {actual.name}"
    try:
        problem = _subset_diff(expected.arguments, actual.arguments)
    except RecursionError:
        problem = "$: arguments nested too deeply"
    return f"{actual.name} arguments differ at {problem}" if problem else None


def _describe(call: _Call) -> str:
    return f"{call.name}({show(call.arguments, 60)})" if call.arguments else f"{call.name}(…)"


def _names(calls: Sequence[_Call]) -> str:
    if not calls:
        return "no tool calls were made"
    shown = ", ".join(c.name for c in calls[:20])
    more = ", …" if len(calls) > 20 else ""
    return f"calls made: {shown}{more}"


class ToolCallsGrader(BuiltinGrader):
    name = "tool_calls"
    primary = ("tool_calls",)
    expect_keys = (
        ExpectKey("tool_calls", "list", "expected calls: [{name, arguments (subset)}]"),
        ExpectKey("tool_calls_order", "str", "exact | subsequence (default) | any"),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        errors = self.requires(expect, "tool_calls_order", "tool_calls")
        value = expect.get("tool_calls")
        if isinstance(value, list):
            calls = _expected_calls(value)
            if isinstance(calls, str):
                errors.append(("expect.tool_calls", calls))
        order = expect.get("tool_calls_order")
        if isinstance(order, str) and order not in TOOL_ORDERS:
            errors.append(("expect.tool_calls_order", f"must be one of {', '.join(TOOL_ORDERS)}"))
        return errors

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        expected = _expected_calls(ctx.case.expect.get("tool_calls"))
        order = ctx.case.expect.get("tool_calls_order") or "subsequence"
        if isinstance(expected, str) or order not in TOOL_ORDERS:
            what = expected if isinstance(expected, str) else f"unknown order {order!r}"
            return self.config_error(ctx, f"expect.tool_calls: {what}")
        actual = _actual_calls(ctx)
        violations: list[Violation] = []

        def missing(i: int, call: _Call, among: Sequence[_Call], where: str = "") -> None:
            same = [a for a in among if a.name == call.name]
            if same:
                detail = _call_problem(call, same[0]) or "no distinct call left to match"
            else:
                detail = _names(actual)
            violations.append(
                self.violation(
                    ctx,
                    "TOOL_CALL",
                    f"expected call #{i} {_describe(call)} not found{where}: {detail}",
                )
            )

        if order == "exact":
            if len(expected) != len(actual):
                violations.append(
                    self.violation(
                        ctx,
                        "TOOL_CALL",
                        f"expected exactly {len(expected)} calls "
                        f"({', '.join(c.name for c in expected) or 'none'}), got {len(actual)} "
                        f"({_names(actual)})",
                    )
                )
            for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
                problem = _call_problem(e, a)
                if problem:
                    violations.append(self.violation(ctx, "TOOL_CALL", f"call #{i}: {problem}"))
        elif order == "subsequence":
            start = 0
            for i, call in enumerate(each(expected, grader=self.name, doing="tool_calls")):
                hit = next(
                    (
                        j
                        for j in range(start, len(actual))
                        if _call_problem(call, actual[j]) is None
                    ),
                    None,
                )
                if hit is None:
                    where = f" after call #{start - 1}" if start else ""
                    missing(i, call, actual[start:], where)
                else:
                    start = hit + 1
        else:
            ok = [
                [_call_problem(e, a) is None for a in actual]
                for e in each(expected, grader=self.name, doing="matching the tool calls")
            ]
            matched = bipartite(
                ok, len(actual), lambda: check_time(self.name, "matching the tool calls")
            )
            for i, j in enumerate(matched):
                if j is None:
                    missing(i, expected[i], actual)
        return self.outcome(self.capped(ctx, violations))
