"""Answers side by side (issue 35): for the cases that flipped between the compared pair, the
control's and the candidate's answer excerpts and a word diff between them.

``variantComparison.answers`` of run.json. The excerpts are the first
``answer_excerpt_chars`` characters of each side's lowest attempt that had an answer (the run
collector keeps them in a variant session; secrets are masked before any answer is kept), so
a diff covers the beginning of long answers only, and says so (``truncated``). Figures for
reading; nothing here gates.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from difflib import SequenceMatcher
from typing import Any

#: Flipped cases shown side by side (worse first, then better).
MAX_SIDE_BY_SIDE = 20

_TOKENS = re.compile(r"\s+|[^\s]+")


def word_diff(control: str, candidate: str) -> list[dict[str, str]]:
    """The candidate's answer against the control's, word by word: segments ``op`` "=" (both),
    "-" (control only) and "+" (candidate only), in reading order, adjacent segments of one
    op merged. Whitespace is a token too, so joining the "=" and "-" segments gives the
    control's text back and "=" and "+" the candidate's."""
    a, b = _TOKENS.findall(control), _TOKENS.findall(candidate)
    segments: list[dict[str, str]] = []

    def add(op: str, tokens: Sequence[str]) -> None:
        text = "".join(tokens)
        if not text:
            return
        if segments and segments[-1]["op"] == op:
            segments[-1]["text"] += text
        else:
            segments.append({"op": op, "text": text})

    # autojunk off: frequent words ("the") must still match, and the texts are bounded.
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            add("=", a[i1:i2])
        else:
            add("-", a[i1:i2])
            add("+", b[j1:j2])
    return segments


def side_by_side(
    flipped_worse: Sequence[str],
    flipped_better: Sequence[str],
    excerpt: Callable[[str, str], str | None],
    *,
    control: str,
    candidate: str,
    excerpt_chars: int,
) -> list[dict[str, Any]]:
    """``answers``: up to :data:`MAX_SIDE_BY_SIDE` flipped cases, each with ``direction``
    ("worse": the candidate fails where the control passes; "better"), both excerpts (null
    when a side kept no answer) and their :func:`word_diff` (empty when a side has none).
    ``excerpt(variant, case_id)``: the answer excerpt the run kept."""
    chosen = [(cid, "worse") for cid in flipped_worse] + [(cid, "better") for cid in flipped_better]
    out: list[dict[str, Any]] = []
    for case_id, direction in chosen[:MAX_SIDE_BY_SIDE]:
        left, right = excerpt(control, case_id), excerpt(candidate, case_id)
        out.append(
            {
                "caseId": case_id,
                "direction": direction,
                "control": left,
                "candidate": right,
                "truncated": any(t is not None and len(t) >= excerpt_chars for t in (left, right)),
                "diff": word_diff(left, right) if left is not None and right is not None else [],
            }
        )
    return out
