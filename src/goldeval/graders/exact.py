"""``exact``: the answer equals ``expect.equals`` after the ``normalize`` steps.

``normalize`` is a list of steps (or one step name, or ``"all"``), applied to both sides in
this order: ``nfc`` (Unicode NFC), ``case`` (``str.casefold``), ``punctuation`` (drop every
Unicode punctuation character, category ``P*``), ``whitespace`` (collapse runs to one space,
strip the ends). Without ``normalize`` the comparison is byte-exact, trailing newline
included.
"""

from __future__ import annotations

import functools
import json
import sys
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from goldeval.core.models import GraderOutcome
from goldeval.graders.base import ExpectKey, GradeContext
from goldeval.graders.common import BuiltinGrader, answer_text

__all__ = ["NORMALIZE_STEPS", "ExactGrader", "normalize_text"]

#: Order of the normalisation steps of the ``exact`` grader.
NORMALIZE_STEPS = ("nfc", "case", "punctuation", "whitespace")


@functools.lru_cache(maxsize=1)
def _punctuation_table() -> dict[int, None]:
    return {
        cp: None
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)).startswith("P")
    }


def _normalize_steps(value: Any) -> list[str] | str:
    """The normalisation steps of ``expect.normalize``, or an error message."""
    if value is None:
        return []
    if value == "all":
        return list(NORMALIZE_STEPS)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return f'must be "all" or a list of {", ".join(NORMALIZE_STEPS)}'
    unknown = [v for v in value if v not in NORMALIZE_STEPS]
    if unknown:
        return f"unknown step {unknown[0]!r} (known: all, {', '.join(NORMALIZE_STEPS)})"
    return [s for s in NORMALIZE_STEPS if s in value]


def normalize_text(text: str, steps: Sequence[str]) -> str:
    """Apply the ``exact`` grader's normalisation steps (see the module docstring)."""
    if "nfc" in steps:
        text = unicodedata.normalize("NFC", text)
    if "case" in steps:
        text = text.casefold()
    if "punctuation" in steps:
        text = text.translate(_punctuation_table())
    if "whitespace" in steps:
        text = " ".join(text.split())
    return text


def _diff_excerpt(expected: str, got: str, context: int = 30) -> str:
    limit = min(len(expected), len(got))
    i = 0
    while i < limit and expected[i] == got[i]:
        i += 1
    start = max(0, i - context)
    lead = "…" if start else ""

    def piece(text: str) -> str:
        end = i + context
        tail = "…" if end < len(text) else ""
        return lead + json.dumps(text[start:end], ensure_ascii=False)[1:-1] + tail

    return (
        f"first difference at character {i}: expected «{piece(expected)}», "
        f"got «{piece(got)}» (lengths {len(expected)} vs {len(got)})"
    )


class ExactGrader(BuiltinGrader):
    name = "exact"
    primary = ("equals",)
    expect_keys = (
        ExpectKey("equals", "str", "the answer must equal this text (after `normalize`)"),
        ExpectKey(
            "normalize",
            "any",
            'normalisation for `equals`: "all" or a list of case, whitespace, nfc, punctuation',
        ),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        errors = self.requires(expect, "normalize", "equals")
        steps = _normalize_steps(expect.get("normalize"))
        if isinstance(steps, str):
            errors.append(("expect.normalize", steps))
        return errors

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        expected = ctx.case.expect.get("equals")
        if not isinstance(expected, str):
            return self.config_error(ctx, "expect.equals must be a string")
        steps = _normalize_steps(ctx.case.expect.get("normalize"))
        if isinstance(steps, str):
            return self.config_error(ctx, f"expect.normalize {steps}")
        got = normalize_text(answer_text(ctx), steps)
        want = normalize_text(expected, steps)
        if got == want:
            return self.outcome([])
        how = f" (normalized: {', '.join(steps)})" if steps else ""
        reason = f"answer differs from expect.equals{how}: {_diff_excerpt(want, got)}"
        return self.outcome([self.violation(ctx, "MISMATCH", reason)])
