"""Finding the JSON value in an answer (``json_schema``, ``json_equals``).

The first of (1) the whole answer, stripped; (2) the first ````` ```json ````` (or untagged
````` ``` `````) fenced block whose body parses; (3) the first ``{`` or ``[`` from which a
complete JSON value decodes (at most :data:`JSON_CANDIDATES` start positions are tried).
``NaN``/``Infinity`` are not JSON. Note that (3) takes the *first* value, so
``see [1] ... {"a": 1}`` extracts ``[1]``: ask for a fenced block when the answer mixes prose
and JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from goldeval.core.json_numbers import bounded_int
from goldeval.graders.common import excerpt

__all__ = ["JSON_CANDIDATES", "Extracted", "extract_json", "loads"]

#: Start positions tried by the "first JSON value in the text" extraction rule.
JSON_CANDIDATES = 20


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# An integer no float holds is no JSON value of the answer's (its rates and comparisons
# raised OverflowError): refused like NaN (goldeval.core.json_numbers).
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_int=bounded_int)
_JSON_START = re.compile(r"[\[{]")


@dataclass
class Extracted:
    """The JSON value found in an answer (``found=False``: ``error`` says why)."""

    found: bool
    value: Any = None
    source: str = ""
    error: str = ""


def loads(text: str) -> tuple[bool, Any]:
    """(ok, value) of strict JSON (no NaN/Infinity); never raises."""
    try:
        return True, _DECODER.decode(text)
    except (ValueError, RecursionError):
        return False, None


def _fences(text: str) -> Iterator[tuple[str, str]]:
    """(info string, body) of each ``` fenced block, in order (a linear scan)."""
    pos = 0
    while True:
        start = text.find("```", pos)
        if start < 0:
            return
        newline = text.find("\n", start + 3)
        if newline < 0:
            return
        end = text.find("```", newline + 1)
        if end < 0:
            return
        info = text[start + 3 : newline].strip()
        yield (info.split()[0] if info else ""), text[newline + 1 : end]
        pos = end + 3


def extract_json(text: str | None) -> Extracted:
    """The JSON value in an answer, by the extraction rule of the module docstring."""
    if text is None or not text.strip():
        return Extracted(False, error="the answer is empty")
    stripped = text.strip()
    ok, value = loads(stripped)
    if ok:
        return Extracted(True, value, "the whole answer")
    for info, body in _fences(text):
        if info.lower() not in ("", "json"):
            continue
        ok, value = loads(body.strip())
        if ok:
            return Extracted(True, value, "a fenced block")
    tried = 0
    for match in _JSON_START.finditer(text):
        if tried >= JSON_CANDIDATES:
            break
        tried += 1
        try:
            value, _end = _DECODER.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            continue
        return Extracted(True, value, f"the JSON value at character {match.start()}")
    return Extracted(False, error=f"no JSON value found in the answer: «{excerpt(text)}»")
