"""The ``expect`` keys of a row: name, JSON type and description.

A grader declares the keys it reads; the dataset loader checks every row's ``expect`` against
the declared keys of the graders in use, so a typo is a collection error instead of a silently
disabled check. The key type lives here, with the rows it describes, so loading a dataset needs
nothing from the graders but the list of keys the caller passes in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ExpectKey:
    """One ``expect`` key a grader reads, with its JSON type and a one-line description."""

    name: str
    kind: str  # str | int | number | bool | list[str] | object | list | any
    description: str = ""

    def check(self, value: Any) -> str | None:
        """Return a message when ``value`` does not have this key's type, else None."""
        ok: bool
        if self.kind == "str":
            ok = isinstance(value, str)
        elif self.kind == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif self.kind == "number":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif self.kind == "bool":
            ok = isinstance(value, bool)
        elif self.kind == "list[str]":
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        elif self.kind == "object":
            ok = isinstance(value, dict)
        elif self.kind == "list":
            ok = isinstance(value, list)
        else:
            ok = True
        if ok:
            return None
        return f"expected {self.kind}, got {type(value).__name__} {_short(value)}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
