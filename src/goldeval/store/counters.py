"""Counters for the service's ``/metrics``, kept in the store as runs and attempts move.

A scrape must not scan attempts (issue 33: 2.9 s at ~28k attempts, past Prometheus' timeout
near 100k). So every write that changes what ``/metrics`` reports also adds its delta to
``service_counters`` (name, labels, value) *in the same transaction*: a scrape reads a few
dozen counter rows whatever the store holds, and a crash never leaves a counter ahead of or
behind the rows it counts.

What is counted (``labels`` are the label values joined by ``|`` in the order given):

- ``runs`` (status|dataset): the service's queue rows by status and dataset, a gauge moved by
  every queue transition (:mod:`goldeval.store.queue`);
- ``attempts`` (status), ``provider_errors`` (error kind), ``tokens``, ``cost``: attempts
  written to the store (every run, service or CLI), counters that only grow. A stored ERROR
  attempt replaced by a later non-ERROR one counts both (two attempts were made); a re-sent
  attempt the store keeps as it was counts nothing;
- ``run_duration_bucket`` (le), ``run_duration_sum``, ``run_duration_count``: a histogram of
  the wall time of service runs that ran (claimed to finished).

Deadlocks: counter rows are always the last rows a transaction writes, and in sorted order, so
two transactions never wait on each other's counters while holding other rows the other needs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from goldeval.store.sql import Tx

#: Upper bounds (seconds) of the run duration histogram; +Inf is implied.
DURATION_BUCKETS: tuple[float, ...] = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200)

_UPSERT = (
    "INSERT INTO service_counters (name, labels, value) VALUES (?, ?, ?)"
    " ON CONFLICT (name, labels) DO UPDATE SET value = service_counters.value + excluded.value"
)

Deltas = Mapping[tuple[str, str], float]


def labels(*values: str) -> str:
    return "|".join(values)


def bump(tx: Tx, deltas: Deltas) -> None:
    """Add ``deltas`` ((name, labels) -> amount) to the counters, in key order."""
    rows = [(name, label, float(v)) for (name, label), v in sorted(deltas.items()) if v]
    if rows:
        tx.executemany(_UPSERT, rows)


def read(tx: Tx) -> dict[tuple[str, str], float]:
    """Every counter: one small table, independent of how many runs or attempts exist."""
    return {
        (str(name), str(label)): float(value)
        for name, label, value in tx.query("SELECT name, labels, value FROM service_counters")
    }


def run_moved(dataset: str, old: str | None, new: str | None) -> dict[tuple[str, str], float]:
    """The ``runs`` deltas of a queue row going from ``old`` to ``new`` status (None: the row
    appears / disappears)."""
    out: dict[tuple[str, str], float] = {}
    if old == new:
        return out
    if old is not None:
        out[("runs", labels(old, dataset))] = -1.0
    if new is not None:
        out[("runs", labels(new, dataset))] = 1.0
    return out


def run_duration(seconds: float) -> dict[tuple[str, str], float]:
    """The histogram deltas of one finished run (cumulative buckets, like Prometheus')."""
    seconds = max(0.0, seconds)
    out: dict[tuple[str, str], float] = {
        ("run_duration_bucket", _le(b)): 1.0 for b in DURATION_BUCKETS if seconds <= b
    }
    out[("run_duration_bucket", "+Inf")] = 1.0
    out[("run_duration_sum", "")] = seconds
    out[("run_duration_count", "")] = 1.0
    return out


def _le(bound: float) -> str:
    return repr(float(bound))


#: One attempt as written: (key, status, error kind, total tokens, estimated cost).
Written = tuple[Any, str, str | None, int | None, float | None]


def _applied(
    written: Sequence[Written], stored: Mapping[Any, str] | None
) -> Iterator[tuple[Written, str | None]]:
    """The attempts of a batch the store writes, each with the status it replaces (None: a
    new key). ``stored``: the status of each key already in the store before the batch (None:
    the batch was a plain insert, every row new). The store's upsert rule is applied in order:
    a key is written when new, or when it holds an ERROR and the batch's attempt is not one."""
    state = dict(stored or {})
    for attempt in written:
        key, status = attempt[0], attempt[1]
        before = state.get(key)
        if before is not None and not (before == "ERROR" and status != "ERROR"):
            continue
        state[key] = status
        yield attempt, before


def attempt_deltas(
    written: Sequence[Written], stored: Mapping[Any, str] | None
) -> dict[tuple[str, str], float]:
    """The counter deltas of a batch of attempts (``stored``: as :func:`_applied`)."""
    out: Counter[tuple[str, str]] = Counter()
    tokens = 0
    cost = 0.0
    for (_key, status, kind, total, price), _before in _applied(written, stored):
        out[("attempts", status)] += 1
        if status == "ERROR":
            out[("provider_errors", kind or "UNKNOWN")] += 1
        tokens += total or 0
        cost += price or 0.0
    result: dict[tuple[str, str], float] = {k: float(v) for k, v in out.items()}
    if tokens:
        result[("tokens", "")] = float(tokens)
    if cost:
        result[("cost", "")] = cost
    return result


# ---- a run's attempts by status (``run_counts``, schema 14)
#
# Unlike the counters above, these are the run's attempts *now*: an ERROR replaced by a
# rerun's PASS moves one attempt from ERROR to PASS. The run's writer lock is held by every
# write of its attempts, so two transactions never update one run's rows at once; the rows
# are deleted with the run (ON DELETE CASCADE). Sharing rows (:mod:`goldeval.store.sharing`)
# moves no attempt in or out of a run, so it leaves them as they are.

_UPSERT_RUN = (
    "INSERT INTO run_counts (run_id, status, n) VALUES (?, ?, ?)"
    " ON CONFLICT (run_id, status) DO UPDATE SET n = run_counts.n + excluded.n"
)


def run_count_deltas(
    written: Sequence[Written], stored: Mapping[Any, str] | None
) -> dict[str, int]:
    """How a batch moves its run's attempts by status (``stored``: as :func:`_applied`)."""
    out: Counter[str] = Counter()
    for (_key, status, *_rest), before in _applied(written, stored):
        out[status] += 1
        if before is not None:
            out[before] -= 1
    return {status: n for status, n in out.items() if n}


def bump_run(tx: Tx, run_id: str, deltas: Mapping[str, int]) -> None:
    """Add ``deltas`` (status -> amount) to the run's counts, in status order."""
    rows = [(run_id, status, int(n)) for status, n in sorted(deltas.items()) if n]
    if rows:
        tx.executemany(_UPSERT_RUN, rows)


def read_run(tx: Tx, run_id: str) -> dict[str, int]:
    """A run's attempts by status (statuses it has none of are left out): at most four rows
    of the primary key, however many attempts the run has."""
    rows = tx.query("SELECT status, n FROM run_counts WHERE run_id = ? AND n > 0", (run_id,))
    return {str(status): int(n) for status, n in rows}
