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
        or not all(isinstance(p, str) for p in parts)
    ):
        raise ValueError("cursor is not one this server returned")
    return cast(list[str], parts)
