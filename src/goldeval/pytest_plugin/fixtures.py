"""The per-item fixtures ``golden_case``, ``golden_param``, ``golden_attempt``, ``golden_answer``.

They live on an object registered as a plugin (one per pytest config) rather than as module
functions taking ``request``, for speed: pytest builds a fresh fixture definition for
``request`` every time a fixture asks for it (twice per fixture, once more for the item), which
made ``request`` the largest single per-item cost at 100,000 items. Bound to this object, the
fixtures reach the session state directly and the item through :meth:`pytest_runtest_setup`.

Items are parametrised indirectly on ``golden_answer`` (the collected :class:`GoldenParam` is
its param), so an item sets up one fixture, as a plain parametrised test does. A conftest may
still override ``golden_case`` (asking for ``golden_param``, ``request`` or anything else): the
answer then asks pytest for it and uses the overriding case. Whether one is defined is looked
up once per session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from goldeval.pytest_plugin.adaptive import skip_if_not_needed
from goldeval.pytest_plugin.attempts import PendingAttempt, grade_attempt, obtain_answer
from goldeval.pytest_plugin.params import param_of

if TYPE_CHECKING:
    from goldeval.pytest_plugin.params import GoldenParam
    from goldeval.pytest_plugin.state import GoldenSession

# param_of is read here by the pytest-html glue as well.
__all__ = ["ItemFixtures", "param_of"]


class ItemFixtures:
    def __init__(self, state: GoldenSession) -> None:
        self.state = state
        self.item: pytest.Item | None = None
        #: The current item's answer, obtained in its setup and graded in its call phase.
        self.pending: PendingAttempt | None = None
        self._case_overridden: bool | None = None

    def _overridden(self, item: pytest.Item) -> bool:
        """Whether a conftest (or another plugin) defines ``golden_case`` over ours.

        No public API lists the definitions of a fixture for a node; the session's fixture
        manager does (pinned by tests/unit/test_pytest_internals.py). The dataset's items all
        live in one module, so the answer holds for the whole session.
        """
        if self._case_overridden is None:
            manager = getattr(item.session, "_fixturemanager", None)
            defs = manager.getfixturedefs("golden_case", item) if manager is not None else None
            # Without the manager (a future pytest): ask pytest for golden_case every time.
            self._case_overridden = defs is None or len(defs) != 1
        return self._case_overridden

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        # Function-scoped fixtures are created during this item's setup, call or teardown,
        # all of which come before the next item's setup.
        self.item = item
        self.pending = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> bool | None:
        """The call phase of a golden item: its answer graded, the outcome made pytest's.

        Here rather than in ``test_golden`` itself so that the item, the runner and the
        attempt reach the grading explicitly (the answer, the only value the test function
        gets, carries nothing but the provider's answer).
        """
        pending = self.pending
        if pending is None or pending.item is not pyfuncitem:
            return None  # not a golden item, or its golden_answer is not ours
        # Kept until the next item's setup: a rerun plugin that runs this call phase again
        # grades it again, and the runner reports that as a RERUN error.
        ending = grade_attempt(self.state, pending)
        del pending  # raised from a frame that holds no answer (see grade_attempt)
        if ending is not None:
            raise ending
        return True

    def _param(self) -> GoldenParam:
        item = self.item
        param = param_of(item) if item is not None else None
        if param is None:
            raise pytest.UsageError(
                "golden_case/golden_param/golden_answer serve the golden items collected from "
                "the dataset (--golden=ID); other tests cannot request them"
            )
        return param

    @pytest.fixture
    def golden_param(self) -> GoldenParam:
        """The collected (case, attempt, model) of this item."""
        return self._param()

    @pytest.fixture
    def golden_case(self) -> Any:
        """The :class:`goldeval.dataset.case.GoldenCase` of this item (override it in a
        conftest)."""
        return self._param().case

    @pytest.fixture
    def golden_attempt(self) -> int:
        """The attempt number (1-based) of this item."""
        return self._param().attempt

    @pytest.fixture
    def golden_answer(self) -> Any:
        """The provider's answer for this attempt, obtained during setup (faults → ERROR).

        ``golden_case`` (when a conftest overrides it), ``golden_provider``,
        ``golden_retriever`` and ``golden_graders`` are asked for at run time rather than
        declared here: each fixture in an item's chain is set up per item, and at 100,000 items
        every one of them shows.
        """

        item = self.item
        assert item is not None
        param = self._param()
        skip_if_not_needed(self.state, item, param)  # --golden-attempts=auto:MAX
        case = param.case
        if self._overridden(item):
            # item._request: see goldeval.pytest_plugin.attempts.session_fixtures.
            case = item._request.getfixturevalue("golden_case")  # type: ignore[attr-defined]
        self.pending = obtain_answer(self.state, item, param, case)
        answer = self.pending.answer
        assert answer is not None  # graded in the call phase, after this
        return answer
