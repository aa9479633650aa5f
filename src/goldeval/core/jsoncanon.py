"""Canonical JSON text, byte-compatible with Jackson's default pretty printer.

The reference hashes datasets as Jackson's indented JSON of the rows sorted by id. We produce
the same bytes so that ``datasetHash`` of the same rows equals the reference's, which lets a
team move its committed baselines over without a spurious "dataset changed" verdict.
"""

from __future__ import annotations

import json
import re
from typing import Any

_LOWER_HEX_ESCAPE = re.compile(r"\\u([0-9a-f]{4})")


def jackson_string(value: str) -> str:
    text = json.dumps(value, ensure_ascii=False)
    # Jackson writes control characters as \\u00XX with upper-case hex digits.
    return _LOWER_HEX_ESCAPE.sub(lambda m: "\\u" + m.group(1).upper(), text)


def jackson_pretty(value: Any, level: int = 0) -> str:
    """Render like ``ObjectMapper.writerWithDefaultPrettyPrinter()``.

    Objects indent two spaces per level with ``"key" : value``; arrays stay on one line as
    ``[ a, b ]`` and do not add an indent level; empty containers are ``{ }`` and ``[ ]``.
    """
    if isinstance(value, dict):
        if not value:
            return "{ }"
        inner = "  " * (level + 1)
        parts = [
            f"{inner}{jackson_string(str(k))} : {jackson_pretty(v, level + 1)}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(parts) + "\n" + "  " * level + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[ ]"
        return "[ " + ", ".join(jackson_pretty(v, level) for v in value) + " ]"
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    return jackson_string(str(value))
