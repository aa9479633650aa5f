"""Adaptive attempts under xdist (``--golden-attempts=auto:MAX -n N``): rounds kept in order
by the controller's scheduler.

A round's plan needs every attempt of the round before it, and only the controller sees them
all (workers see their own). So the controller schedules: an item of round k+1 goes to a
worker only after every item of round k has reported and the plan of round k+1 has been
written to a folder the workers read (``goldeval.pytest_plugin.adaptive``). No worker ever
waits on another: a worker that reads a plan finds it written.

One wrinkle of xdist: a worker runs an item only once it holds the item after it (or is told
to shut down). A worker whose last item is of round k would never run it while round k+1 is
held back, so it is sent one item of round k+1 (a *bridge*); the bridge itself runs only when
the worker is sent something more, which happens after round k+1 is released, so its plan is
there. When no bridge is left (more workers than items in the round), the worker is shut
down instead, which runs its last item; the other workers carry the later rounds.

Based on xdist's ``LoadScheduling`` (its ``pending`` list holds only released items here).
"""

from __future__ import annotations

import bisect
import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScheduling  # type: ignore[import-untyped]

from goldeval.pytest_plugin.params import parse_golden_nodeid

#: The ``workerinput`` key of the folder the controller writes round plans to.
PLANS_KEY = "goldeval_round_plans"


def round_of(nodeid: str) -> int:
    """The round of an item: a golden item's attempt number; anything else runs in round 1."""
    parsed = parse_golden_nodeid(nodeid)
    return max(1, parsed[1]) if parsed is not None else 1


def plan_path(folder: Path, round_no: int) -> Path:
    return folder / f"round-{round_no}.json"


def write_plan(folder: Path, round_no: int, plan: dict[str, Any]) -> None:
    """Written whole, then renamed: a worker never reads half a plan."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".round-{round_no}-")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(plan, out)
    os.replace(tmp, plan_path(folder, round_no))


def read_plan(folder: Path, round_no: int) -> dict[str, Any] | None:
    """The plan of ``round_no``, or None when the controller did not release that round
    (the session stopped before the round before it ended)."""
    try:
        text = plan_path(folder, round_no).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    plan: dict[str, Any] = json.loads(text)
    return plan


class RoundScheduling(LoadScheduling):  # type: ignore[misc]
    """xdist's load scheduling over the released rounds only.

    ``on_release(k, nodeids)`` is called on the controller when round k may start (k = 1 at
    once; k > 1 when every item of rounds < k has completed), before any of its items is
    sent to a worker: it writes the round's plan."""

    # LoadScheduling's attributes (xdist ships no types)
    collection: list[str] | None
    maxschedchunk: int | None

    def __init__(
        self, config: pytest.Config, log: Any, on_release: Callable[[int, list[str]], None]
    ) -> None:
        super().__init__(config, log)
        self._on_release = on_release
        self._round: list[int] = []  # by collection index
        self._held: dict[int, list[int]] = {}  # round -> unreleased, unsent indices
        self._left: Counter[int] = Counter()  # round -> items not yet completed
        self._completed: set[int] = set()  # indices counted in _left (once each)
        self._released = 0
        self._last = 0  # the last round

    # -- rounds ---------------------------------------------------------------------------

    def _start(self, collection: Sequence[str]) -> None:
        self._round = [round_of(nodeid) for nodeid in collection]
        for index, round_no in enumerate(self._round):
            self._held.setdefault(round_no, []).append(index)
            self._left[round_no] += 1
        self._last = max(self._held, default=0)
        self.pending[:] = []
        self._release_ready()

    def _done(self, index: int) -> None:
        if index not in self._completed:
            self._completed.add(index)
            self._left[self._round[index]] -= 1
        self._release_ready()

    def _requeue(self, index: int) -> None:
        """An item sent back (a crashed worker's, a rerun): to its held round or to pending."""
        if index in self._completed:
            self._completed.discard(index)
            self._left[self._round[index]] += 1
        round_no = self._round[index]
        if round_no > self._released:
            bisect.insort(self._held.setdefault(round_no, []), index)
        else:
            bisect.insort(self.pending, index)

    def _stopping(self) -> bool:
        """Whether xdist's session is shutting down (-x, --maxfail, a signal, too many
        crashed workers): no round is released (planned, counted, sent) after that. Not
        "every worker shut down": a worker shut down for want of a bridge is no stop."""
        dsession = self.config.pluginmanager.get_plugin("dsession")
        return bool(getattr(dsession, "shuttingdown", False))

    def _release_ready(self) -> None:
        """Release the next rounds while every item of the rounds before has completed."""
        while (
            self._released < self._last
            and not self._stopping()
            and all(self._left[r] == 0 for r in range(1, self._released + 1))
        ):
            self._released += 1
            round_no = self._released
            assert self.collection is not None
            ids = [self.collection[i] for i, r in enumerate(self._round) if r == round_no]
            self._on_release(round_no, ids)
            for index in self._held.pop(round_no, []):
                bisect.insort(self.pending, index)

    def _unreleased(self) -> bool:
        """Whether rounds are still held back (their items may all be out as bridges)."""
        return self._released < self._last

    # -- xdist's scheduler interface ------------------------------------------------------

    @property
    def tests_finished(self) -> bool:
        # xdist shuts every worker down once this is true: never while rounds are held.
        return not self._unreleased() and bool(super().tests_finished)

    @property
    def has_pending(self) -> bool:
        return self._unreleased() or bool(super().has_pending)

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:
            for node in self.nodes:
                self.check_schedule(node)
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = next(iter(self.node2collection.values()))
        if not self.collection:
            return
        if self.maxschedchunk is None:
            self.maxschedchunk = len(self.collection)
        self._start(self.collection)
        for node in self.nodes:
            self.check_schedule(node)

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        super().add_node_collection(node, collection)
        if self._round:  # a worker started in a crashed one's place: rounds may move again
            self._release_ready()

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        self.node2pending[node].remove(item_index)
        self._done(item_index)
        for other in self.nodes:  # a released round may fill every worker, not only this one
            self.check_schedule(other, duration=duration if other is node else 0)

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        if node.shutting_down:
            return
        if self.pending and self._holds_bridge(node):
            # Released items re-queued after a worker crashed: behind this worker's bridge
            # they would let the bridge run before its round; the worker xdist starts in the
            # crashed one's place takes them (or xdist ends the session past its restarts).
            return
        if self.pending:
            super().check_schedule(node, duration)
            if self.pending:
                return
        if not self._unreleased():
            node.shutdown()
            return
        queue = self.node2pending[node]
        if len(queue) != 1 or self._round[queue[0]] > self._released:
            return  # it can run what it holds, holds nothing, or waits on its bridge
        bridges = self._held.get(self._released + 1)
        if bridges:
            index = bridges.pop(0)
            queue.append(index)
            node.send_runtest_some([index])
        else:
            node.shutdown()

    def _holds_bridge(self, node: Any) -> bool:
        return any(self._round[i] > self._released for i in self.node2pending.get(node, ()))

    def remove_node(self, node: Any) -> str | None:
        pending = self.node2pending.pop(node)
        if not pending:
            return None
        assert self.collection is not None
        first = pending[0]
        if self._round[first] > self._released and not node.shutting_down:
            # A worker holding only its bridge is idle (it runs nothing until it holds the
            # next item): nothing crashed while running, the bridge goes back to its round.
            crashed = None
        else:
            crashed = pending.pop(0)  # xdist reports it as failed: it completed
        for index in pending:
            self._requeue(index)
        if crashed is not None:
            self._done(crashed)
        for other in self.nodes:
            self.check_schedule(other)
        return None if crashed is None else str(self.collection[crashed])

    def mark_test_pending(self, item: str) -> None:
        """A crashed item sent back to run again (pytest-rerunfailures' crash handling):
        it is no longer complete, and keeps its round."""
        assert self.collection is not None
        self._requeue(self.collection.index(item))
        for node in self.nodes:
            self.check_schedule(node)


class AdaptiveRoundsPlugin:
    """Registered on an xdist controller with ``--golden-attempts=auto:MAX``: the plans'
    folder for the workers and the scheduler that keeps the rounds in order."""

    def __init__(self, on_release: Callable[[Path, int, list[str]], None]) -> None:
        self._on_release = on_release
        self.folder = Path(tempfile.mkdtemp(prefix="goldeval-rounds-"))

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[PLANS_KEY] = str(self.folder)

    @pytest.hookimpl(tryfirst=True, optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        return RoundScheduling(
            config, log, lambda round_no, ids: self._on_release(self.folder, round_no, ids)
        )

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
