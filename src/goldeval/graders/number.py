"""``number``: the number the answer gives is within tolerance of ``expect.number``.

When the whole answer is a JSON number, that number. Otherwise the LAST number in the text
matching ``[-+]?(digits[.digits]|.digits)([eE][-+]?digits)?``, where a sign or number glued to a
preceding letter, digit or ``.`` does not count (``x-5`` → 5, ``2024-01-05`` → 5, ``v1.2`` →
nothing). Thousands separators are not supported: ``1,234`` reads as 234. Passes when
``|got - value| <= max(abs_tol, rel_tol * |value|)``; a bare number means ``abs_tol = 1e-9``,
and so does an object without tolerances.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from goldeval.core.models import GraderOutcome
from goldeval.graders.base import ExpectKey, GradeContext
from goldeval.graders.common import BuiltinGrader, answer_text, excerpt, is_number, present
from goldeval.graders.json_extract import loads

__all__ = ["NumberGrader", "extract_number"]

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def extract_number(text: str | None) -> float | None:
    """The number an answer gives, by the rule in the module docstring (None: no number)."""
    if text is None:
        return None
    stripped = text.strip()
    if not stripped:
        return None
    if len(stripped) < 1000:
        ok, value = loads(stripped)
        if ok and is_number(value):
            try:
                return float(value)
            except OverflowError:  # a huge JSON integer
                return math.inf
    last: str | None = None
    for match in _NUMBER.finditer(text):
        last = match.group(0)
    if last is None:
        return None
    try:
        return float(last)  # a huge digit run reads as inf, reported as out of range
    except ValueError:  # pragma: no cover - the regex only matches float syntax
        return None


def _number_spec(value: Any) -> tuple[float, float, float] | str:
    """(value, abs_tol, rel_tol) of ``expect.number``, or an error message."""
    if is_number(value):
        target, abs_tol, rel_tol = value, 1e-9, 0.0
    elif isinstance(value, dict):
        unknown = [k for k in value if k not in ("value", "abs_tol", "rel_tol")]
        if unknown:
            return f"unknown key {unknown[0]!r} (known: value, abs_tol, rel_tol)"
        if not is_number(value.get("value")):
            return "needs a numeric `value`"
        target = value["value"]
        raw_abs, raw_rel = value.get("abs_tol"), value.get("rel_tol")
        for name, tol in (("abs_tol", raw_abs), ("rel_tol", raw_rel)):
            if tol is not None and not (is_number(tol) and math.isfinite(tol) and tol >= 0):
                return f"{name} must be a non-negative number"
        abs_tol = 1e-9 if raw_abs is None and raw_rel is None else (raw_abs or 0.0)
        rel_tol = raw_rel or 0.0
    else:
        return "must be a number or {value, abs_tol?, rel_tol?}"
    if not math.isfinite(target):
        return "value must be finite"
    return float(target), float(abs_tol), float(rel_tol)


class NumberGrader(BuiltinGrader):
    name = "number"
    primary = ("number",)
    expect_keys = (
        ExpectKey(
            "number",
            "any",
            "expected number: a bare number (abs_tol 1e-9) or {value, abs_tol?, rel_tol?}",
        ),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        if not present(expect, "number"):
            return []
        spec = _number_spec(expect["number"])
        return [("expect.number", spec)] if isinstance(spec, str) else []

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        spec = _number_spec(ctx.case.expect.get("number"))
        if isinstance(spec, str):
            return self.config_error(ctx, f"expect.number {spec}")
        target, abs_tol, rel_tol = spec
        text = answer_text(ctx)
        got = extract_number(text)
        if got is None:
            return self.outcome(
                [
                    self.violation(
                        ctx,
                        "FORMAT",
                        f"no number in the answer: «{excerpt(text)}»",
                    )
                ]
            )
        tolerance = max(abs_tol, rel_tol * abs(target))
        if not math.isfinite(got):
            reason = f"the last number in the answer is out of range; expected {target:g}"
            return self.outcome([self.violation(ctx, "FORMAT", reason)])
        if abs(got - target) <= tolerance:
            return self.outcome([])
        return self.outcome(
            [
                self.violation(
                    ctx,
                    "MISMATCH",
                    f"expected {target:g} ± {tolerance:g}, got {got:g} "
                    f"(off by {abs(got - target):g}; "
                    "the last number in the answer)",
                )
            ]
        )
