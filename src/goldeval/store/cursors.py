"""Opaque page cursors of the service's keyset pages (runs, results, the run index).

A cursor is the URL-safe base64 of a JSON list of strings (the key of the last row shown);
anything else is refused with ValueError, never decoded into a query.

A cursor of a listing that depends on more than the key (one run's attempts, of one status)
is *bound* to it: its last part is :func:`cursor_scope` of what the listing was read with (the
run id and the status filter), and :func:`decode_cursor` refuses it for any other. Without it
a cursor of ``/runs/R1/results?status=PASS`` was taken for ``?status=FAIL`` or for run R3, and
the page silently skipped every row before its key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import cast

#: Hex digits of the digest a bound cursor carries (what it was read with, not a secret: a
#: mistake is refused, a forged one only pages the listing it names).
SCOPE_CHARS = 16
NOT_OURS = "cursor is not one this server returned"
OTHER_LISTING = (
    "cursor belongs to another listing (another run or status filter): a cursor continues "
    "only the listing that returned it; ask for the first page again without it"
)


def cursor_scope(*values: str | None) -> str:
    """The digest that binds a cursor to what its listing was read with (None is "")."""
    raw = json.dumps([value or "" for value in values], separators=(",", ":")).encode()
    return hashlib.sha256(raw).hexdigest()[:SCOPE_CHARS]


def encode_cursor(*parts: str, scope: str | None = None) -> str:
    """An opaque page cursor (URL-safe base64 of a JSON list); ``scope``
    (:func:`cursor_scope`): the listing it is bound to, its last part."""
    values = [*parts, scope] if scope is not None else list(parts)
    raw = json.dumps(values, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, size: int, *, scope: str | None = None) -> list[str]:
    """The ``size`` parts of a cursor made by :func:`encode_cursor` (with the same ``scope``
    when one is given); ValueError when it is not one, or is bound to another listing."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        parts = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise ValueError(NOT_OURS) from None
    if (
        not isinstance(parts, list)
        or len(parts) != size + (scope is not None)
        or not all(isinstance(p, str) and _storable(p) for p in parts)
    ):
        raise ValueError(NOT_OURS)
    if scope is not None:
        if parts.pop() != scope:
            raise ValueError(OTHER_LISTING)
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
