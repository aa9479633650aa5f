"""Adaptive attempts in a pytest session (issue 35, ``--golden-attempts=auto:MAX``).

The items are ordered by attempt (every selected case's attempt 1 for every variant, then
attempt 2, ...: a round). When the first item of a round starts, the round is planned from
what the session graded so far (goldeval.results.adaptive_attempts.plan_round); an item the
plan leaves out is skipped in its setup, before any call, with the reason, and is no attempt
of the run: it is counted in ``adaptiveAttempts.notNeeded``, never as a SKIPPED attempt.
Under xdist the controller plans each round (it alone sees every attempt) and its scheduler
sends a round's items only once the plan is written (goldeval.pytest_plugin.rounds); a worker
reads the plan of its item's round.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from goldeval.pytest_plugin.params import parse_golden_nodeid
from goldeval.pytest_plugin.rounds import PLANS_KEY, AdaptiveRoundsPlugin, read_plan, write_plan
from goldeval.pytest_plugin.xdist import distributes
from goldeval.results.adaptive_attempts import RoundPlan, plan_round
from goldeval.results.sampling import Tally

if TYPE_CHECKING:
    from goldeval.core.settings import RunSettings
    from goldeval.pytest_plugin.params import GoldenParam
    from goldeval.pytest_plugin.state import GoldenSession


@dataclass
class AdaptiveAttempts:
    """The rounds of one session: the plan of the current one and what was left out."""

    most: int
    round: int = 1
    plan: RoundPlan | None = None
    #: The round after which the comparison decided (None: it did not before MAX).
    decided_after: int | None = None
    not_needed: int = 0
    #: Attempts that ran per round (both variants together): :meth:`count_ran`.
    ran: Counter[int] | None = None
    #: Node ids of the items left out: their skip reports carry no attempt record.
    left_out: set[str] = field(default_factory=set)
    #: The selected case ids (set by the controller once collection is done).
    cases: list[str] = field(default_factory=list)
    #: On an xdist worker: the folder of the controller's round plans (pytest_plugin.rounds).
    plans: Path | None = None
    #: On an xdist worker: the plans read so far by round (None: the round was not released).
    read: dict[int, RoundPlan | None] = field(default_factory=dict)

    @classmethod
    def of(cls, settings: RunSettings) -> AdaptiveAttempts | None:
        """The session's rounds with ``--golden-attempts=auto:MAX``, else None."""
        return cls(settings.attempts) if settings.adaptive else None

    def needed(self, state: GoldenSession, param: GoldenParam) -> bool:
        """Whether this item's attempt runs (planning its round when it is the first)."""
        if self.plans is not None:
            return self._planned_by_controller(param)
        if param.attempt > self.round:
            self.round = param.attempt
            self.plan = _plan(state)
            if self.plan.decided and self.decided_after is None:
                self.decided_after = param.attempt - 1
        run = param.attempt == 1 or (
            self.plan is not None and not self.plan.decided and param.case.id in self.plan.cases
        )
        if not run:
            self.not_needed += 1
        return run

    def _planned_by_controller(self, param: GoldenParam) -> bool:
        """On an xdist worker: the plan the controller wrote before it sent this item."""
        if param.attempt == 1:
            return True
        assert self.plans is not None
        if param.attempt not in self.read:
            raw = read_plan(self.plans, param.attempt)
            self.read[param.attempt] = (
                None
                if raw is None
                else RoundPlan(bool(raw["decided"]), str(raw["verdict"]), frozenset(raw["cases"]))
            )
            if raw is not None and raw.get("decidedAfter") is not None:
                self.decided_after = int(raw["decidedAfter"])
        self.plan = self.read[param.attempt]
        return self.plan is not None and not self.plan.decided and param.case.id in self.plan.cases

    def release(self, state: GoldenSession, folder: Path, round_no: int, ids: list[str]) -> None:
        """On the xdist controller, before any item of round ``round_no`` is sent: plan it
        from every attempt graded so far, count it for run.json and write the plan."""
        plan = _plan(state) if round_no > 1 else None
        if plan is not None and plan.decided and self.decided_after is None:
            self.decided_after = round_no - 1
        self.round, self.plan = round_no, plan
        for nodeid in ids:
            parsed = parse_golden_nodeid(nodeid)
            if parsed is None:
                continue
            if plan is not None and (plan.decided or parsed[0] not in plan.cases):
                self.not_needed += 1
        if plan is not None:
            write_plan(
                folder,
                round_no,
                {
                    "decided": plan.decided,
                    "verdict": plan.verdict,
                    "cases": sorted(plan.cases),
                    "decidedAfter": self.decided_after,
                },
            )

    def reason(self, param: GoldenParam) -> str:
        plan = self.plan
        if plan is None and param.attempt > 1:
            return (
                f"not run: round {param.attempt} was never planned (the session stopped before "
                f"round {param.attempt - 1} ended)"
            )
        if plan is not None and plan.decided:
            after = self.decided_after if self.decided_after is not None else param.attempt - 1
            return (
                f"not needed: the comparison decided ({plan.verdict}) after round {after} "
                f"(--golden-attempts=auto:{self.most})"
            )
        return (
            f"not needed: both variants agree on {param.case.id} consistently (settled before "
            f"round {param.attempt}; --golden-attempts=auto:{self.most})"
        )

    def count_ran(self, attempts: Mapping[str, Mapping[tuple[str, int], object]]) -> None:
        """Count the attempts that ran per round (both variants together) from the records
        the session holds (``attempts``: the collector's, by case and (label, index)): the
        same serially and under xdist, also when the session stopped. Done once when the
        session finishes, before any run is written (writing a variant's run releases its
        attempts from the collector)."""
        self.ran = Counter(index for per_case in attempts.values() for _label, index in per_case)

    def dump(self) -> dict[str, Any]:
        """``adaptiveAttempts`` of run.json."""
        ran = self.ran or Counter()
        return {
            "rule": f"auto:{self.most}",
            "max": self.most,
            "rounds": max(ran, default=0),
            "attemptsByRound": {str(k): v for k, v in sorted(ran.items())},
            "notNeeded": self.not_needed,
            "decidedAfterRound": self.decided_after,
        }


def _plan(state: GoldenSession) -> RoundPlan:
    """The next round from the attempts the session's collector holds."""
    variants = state.variants
    gate = variants.compared() if variants is not None else None
    assert gate is not None  # checked at configure
    tallies: dict[str, dict[str, Tally]] = {gate.control: {}, gate.candidate: {}}
    for case_id, per_case in state.collector.attempts.items():
        for (key, _index), kept in per_case.items():
            side = tallies.get(key)
            if side is None:
                continue
            status = state.collector.record(kept).get("status")
            held = side.get(case_id, Tally(0, 0))
            graded = status in ("PASS", "FAIL")
            side[case_id] = Tally(
                held.passed + (status == "PASS"), held.graded + (1 if graded else 0)
            )
    return plan_round(
        tallies[gate.control],
        tallies[gate.candidate],
        state.adaptive.cases if state.adaptive is not None else [],
        gate.non_inferiority,
        rule=gate.outcome,
    )


def check_whole_cases(state: GoldenSession, params: list[GoldenParam | None]) -> None:
    """auto:MAX decides the attempts per case, so a selection must take whole cases: every
    attempt 1..MAX of every selected variant (``-k attempt2`` would run another protocol
    than its ``attemptsRule`` says). A usage error otherwise, before any call."""
    _check_whole_cases(state, [(p.case.id, p.variant, p.attempt) for p in params if p is not None])


def check_whole_case_ids(state: GoldenSession, nodeids: list[str]) -> None:
    """:func:`check_whole_cases` on the xdist controller, from the workers' node ids (it
    collects nothing itself), before anything is scheduled."""
    selected = [parsed for parsed in map(parse_golden_nodeid, nodeids) if parsed is not None]
    _check_whole_cases(state, [(case_id, label, n) for case_id, n, label in selected])


def _check_whole_cases(state: GoldenSession, selected: list[tuple[str, str | None, int]]) -> None:
    most = state.settings.attempts
    held: dict[tuple[str, str | None], set[int]] = {}
    for case_id, variant, attempt in selected:
        held.setdefault((case_id, variant), set()).add(attempt)
    gate = state.variants.compared() if state.variants is not None else None
    pair = {gate.control, gate.candidate} if gate is not None else set()
    variants = {variant for _, variant in held} | pair  # both compared sides, always
    cases = {case_id for case_id, _ in held}
    for case_id in sorted(cases):
        for variant in sorted(v or "" for v in variants):
            got = held.get((case_id, variant or None), set())
            if got != set(range(1, most + 1)):
                raise pytest.UsageError(
                    f"--golden-attempts=auto:{most} takes whole cases: {case_id} has attempts "
                    f"{sorted(got) or 'none'} of variant {variant or '(none)'} selected, not "
                    f"1..{most}; select rows (-k on the case id), not attempts"
                )


def skip_if_not_needed(state: GoldenSession, item: pytest.Item, param: GoldenParam) -> None:
    """Setup of a golden item: skip it (no call, no attempt) when its round leaves it out."""
    adaptive = state.adaptive
    if adaptive is not None and not adaptive.needed(state, param):
        adaptive.left_out.add(item.nodeid)
        pytest.skip(adaptive.reason(param))


def left_out(state: GoldenSession, item: pytest.Item) -> bool:
    """Whether the item is an attempt the auto:MAX rule left out (no attempt record)."""
    return state.adaptive is not None and item.nodeid in state.adaptive.left_out


def register_rounds(config: pytest.Config, state: GoldenSession) -> None:
    """Under xdist: the controller's round scheduler, or a worker's folder of its plans."""
    adaptive = state.adaptive
    if adaptive is None:
        return
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        # Without the controller's folder no round after the first is ever planned: those
        # items are left out as never planned and the run is incomplete, never green.
        adaptive.plans = Path(workerinput.get(PLANS_KEY) or config.rootpath / ".no-round-plans")
    elif distributes(config):

        def release(folder: Path, round_no: int, ids: list[str]) -> None:
            adaptive.release(state, folder, round_no, ids)

        config.pluginmanager.register(AdaptiveRoundsPlugin(release), "goldeval-adaptive-rounds")
