"""The round scheduler of adaptive attempts under xdist (goldeval.pytest_plugin.rounds),
driven by simulated workers that behave as xdist's do: a worker runs the first item it holds
only once it holds the next one or has been told to shut down.

What must hold for every shape (workers, cases, rounds, plain tests, crashes): no item of a
round runs before that round was released (its plan written), every round is released only
after every item of the rounds before it completed, every item runs exactly once, and the
session ends (no worker left waiting)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from goldeval.pytest_plugin.rounds import RoundScheduling, read_plan, round_of, write_plan


class _DSession:
    shuttingdown = False


class _PluginManager:
    def __init__(self) -> None:
        self.dsession = _DSession()

    def get_plugin(self, name: str) -> Any:
        return self.dsession if name == "dsession" else None


class _Config:
    def __init__(self, workers: int) -> None:
        self._values = {"tx": [f"{workers}*popen"], "maxschedchunk": None}
        self.pluginmanager = _PluginManager()

    def getvalue(self, name: str) -> Any:
        return self._values[name]

    getoption = getvalue


@dataclass(eq=False)
class _Worker:
    name: str
    queue: list[int] = field(default_factory=list)
    shutting_down: bool = False

    @property
    def gateway(self) -> Any:
        return type("Gateway", (), {"id": self.name})()

    def send_runtest_some(self, indices: list[int]) -> None:
        assert not self.shutting_down
        self.queue.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True

    def can_run(self) -> bool:
        return len(self.queue) >= 2 or (self.shutting_down and bool(self.queue))


def _collection(cases: int, variants: int, rounds: int, plain: int) -> list[str]:
    ids = [f"tests/test_plain.py::test_{n}" for n in range(plain)]
    for attempt in range(1, rounds + 1):
        for case in range(cases):
            for variant in range(variants):
                ids.append(
                    f"golden/g/golden-g.jsonl::test_golden[c{case}-attempt{attempt}-v{variant}]"
                )
    return ids


def _simulate(
    workers: int,
    cases: int,
    variants: int,
    rounds: int,
    plain: int,
    seed: int,
    crashes: int,
    crash_rate: float = 0.05,
    reruns: bool = False,
    stop_after: int | None = None,
) -> None:
    rng = random.Random(seed)
    collection = _collection(cases, variants, rounds, plain)
    released: list[int] = []
    ran: list[str] = []
    sched: RoundScheduling | None = None

    def on_release(round_no: int, ids: list[str]) -> None:
        assert sched is not None
        assert round_no == len(released) + 1
        assert ids == [i for i in collection if round_of(i) == round_no]
        # every item of the rounds before has completed
        done = set(ran)
        assert all(i in done for i in collection if round_of(i) < round_no)
        released.append(round_no)

    config = _Config(workers)
    sched = RoundScheduling(config, None, on_release)  # type: ignore[arg-type]
    nodes = [_Worker(f"gw{n}") for n in range(workers)]
    for node in nodes:
        sched.add_node(node)
    for node in nodes:
        sched.add_node_collection(node, collection)
    sched.schedule()
    spawned = workers
    starting: list[int] = []  # steps left until a replacement worker has collected

    def start_one() -> None:
        nonlocal spawned
        fresh = _Worker(f"gw{spawned}")
        spawned += 1
        sched.add_node(fresh)
        sched.add_node_collection(fresh, collection)
        sched.schedule()

    for _step in range(10 * len(collection) + 100):
        if sched.tests_finished or (stop_after is not None and len(ran) >= stop_after):
            config.pluginmanager.dsession.shuttingdown = True  # xdist's triggershutdown
            for node in sched.nodes:
                node.shutdown()  # what xdist's DSession does (at the end, or on -x)
        starting = [n - 1 for n in starting]
        for _ in [n for n in starting if n <= 0]:
            start_one()
        starting = [n for n in starting if n > 0]
        runnable = [n for n in sched.nodes if n.can_run()]
        if not runnable and starting:
            starting.pop()
            start_one()  # nothing else happens until it is up
            continue
        if not runnable:
            break
        if crashes and rng.random() < crash_rate:
            crashes -= 1
            # Any worker holding something dies, also one idle with only its bridge.
            node = rng.choice([n for n in sched.nodes if n.queue] or runnable)
            held = list(sched.node2pending[node])
            running = bool(held) and (node.can_run() or round_of(collection[held[0]]) in released)
            if running:  # xdist reports the first item held as failed: it completed
                assert round_of(collection[held[0]]) in released
                ran.append(collection[held[0]])
            crashed = sched.remove_node(node)  # xdist: the worker died, a new one starts
            assert crashed == (ran[-1] if running else None)
            if crashed is not None and reruns and rng.random() < 0.5:
                ran.remove(crashed)  # pytest-rerunfailures sends a crashed item back
                sched.mark_test_pending(crashed)
            starting.append(rng.randint(0, 6))  # xdist starts a worker in its place, later
            continue
        node = rng.choice(runnable)
        index = node.queue.pop(0)
        if stop_after is not None and round_of(collection[index]) not in released:
            sched.mark_test_complete(node, index)  # skipped as never planned on the worker
            continue
        nodeid = collection[index]
        assert round_of(nodeid) in released, f"{nodeid} ran before its round was released"
        ran.append(nodeid)
        sched.mark_test_complete(node, index)
    assert not any(n.queue for n in sched.nodes), "no worker is left holding an item"
    if stop_after is not None:
        stopped_in = round_of(ran[stop_after - 1])
        assert released[-1] <= stopped_in + 1  # nothing released after the stop
        assert len(set(ran)) == len(ran)
        return
    assert sorted(ran) == sorted(collection), "every item runs exactly once"
    assert released == list(range(1, rounds + 1))


@pytest.mark.parametrize("seed", range(40))
def test_rounds_run_in_order_on_any_shape(seed: int) -> None:
    rng = random.Random(seed)
    _simulate(
        workers=rng.randint(1, 4),
        cases=rng.randint(1, 5),
        variants=rng.randint(1, 2),
        rounds=rng.randint(1, 4),
        plain=rng.choice([0, 0, 1, 6]),
        seed=seed,
        crashes=rng.choice([0, 0, 2]),
    )


def test_more_workers_than_items_in_a_round() -> None:
    """One case, two variants, four workers: bridges run out, workers are shut down
    instead, and the remaining workers carry the later rounds."""
    for seed in range(10):
        _simulate(workers=4, cases=1, variants=2, rounds=3, plain=5, seed=seed, crashes=0)


def test_a_plan_is_read_whole(tmp_path: Any) -> None:
    assert read_plan(tmp_path, 2) is None  # never released
    write_plan(tmp_path, 2, {"decided": False, "verdict": "UNDERPOWERED", "cases": ["a"]})
    assert read_plan(tmp_path, 2) == {"decided": False, "verdict": "UNDERPOWERED", "cases": ["a"]}
    assert [p.name for p in tmp_path.iterdir()] == ["round-2.json"]  # no temporary left


@pytest.mark.parametrize("seed", range(30))
def test_a_crashed_workers_items_keep_their_round(seed: int) -> None:
    """A worker dies holding items of the released round and a bridge of the next: the
    bridge goes back to its held round, not to the items sent at once."""
    _simulate(
        workers=2, cases=2, variants=2, rounds=4, plain=0, seed=seed, crashes=4, crash_rate=0.3
    )


@pytest.mark.parametrize("seed", range(30))
def test_a_rerun_crashed_item_is_counted_once(seed: int) -> None:
    """pytest-rerunfailures sends a crashed item back (``mark_test_pending``): its round
    waits for it again and the later rounds are still released, each once."""
    _simulate(
        workers=2,
        cases=2,
        variants=2,
        rounds=4,
        plain=3,
        seed=seed,
        crashes=4,
        crash_rate=0.3,
        reruns=True,
    )


@pytest.mark.parametrize("seed", range(20))
def test_a_stopped_session_releases_no_later_round(seed: int) -> None:
    """-x: xdist shuts every worker down; the rounds not yet released stay held (their
    bridges run as never planned) and the session ends."""
    _simulate(
        workers=3,
        cases=3,
        variants=2,
        rounds=4,
        plain=0,
        seed=seed,
        crashes=0,
        stop_after=random.Random(seed).randint(1, 20),
    )


@pytest.mark.parametrize("seed", range(40))
def test_workers_shut_down_for_want_of_a_bridge_are_no_stop(seed: int) -> None:
    """More workers than items in a round: some are shut down (no bridge left), others
    hold bridges and die idle; the rounds still move on with the workers started in the
    dead ones' place."""
    _simulate(
        workers=3, cases=1, variants=1, rounds=4, plain=4, seed=seed, crashes=3, crash_rate=0.4
    )
