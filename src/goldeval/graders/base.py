"""The grader interface.

A grader owns a set of ``expect`` keys: it validates them at collection (so a typo is a
collection error, not a silently disabled check) and grades an answer against them. Hard
graders decide PASS/FAIL; soft graders are reported, never gate an attempt.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from goldeval.dataset.expect import ExpectKey

__all__ = ["ExpectKey", "GradeContext", "Grader"]

if TYPE_CHECKING:
    from goldeval.core.models import GraderOutcome
    from goldeval.dataset.case import GoldenCase
    from goldeval.dataset.pack import Pack
    from goldeval.providers.base import Answer


@dataclass
class GradeContext:
    """Everything a grader may look at for one attempt."""

    case: GoldenCase
    answer: Answer
    retrieved: list[str]
    pack: Pack | None
    options: Mapping[str, Any] = field(default_factory=dict)


class Grader(abc.ABC):
    """Base class for graders. Subclasses set ``name`` and ``expect_keys``."""

    name: str = ""
    expect_keys: Sequence[ExpectKey] = ()
    #: Hard graders decide PASS/FAIL. A dataset manifest may switch a grader (``graders:``).
    hard: bool = True
    #: Bump it when the same rows and answers can get a different verdict: the protocol's
    #: ``graderConfigHash`` covers :attr:`config_name`, so baselines graded by an older version
    #: become incomparable instead of being compared with a different grader.
    version: int = 1

    @property
    def config_name(self) -> str:
        """The name in the protocol's grader configuration: ``name``, or ``name@v<version>``
        from version 2 on (version 1 keeps the hashes of baselines captured before versions)."""
        return self.name if self.version == 1 else f"{self.name}@v{self.version}"

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        """Extra semantic checks of this grader's keys: a list of (field, message)."""
        return []

    def applies(self, case: GoldenCase) -> bool:
        """Whether this grader grades ``case`` (default: the row uses one of its keys)."""
        return any(k.name in case.expect for k in self.expect_keys)

    @abc.abstractmethod
    def grade(self, ctx: GradeContext) -> GraderOutcome:
        """Grade one answer. Must not raise on malformed answers: report violations."""
