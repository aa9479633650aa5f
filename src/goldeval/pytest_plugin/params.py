"""The parameter of a golden item: which case, which attempt, which model.

Kept apart and light (no pytest at import time) so that the entry point, the collection, the
per-item fixtures and the run state can all read an item's parameter without importing each
other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from goldeval.dataset.case import GoldenCase


@dataclass(frozen=True, slots=True)
class GoldenParam:
    case: GoldenCase
    attempt: int
    model: str | None = None
    #: The manifest variant that runs ``model`` (issue 35): the id carries its name instead.
    variant: str | None = None

    @property
    def id(self) -> str:
        base = f"{self.case.id}-attempt{self.attempt}"
        label = self.variant or self.model
        return f"{base}-{label}" if label else base


#: The argument the golden test is parametrised on (indirectly): its param is a GoldenParam.
PARAM_ARG = "golden_answer"


def param_of(item: Any) -> GoldenParam | None:
    """The collected (case, attempt, model) of a golden item, None for any other item."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    return callspec.params.get(PARAM_ARG)  # type: ignore[no-any-return]


#: The golden test function (pytest_plugin.golden_test); its items' node ids end in
#: ``::test_golden[<GoldenParam.id>]``.
GOLDEN_TEST = "test_golden"
_GOLDEN_MARK = f"::{GOLDEN_TEST}["
# The case id is matched greedily: a case id may itself hold "-attempt<n>" (SAFE_ID allows
# "login-attempt3"), so the item's own attempt is the last such part the label leaves over.
# A label (model or variant name) holding "-attempt<n>" is read wrongly in turn; case ids
# are rows' data and far more varied than the few names a session's labels come from.
_GOLDEN_ID = re.compile(
    r"::" + GOLDEN_TEST + r"\[(?P<case>.+)-attempt(?P<n>\d+)(?:-(?P<model>.+))?\]$"
)


def is_golden_nodeid(nodeid: str) -> bool:
    """Whether a node id (of a report, or of xdist's collection list) is a golden item's.

    The xdist controller and reports carry node ids only, not items: there is no public way to
    reach an item's params from them, so the id is read. The form is pytest's documented node
    id (``path::function[param-id]``) with our param id (:attr:`GoldenParam.id`);
    tests/unit/test_pytest_internals.py fails if a collected item's id stops parsing back.
    """
    return _GOLDEN_MARK in nodeid


def parse_golden_nodeid(nodeid: str) -> tuple[str, int, str | None] | None:
    """``(case id, attempt, label or None)`` of a golden item's node id, else None; the label
    is the model, or the variant's name when the session runs variants
    (``GoldenSession.label_model`` maps it back)."""
    match = _GOLDEN_ID.search(nodeid)
    if match is None:
        return None
    return match["case"], int(match["n"]), match["model"]
