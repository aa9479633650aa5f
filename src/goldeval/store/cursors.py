"""Opaque page cursors of the service's keyset pages (runs, results, the run index).

A cursor is the URL-safe base64 of a JSON list of strings (the key of the last row shown);
anything else is refused with ValueError, never decoded into a query.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import cast


def encode_cursor(*parts: str) -> str:
    """An opaque page cursor (URL-safe base64 of a JSON list)."""
    raw = json.dumps(list(parts), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, size: int) -> list[str]:
    """The parts of a cursor made by :func:`encode_cursor`; ValueError when it is not one."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        parts = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise ValueError("cursor is not one this server returned") from None
    if (
        not isinstance(parts, list)
        or len(parts) != size
        or not all(isinstance(p, str) and _storable(p) for p in parts)
    ):
        raise ValueError("cursor is not one this server returned")
    return cast(list[str], parts)


def _storable(text: str) -> bool:
    """Text a store can compare with: no NUL (PostgreSQL refuses it) and valid UTF-8 (JSON
    lets a lone surrogate through, ``"\\ud800"``, which no driver can send: a 500)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: The range of the store's integer columns (64-bit): a larger index is no row's.
_INDEX_RANGE = range(-(2**63), 2**63)


def cursor_index(text: str) -> int:
    """An attempt index of a cursor; ValueError when it is not a 64-bit integer (a larger one
    overflowed SQLite's INTEGER: a 500 instead of a 422)."""
    if len(text) > 20:
        raise ValueError("cursor is not one this server returned")
    index = int(text)
    if index not in _INDEX_RANGE:
        raise ValueError("cursor is not one this server returned")
    return index
