"""Integers in outside JSON that no float can hold: refused as the JSON is parsed.

Python reads a 4,000-digit integer exactly, and every rate, delta and latency computed from
it then raised OverflowError: ``expect.number: 1<400 zeros>`` was an INTERNALERROR at
collection, a run.json or baseline with such a count a traceback in ``goldeval gate``,
``compare``, ``show`` and ``site``. A JSON number that large is no measurement: an integer
literal of more than 308 digits (past the largest float) makes the document malformed
(:class:`HugeInteger`, a ``ValueError`` like any JSON error), for every parser that goes
through :func:`goldeval.core.limits.loads_json`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

#: The largest float has 309 digits: a literal of 309 digits or more may not fit.
_MAY_OVERFLOW = re.compile(r"\d{309}")
_MAY_OVERFLOW_BYTES = re.compile(rb"\d{309}")


class HugeInteger(ValueError):
    """An integer literal beyond the range of a float."""


def int_parser(text: str | bytes) -> Callable[[str], int] | None:
    """``parse_int`` for ``json.loads(text)``: None (the fast C path) unless ``text`` has a
    run of 309 digits somewhere (in a string, too: only real integer literals are judged)."""
    pattern = _MAY_OVERFLOW_BYTES if isinstance(text, bytes) else _MAY_OVERFLOW
    return bounded_int if pattern.search(text) else None  # type: ignore[arg-type]


def bounded_int(literal: str) -> int:
    """``parse_int`` that raises :class:`HugeInteger` past the range of a float."""
    value = int(literal)
    try:
        float(value)
    except OverflowError:
        raise HugeInteger(
            f"an integer of {len(literal.lstrip('-'))} digits, beyond the range of a number: "
            "write a number a float can hold"
        ) from None
    return value
