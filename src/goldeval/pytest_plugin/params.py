"""The parameter of a golden item: which case, which attempt, which model.

Kept apart and light (no pytest at import time) so that the entry point, the collection, the
per-item fixtures and the run state can all read an item's parameter without importing each
other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from goldeval.dataset.case import GoldenCase


@dataclass(frozen=True)
class GoldenParam:
    case: GoldenCase
    attempt: int
    model: str | None = None

    @property
    def id(self) -> str:
        base = f"{self.case.id}-attempt{self.attempt}"
        return f"{base}-{self.model}" if self.model else base


#: The argument the golden test is parametrised on (indirectly): its param is a GoldenParam.
PARAM_ARG = "golden_case"


def param_of(item: Any) -> GoldenParam | None:
    """The collected (case, attempt, model) of a golden item, None for any other item."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    return callspec.params.get(PARAM_ARG)  # type: ignore[no-any-return]
