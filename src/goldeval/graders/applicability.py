"""Which graders grade a case, without asking every grader about every row.

The built-in rules (:meth:`Grader.applies`, :meth:`BuiltinGrader.applies`, the contract's and
``must_not``'s) look only at which ``expect`` keys a row has (and which of them are null) and
whether it has ``must_not``. Rows of a dataset share a handful of such shapes, so the answer is
worked out once per shape; a grader with its own ``applies`` (a third-party one) is still asked
about every case. Asking eleven graders about each of 100,000 rows was a visible part of both
the pre-run protocol check and grading (docs/performance.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from goldeval.graders.base import Grader
from goldeval.graders.common import BuiltinGrader
from goldeval.graders.contract import ContractGrader
from goldeval.graders.must_not import MustNotGrader

if TYPE_CHECKING:
    from goldeval.dataset.case import GoldenCase

__all__ = ["Applicability"]

#: The ``applies`` implementations that depend on the row's shape only (see the module text).
_SHAPE_RULES: frozenset[Callable[..., Any]] = frozenset(
    {Grader.applies, BuiltinGrader.applies, ContractGrader.applies, MustNotGrader.applies}
)

_NONE: frozenset[str] = frozenset()
#: (the expect keys, those set to null, whether must_not is non-empty)
_Shape = tuple[frozenset[str], frozenset[str], bool]


class Applicability:
    """The graders of a session, with :meth:`graders_for` memoised by row shape."""

    def __init__(self, graders: Sequence[Grader]) -> None:
        self.graders = list(graders)
        self._by_shape = [type(g).applies in _SHAPE_RULES for g in self.graders]
        self._shapes: dict[_Shape, tuple[bool, ...]] = {}

    @staticmethod
    def _shape(case: GoldenCase) -> _Shape:
        expect = case.expect
        # Rows as loaded have no null values (the loader drops them); an overriding conftest's
        # row may, and the rules differ on them (a key present vs a key with a value).
        nulls = (
            frozenset(k for k, v in expect.items() if v is None)
            if None in expect.values()
            else _NONE
        )
        return frozenset(expect), nulls, bool(case.must_not)

    def flags(self, case: GoldenCase) -> list[bool]:
        """For each grader, in order: whether it grades ``case``."""
        shape = self._shape(case)
        known = self._shapes.get(shape)
        if known is None:
            known = tuple(g.applies(case) for g in self.graders)
            self._shapes[shape] = known
            return list(known)
        return [
            flag if by_shape else g.applies(case)
            for g, flag, by_shape in zip(self.graders, known, self._by_shape, strict=True)
        ]

    def graders_for(self, case: GoldenCase) -> list[Grader]:
        return [g for g, on in zip(self.graders, self.flags(case), strict=True) if on]

    def used_by_any(self, cases: Iterable[GoldenCase]) -> list[Grader]:
        """The graders that grade at least one of ``cases``, in order."""
        used = [False] * len(self.graders)
        for case in cases:
            for n, on in enumerate(self.flags(case)):
                used[n] = used[n] or on
        return [g for g, on in zip(self.graders, used, strict=True) if on]
