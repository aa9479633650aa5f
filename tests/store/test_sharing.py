"""Repeated runs share their rows (schema 13, goldeval.store.sharing): a run that repeats the
latest run of its dataset keeps only its timings, and reads back exactly what it recorded.

Real SQLite files and a real PostgreSQL schema (tests/store/conftest.py). The records span
several ``run_timings`` chunks (CHUNK_ROWS), so pages read chunks by key.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from goldeval.store import Store
from goldeval.store.sharing import CHUNK_ROWS
from tests.store.conftest import Target

CASES = [f"case-{n:03d}" for n in range(200)] + ["Zeta", "ж-1"]  # code point order matters
STATUSES = ("PASS", "FAIL", "PASS", "SKIPPED", "ERROR")


def _records(offset: int) -> list[dict[str, Any]]:
    """Three attempts per case, statuses mixed; ``offset`` changes only the timings."""
    out = []
    for n, case_id in enumerate(CASES):
        for index in (1, 2, 3):
            status = STATUSES[(n + index) % len(STATUSES)]
            record: dict[str, Any] = {
                "caseId": case_id,
                "index": index,
                "status": status,
                "durationMs": offset + n * 3 + index,
                "tries": 1 + (offset + n) % 2,
                "output": f"answer of {case_id}",
                "tokens": {"inputTokens": 9, "outputTokens": 1, "totalTokens": 10},
            }
            if status == "ERROR":
                record["errorKind"] = "TIMEOUT"
            out.append(record)
    return out


def _run(
    store: Store,
    run_id: str,
    records: list[dict[str, Any]],
    *,
    status: str = "COMPLETED",
    dataset_hash: str = "h1",
) -> None:
    _resume(store, run_id, dataset_hash)
    store.record_cases(run_id, [{"caseId": c, "prompt": f"p {c}"} for c in CASES])
    store.record_attempts(run_id, records)
    store.finish_run(run_id, status, {"status": status})  # type: ignore[arg-type]


def _three_runs(store: Store) -> tuple[list[dict[str, Any]], ...]:
    """run-1, then run-2 and run-3 repeating it with other timings: both share run-1's rows."""
    runs = (_records(100), _records(5000), _records(9000))
    for n, records in enumerate(runs, start=1):
        _run(store, f"run-{n}", records)
    return runs


def _resume(store: Store, run_id: str, dataset_hash: str = "h1") -> None:
    """Begin ``run_id`` of demo-v1, or resume it when it exists."""
    store.begin_run(
        run_id,
        dataset_id="demo-v1",
        dataset_hash=dataset_hash,
        mode="fixture",
        protocol={"attempts": 3},
        configuration={},
    )


def _owner(target: Target, run_id: str) -> Any:
    return target.query("SELECT rows_of FROM runs WHERE run_id = ?", (run_id,))[0][0]


def _own_rows(target: Target, run_id: str) -> int:
    return int(target.query("SELECT COUNT(*) FROM attempts WHERE run_id = ?", (run_id,))[0][0])


def _timings(records: list[dict[str, Any]]) -> dict[tuple[str, int], tuple[Any, Any]]:
    return {(r["caseId"], r["index"]): (r["durationMs"], r["tries"]) for r in records}


def _pages(store: Store, run_id: str, limit: int, status: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    after = None
    while True:
        page = store.attempts_page(run_id, limit=limit, status=status, after=after)
        out += page
        if len(page) < limit:
            return out
        last = page[-1]
        after = (last["caseId"], last["index"], last.get("model") or "")


def _reads_back(store: Store, run_id: str, records: list[dict[str, Any]]) -> None:
    """Whole, paged (every status, JSON and records) and counted: what was recorded."""
    expected = _timings(records)
    whole = store.attempts(run_id)
    assert len(whole) == len(records)
    assert _timings(whole) == expected
    for status in (None, "FAIL", "ERROR"):
        paged = _pages(store, run_id, 37, status)
        wanted = [r for r in whole if status is None or r["status"] == status]
        assert paged == wanted
        first = store.attempts_page_json(run_id, limit=50, status=status)
        assert [r.case_id for r in first] == [r["caseId"] for r in wanted[:50]]
    counts: dict[str, int] = {}
    for r in records:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    assert store.attempt_counts(run_id) == counts
    assert [c["caseId"] for c in store.cases(run_id)] == sorted(CASES)
    assert len(store.graded_keys(run_id, include_errors=True)) == len(records)


def test_a_repeated_run_keeps_only_its_timings_and_reads_back_what_it_recorded(
    store: Store, target: Target
) -> None:
    first, second, third = _three_runs(store)
    assert len(first) > 2 * CHUNK_ROWS  # pages cross chunk boundaries
    assert (_owner(target, "run-2"), _owner(target, "run-3")) == ("run-1", "run-1")
    assert (_own_rows(target, "run-2"), _own_rows(target, "run-3")) == (0, 0)
    for run_id, records in (("run-1", first), ("run-2", second), ("run-3", third)):
        _reads_back(store, run_id, records)
    # SQL over runs: the view has every run's rows under its own id.
    per_run = target.query("SELECT run_id, COUNT(*) FROM run_attempts GROUP BY run_id")
    assert sorted(per_run) == [("run-1", len(first)), ("run-2", len(first)), ("run-3", len(first))]


@pytest.mark.parametrize(
    "change",
    ["one status", "one attempt fewer", "another dataset hash", "not completed"],
)
def test_a_run_that_is_not_a_repeat_keeps_its_own_rows(
    store: Store, target: Target, change: str
) -> None:
    _run(store, "run-1", _records(100))
    records = _records(200)
    options: dict[str, Any] = {}
    if change == "one status":
        records[7] = {**records[7], "status": "FAIL" if records[7]["status"] != "FAIL" else "PASS"}
        records[7].pop("errorKind", None)
    elif change == "one attempt fewer":
        records = records[:-1]
    elif change == "another dataset hash":
        options["dataset_hash"] = "h2"
    else:
        options["status"] = "INCOMPLETE"
    _run(store, "run-2", records, **options)
    assert _owner(target, "run-2") is None
    assert _own_rows(target, "run-2") == len(records)
    _reads_back(store, "run-2", records)


def test_writing_to_a_sharing_run_or_its_owner_gives_rows_back_first(
    store: Store, target: Target
) -> None:
    first, second, third = _three_runs(store)
    # A resumed sharing run (an ERROR attempt replaced by its retry) gets its own rows.
    error = next(r for r in second if r["status"] == "ERROR")
    retried = {**error, "status": "PASS", "durationMs": 1}
    retried.pop("errorKind")
    _resume(store, "run-2")
    store.record_attempts("run-2", [retried])
    assert _owner(target, "run-2") is None and _own_rows(target, "run-2") == len(second)
    second = [retried if r is error else r for r in second]
    _reads_back(store, "run-2", second)
    # A write to the owner: run-3, which reads its rows, gets its own first.
    _resume(store, "run-1")
    extra = {**first[0], "index": 4, "durationMs": 7}
    store.record_attempts("run-1", [extra])
    assert _owner(target, "run-3") is None and _own_rows(target, "run-3") == len(third)
    _reads_back(store, "run-3", third)
    _reads_back(store, "run-1", [*first, extra])


def test_deleting_the_owner_hands_its_rows_to_the_oldest_sharing_run(
    store: Store, target: Target
) -> None:
    _, second, third = _three_runs(store)
    assert store.delete_runs(["run-1"]) == 1
    assert _owner(target, "run-2") is None and _own_rows(target, "run-2") == len(second)
    assert _owner(target, "run-3") == "run-2" and _own_rows(target, "run-3") == 0
    _reads_back(store, "run-2", second)
    _reads_back(store, "run-3", third)
    # The owner deleted with every run that reads it: nothing is handed over, nothing left.
    assert store.delete_runs(["run-2", "run-3"]) == 2
    for table in ("attempts", "run_cases", "run_timings", "contents"):
        assert target.query(f"SELECT COUNT(*) FROM {table}")[0][0] == 0, table


def test_a_run_sharing_rows_takes_a_fraction_of_the_space(store: Store, target: Target) -> None:
    """What a sharing run adds is its timings: far less than a copy of the rows."""
    _run(store, "run-1", _records(100))
    _run(store, "run-2", _records(5000))
    rows = target.query("SELECT COUNT(*) FROM attempts")[0][0]
    chunks = target.query("SELECT COUNT(*) FROM run_timings WHERE run_id = 'run-2'")[0][0]
    assert rows == len(_records(0))  # one copy of the rows
    assert chunks == -(-rows // CHUNK_ROWS)


def test_the_space_of_the_rows_a_run_gave_up_is_given_back(store: Store, target: Target) -> None:
    """SQLite: a new store is created with incremental auto-vacuum, and after a run shared
    another's rows the pages its own rows used leave the file (they stayed as free pages).
    PostgreSQL: the store vacuums the two tables at once, which cuts the heap's empty tail
    (autovacuum did it a minute later at best; ten runs back to back kept ten runs' rows)."""
    if target.backend == "sqlite":
        assert target.query("PRAGMA auto_vacuum") == [(2,)]  # INCREMENTAL
    _run(store, "run-1", _records(100))
    heap = "SELECT pg_relation_size('attempts')"
    one_run = target.query(heap)[0][0] if target.backend == "postgresql" else None
    _run(store, "run-2", _records(5000))
    assert _owner(target, "run-2") == "run-1"
    if target.backend == "sqlite":
        assert target.query("PRAGMA freelist_count") == [(0,)]
    else:
        assert target.query(heap)[0][0] == one_run


def test_a_repeat_finishing_while_its_owner_is_written_keeps_its_own_rows(
    store: Store, target: Target
) -> None:
    """PostgreSQL: the owner's row lock is not waited for. A writer holding it (a resume)
    may change its rows, so the finishing run keeps its own, and two runs finishing at once
    never wait on each other's lock."""
    if target.backend != "postgresql":
        pytest.skip("SQLite serialises every writer")
    from tests.store.conftest import _raw_connect

    records = _records(5000)
    _run(store, "run-1", _records(100))
    with _raw_connect(target.url) as other, other.transaction():
        other.execute("SELECT 1 FROM runs WHERE run_id = 'run-1' FOR UPDATE")
        _run(store, "run-2", records)  # returns: nothing waits for the lock
    assert _owner(target, "run-2") is None
    assert _own_rows(target, "run-2") == len(records)
    _reads_back(store, "run-2", records)


def test_a_chunk_keeps_any_fields_text_on_its_line() -> None:
    """Fields are one line each in a chunk; a text with line breaks or U+001E (not what the
    store writes, but what an old row could hold) comes back as the same JSON value."""
    from goldeval.store.sharing import _chunk_body, _chunk_fields, _chunk_timings, key_text

    pretty = '{\n  "durationMs": 5,\n  "note": "a\\nb \\u2028 \u0436"\n}'
    separated = '{"durationMs":6,"note":"\x1e"}'  # raw, as only a hand-edited row holds
    timings = [
        ("c-1", 1, "", 5, pretty),
        ("c-1", 2, "m", None, '{"durationMs":7}'),
        ("c-1", 3, "", 6.5, separated),
    ]
    back = _chunk_timings(_chunk_body(timings))
    assert list(back) == [("c-1", 1, ""), ("c-1", 2, "m"), ("c-1", 3, "")]
    assert json.loads(back[("c-1", 1, "")][1]) == json.loads(pretty)
    assert back[("c-1", 2, "m")] == (None, '{"durationMs":7}')
    assert back[("c-1", 3, "")][0] == 6.5
    assert json.loads(back[("c-1", 3, "")][1]) == {"durationMs": 6, "note": "\x1e"}
    fields = _chunk_fields(_chunk_body(timings))
    assert fields == {key_text(*key): f for key, (_d, f) in back.items()}


#: Keys whose parts hold the characters a chunk separates with; the first two would read as
#: the same key if the parts were only joined.
ODD_KEYS = [
    ("a\x1f1", 2, ""),
    ("a", 1, "2\x1f"),
    ("line\nbreak", 1, ""),
    ("record\x1esep", 1, "m\n"),
    ("plain", 7, "model-a"),
]


def test_key_texts_are_one_line_each_and_never_the_same_for_two_keys() -> None:
    from goldeval.store.sharing import _chunk_body, _chunk_timings, key_text, key_texts

    texts = [key_text(*k) for k in ODD_KEYS]
    assert len(set(texts)) == len(ODD_KEYS)
    assert all("\n" not in t and "\x1e" not in t for t in texts)
    assert key_texts(ODD_KEYS) == texts  # the page's check falls back for odd keys
    assert key_texts([ODD_KEYS[-1]]) == [texts[-1]]
    timings = [(*k, n, f'{{"durationMs":{n}}}') for n, k in enumerate(ODD_KEYS)]
    assert _chunk_timings(_chunk_body(timings)) == {
        k: (n, f'{{"durationMs":{n}}}') for n, k in enumerate(ODD_KEYS)
    }


def test_a_run_whose_case_ids_hold_separators_shares_and_reads_back(
    store: Store, target: Target
) -> None:
    """Case ids with U+001F, U+001E or a line break: the run shares, and every read (pages
    too) gives its own timings, not another attempt's."""
    odd = ["a\x1f1", "a", "line\nbreak", "record\x1esep"]

    def records(offset: int) -> list[dict[str, Any]]:
        return [
            {"caseId": c, "index": i, "status": "PASS", "durationMs": offset + n * 10 + i}
            for n, c in enumerate(odd)
            for i in (1, 2)
        ]

    for run_id, offset in (("odd-1", 0), ("odd-2", 1000)):
        _resume(store, run_id)
        store.record_cases(run_id, [{"caseId": c} for c in odd])
        store.record_attempts(run_id, records(offset))
        store.finish_run(run_id, "COMPLETED", {"status": "COMPLETED"})
    assert _owner(target, "odd-2") == "odd-1"
    want = {(r["caseId"], r["index"]): r["durationMs"] for r in records(1000)}
    whole = store.attempts("odd-2")
    assert {(r["caseId"], r["index"]): r["durationMs"] for r in whole} == want
    page = store.attempts_page("odd-2", limit=3, after=(whole[1]["caseId"], 2, ""))
    assert [r["durationMs"] for r in page] == [r["durationMs"] for r in whole[2:5]]
    texts = store.attempts_page_json("odd-2", limit=100)
    assert [json.loads(t.record)["durationMs"] for t in texts] == [r["durationMs"] for r in whole]


def _first_format_body(timings: list[tuple[str, int, str, Any, str]]) -> bytes:
    """A chunk as schema 13's first format wrote it: a JSON line of keys and durations,
    then one fields text per line, zlib-compressed."""
    import zlib

    keys = json.dumps([[c, i, m, d] for c, i, m, d, _f in timings], separators=(",", ":"))
    return zlib.compress("\n".join([keys, *(t[4] for t in timings)]).encode("utf-8"), 6)


def test_chunks_of_the_first_format_still_read_and_give_rows_back(
    store: Store, target: Target
) -> None:
    """Stores that shared rows before the chunk format changed: their chunks are read as
    they are, by pages and whole reads, and a resume gives the run its own timings."""
    first, second, _third = _three_runs(store)
    chunks = target.query(
        "SELECT case_id, attempt_index, model, body FROM run_timings WHERE run_id = ?",
        ("run-2",),
    )
    from goldeval.store.sharing import _chunk_timings

    for c, i, m, body in chunks:
        old = _first_format_body(
            [(*key, d, f) for key, (d, f) in _chunk_timings(bytes(body)).items()]
        )
        target.execute(
            "UPDATE run_timings SET body = ? WHERE run_id = ? AND case_id = ?"
            " AND attempt_index = ? AND model = ?",
            (old, "run-2", c, i, m),
        )
    assert not any(
        bytes(b).startswith(b"\x02")
        for (b,) in target.query("SELECT body FROM run_timings WHERE run_id = 'run-2'")
    )
    _reads_back(store, "run-2", second)
    extra = {**second[0], "index": 4, "durationMs": 1}
    store.record_attempts("run-2", [extra])  # a resume: run-2 gets its rows back
    assert _owner(target, "run-2") is None
    _reads_back(store, "run-2", [*second, extra])
    _reads_back(store, "run-1", first)


def test_writing_a_sharing_run_and_its_owner_at_once_copies_the_rows_once(
    store: Store, target: Target
) -> None:
    """PostgreSQL: a resume of the owner while a resume of its sharing run is giving that run
    its rows back waits for it and then leaves the run alone. Both copied the rows, and one
    write failed on the duplicate rows (or on a lock cycle)."""
    if target.backend != "postgresql":
        pytest.skip("SQLite serialises every writer")
    import threading
    import time

    from goldeval.store import open_store

    first, second, _third = _three_runs(store)
    failures: list[BaseException] = []
    extra = {**first[0], "index": 4, "durationMs": 7}

    def write_the_owner() -> None:
        try:
            store.record_attempts("run-1", [extra])
        except BaseException as exc:  # reported by the assertion below
            failures.append(exc)

    with open_store(target.url) as other:
        # A writer of run-2 in the middle of its transaction: run-2's lock held, its rows
        # given back, not committed yet.
        with other._transaction("test") as tx:  # type: ignore[attr-defined]
            assert other._lock_run(tx, "run-2")  # type: ignore[attr-defined]
            other._unshare(tx, "run-2")  # type: ignore[attr-defined]
            owner_writer = threading.Thread(target=write_the_owner)
            owner_writer.start()
            time.sleep(0.5)
            assert owner_writer.is_alive()  # waits for run-2's writer
        owner_writer.join(30)
    assert not owner_writer.is_alive() and failures == []
    assert _own_rows(target, "run-2") == len(second)
    _reads_back(store, "run-2", second)
    _reads_back(store, "run-1", [*first, extra])


@pytest.mark.parametrize("read", ["page", "whole"])
def test_a_read_while_a_resume_gives_the_rows_back_shows_the_runs_own_timings(
    store: Store, target: Target, read: str
) -> None:
    """The rows are read in one statement and the run's timings in the next: a resume that
    gives the run its rows back in between (another connection, committed) took its timings
    away, and the read showed the owner's durations under the run. It reads again."""
    from goldeval.store import open_store

    _first, second, _third = _three_runs(store)
    name = "_own_fields" if read == "page" else "_all_fields"
    original = getattr(store, name)
    resumed: list[bool] = []

    def resume_in_between(*args: Any) -> Any:
        if not resumed:
            resumed.append(True)
            with open_store(target.url) as other, other._transaction("test") as tx:  # type: ignore[attr-defined]
                assert other._lock_run(tx, "run-2")  # type: ignore[attr-defined]
                other._unshare(tx, "run-2")  # type: ignore[attr-defined]
        return original(*args)

    setattr(store, name, resume_in_between)
    if read == "page":
        got = store.attempts_page("run-2", limit=40)
        wanted = {k: v for k, v in _timings(second).items() if k in _timings(got)}
        assert len(got) == 40 and _timings(got) == wanted
    else:
        assert _timings(store.attempts("run-2")) == _timings(second)
    assert resumed and _owner(target, "run-2") is None
