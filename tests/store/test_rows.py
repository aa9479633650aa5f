"""Attempts as rows (schema 8): keyset pages, the migration from run pages, SQL over runs.

Real SQLite files and a real PostgreSQL schema (tests/store/conftest.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from goldeval.store import LATEST_VERSION, Store, open_store
from goldeval.store.migrations import MIGRATIONS, SCHEMA_VERSION_DDL
from goldeval.store.pages import digest, encode_page, slim_fields, split_record
from tests.docs.mdcode import blocks
from tests.store.conftest import Target

ROOT = Path(__file__).resolve().parents[2]
TS = "2026-01-01T00:00:00.000000+00:00"
STATUSES = ("PASS", "FAIL", "SKIPPED", "ERROR")
# Ids whose order is code point order, not a locale's: upper before lower, ASCII before
# Cyrillic, "case-10" before "case-2".
CASE_IDS = ("Zeta", "alpha", "case-10", "case-2", "ж-1", "Ω")


def _record(case_id: str, index: int, model: str | None, status: str) -> dict[str, Any]:
    record: dict[str, Any] = {
        "caseId": case_id,
        "index": index,
        "status": status,
        "durationMs": 100 + index,
        "tries": 1,
        "tokens": {"inputTokens": 9, "outputTokens": 1, "totalTokens": 10},
    }
    if model is not None:
        record["model"] = model
    if status == "ERROR":
        record["errorKind"] = "TIMEOUT"
    return record


def _history_run(store: Store, run_id: str, dataset_id: str = "generation-v1") -> None:
    store.begin_run(
        run_id,
        dataset_id=dataset_id,
        dataset_hash="d4e8",
        mode="fixture",
        protocol={},
        configuration={},
    )


def _records() -> list[dict[str, Any]]:
    """6 cases x 4 attempts x 2 models, statuses mixed so every filter has several pages."""
    out = []
    n = 0
    for case_id in CASE_IDS:
        for index in (1, 2, 3, 4):
            for model in ("m-a", "m-b"):
                out.append(_record(case_id, index, model, STATUSES[n % 4 if n % 3 else 0]))
                n += 1
    return out


def _key(record: dict[str, Any]) -> tuple[str, int, str]:
    return (record["caseId"], record["index"], record.get("model") or "")


def _all_pages(store: Store, run_id: str, limit: int, status: str | None) -> list[Any]:
    """Every page, each asked for with the last key of the page before (as the API does)."""
    seen: list[dict[str, Any]] = []
    after = None
    for _ in range(100):
        page = store.attempts_page(run_id, limit=limit, status=status, after=after)
        assert len(page) <= limit
        if not page:
            return seen
        seen.extend(page)
        after = _key(page[-1])
    raise AssertionError("paging never ended")


@pytest.mark.parametrize("limit", [1, 7, 48, 100])
def test_pages_return_every_attempt_once_in_order(store: Store, limit: int) -> None:
    _history_run(store, "run-1")
    records = _records()
    written = store.record_attempts("run-1", list(reversed(records)))  # order of writing
    assert written == len(records)
    # An ERROR attempt retried: replaced by its PASS (the key stays, the status changes).
    errored = next(r for r in records if r["status"] == "ERROR")
    retried = {**errored, "status": "PASS"}
    retried.pop("errorKind")
    assert store.record_attempt("run-1", retried)
    records = [retried if _key(r) == _key(errored) else r for r in records]

    ordered = sorted(records, key=_key)
    assert [r["caseId"] for r in ordered][:8] == ["Zeta"] * 8  # code point order
    assert store.attempts("run-1") == ordered
    assert _all_pages(store, "run-1", limit, None) == ordered
    for status in STATUSES:
        wanted = [r for r in ordered if r["status"] == status]
        assert wanted  # the filter has something to page through
        assert _all_pages(store, "run-1", limit, status) == wanted
    assert store.attempt_counts("run-1") == {
        s: sum(r["status"] == s for r in records) for s in STATUSES
    }


def test_rows_hold_the_queryable_columns(store: Store, target: Target) -> None:
    _history_run(store, "run-1")
    store.record_attempts("run-1", [_record("c", 1, None, "ERROR"), _record("d", 2, "m", "PASS")])
    rows = target.query(
        "SELECT case_id, attempt_index, model, status, error_kind, duration_ms, tokens"
        " FROM attempts ORDER BY case_id"
    )
    assert rows == [("c", 1, "", "ERROR", "TIMEOUT", 101, 10), ("d", 2, "m", "PASS", None, 102, 10)]


# --------------------------------------------------------------------------- migration 8


def _v6_store(target: Target) -> None:
    """An empty store at schema 6, made by its own migration steps."""
    target.execute(SCHEMA_VERSION_DDL[target.backend])
    for step in MIGRATIONS[target.backend][:6]:
        for statement in (*step.statements, *step.after):
            target.execute(statement)
        target.execute("INSERT INTO schema_version VALUES (?, ?, ?)", (step.version, "x", TS))
    target.execute("INSERT INTO datasets VALUES (?, ?, ?, ?)", ("generation-v1", "d4e8", None, TS))


def _content_id(target: Target, text: str) -> int:
    key = digest(text)
    rows = target.query("SELECT id FROM contents WHERE sha256 = ?", (key,))
    if not rows:
        target.execute("INSERT INTO contents (sha256, body) VALUES (?, ?)", (key, text))
        rows = target.query("SELECT id FROM contents WHERE sha256 = ?", (key,))
    return int(rows[0][0])


def _page(target: Target, run_id: str, page_no: int, kind: str, entries: list[Any]) -> None:
    target.execute(
        "INSERT INTO run_pages VALUES (?, ?, ?, ?, ?)",
        (run_id, page_no, kind, encode_page(entries), TS),
    )


def _write_v6_run(target: Target, run_id: str, records: list[dict[str, Any]]) -> None:
    """A run as the schema-5/6 store wrote it: a case page, attempt pages of 20 entries
    (content id plus the slimmed run fields), then a page that retries its ERROR attempts."""
    target.execute(
        "INSERT INTO runs (run_id, dataset_id, dataset_hash, mode, protocol, configuration,"
        " status, started_at) VALUES (?, 'generation-v1', 'd4e8', 'fixture', '{}', '{}',"
        " 'COMPLETED', ?)",
        (run_id, TS),
    )
    infos = [{"caseId": c, "prompt": f"prompt of {c}", "line": n} for n, c in enumerate(CASE_IDS)]
    _page(
        target,
        run_id,
        1,
        "case",
        [[i["caseId"], _content_id(target, json.dumps(i))] for i in infos],
    )
    entries = []
    for r in records:
        run_fields, content = split_record(r)
        cid = _content_id(target, json.dumps(content, separators=(",", ":")))
        slim = slim_fields(r["caseId"], r["index"], r["status"], run_fields)
        entries.append([r["caseId"], r["index"], r.get("model") or "", r["status"], cid, slim])
    page_no = 1
    for first in range(0, len(entries), 20):
        page_no += 1
        _page(target, run_id, page_no, "attempt", entries[first : first + 20])
    retries = [[*e[:3], "PASS", e[4], {**e[5], "tries": 2}] for e in entries if e[3] == "ERROR"]
    _page(target, run_id, page_no + 1, "attempt", retries)


def test_migration_7_moves_every_attempt_of_a_schema_6_store_into_rows(target: Target) -> None:
    _v6_store(target)
    records = _records()
    _write_v6_run(target, "old-1", records)
    _write_v6_run(target, "old-2", records[:10])
    contents_before = target.query("SELECT COUNT(*) FROM contents")

    with open_store(target.url) as store:
        assert store.schema_version() == LATEST_VERSION
        expected = []
        for r in sorted(records, key=_key):
            if r["status"] == "ERROR":  # the later page's retry is the attempt that counts
                r = {**r, "status": "PASS", "tries": 2}
            expected.append(r)
        assert store.attempts("old-1") == expected
        assert _all_pages(store, "old-1", 9, "PASS") == [
            r for r in expected if r["status"] == "PASS"
        ]
        assert len(store.attempts("old-2")) == 10
        assert [c["caseId"] for c in store.cases("old-1")] == list(CASE_IDS)
        assert store.graded_keys("old-1", include_errors=False) == {_key(r) for r in records}
        # The migrated run goes on as a run: a re-sent attempt is a no-op, a new one lands.
        assert not store.record_attempt("old-1", records[0])
        assert store.record_attempt("old-1", _record("new", 1, None, "PASS"))
    assert "run_pages" not in target.tables()
    assert target.query("SELECT COUNT(*) FROM attempts WHERE run_id = 'old-1'") == [
        (len(records) + 1,)
    ]
    # The texts were not copied: the rows point at the contents the pages pointed at, and
    # the new attempt's content (the same as other passing attempts') was known already.
    assert target.query("SELECT COUNT(*) FROM contents") == contents_before
    ids = target.query("SELECT DISTINCT content_id FROM attempts ORDER BY 1")
    known = target.query("SELECT id FROM contents ORDER BY 1")
    assert set(ids) <= set(known)


# --------------------------------------------------------------------------- the doc's SQL


def flipped_sql() -> str:
    """The SQL block of docs/service.md that answers "cases that flipped in the last N runs"."""
    doc = ROOT / "docs" / "service.md"
    found = [b for b in blocks(doc) if b.lang == "sql" and "flipped cases" in b.lines[0]]
    assert len(found) == 1, "docs/service.md must have one flipped-cases SQL block"
    return "\n".join(found[0].lines)


# A designed history: case -> the statuses of its attempts in runs 1..5 (None: not run).
HISTORY: dict[str, list[tuple[str, ...] | None]] = {
    "steady": [("PASS",), ("PASS",), ("PASS",), ("PASS",), ("PASS",)],
    "broke": [("PASS",), ("PASS",), ("PASS", "FAIL"), ("FAIL",), ("FAIL",)],
    "healed": [("FAIL",), ("FAIL",), ("FAIL",), ("FAIL",), ("PASS", "PASS")],
    "flaky": [("PASS",), ("FAIL",), ("PASS",), ("ERROR", "FAIL"), ("PASS",)],
    "old-flip": [("FAIL",), ("PASS",), ("PASS",), ("PASS",), ("PASS",)],  # before the window
    "gap": [("PASS",), ("PASS",), None, ("SKIPPED",), ("SKIPPED",)],
}


def test_the_documented_flipped_cases_sql_answers_a_designed_history(
    store: Store, target: Target
) -> None:
    for n in range(1, 6):
        run_id = f"run-{n}"
        _history_run(store, run_id)
        _history_run(store, f"other-{n}", dataset_id="other-v1")  # interleaved, never counted
        store.record_attempts(f"other-{n}", [_record("broke", 1, None, STATUSES[n % 4])])
        records = [
            _record(case_id, index, None, status)
            for case_id, runs in HISTORY.items()
            if runs[n - 1] is not None
            for index, status in enumerate(runs[n - 1] or (), start=1)
        ]
        store.record_attempts(run_id, records)
    sql = flipped_sql()
    rows = target.query(sql, ("generation-v1", 4))  # the last 4 runs: run-2 .. run-5
    assert rows == [
        ("broke", "run-3", "PASS", "FAIL"),
        ("flaky", "run-3", "FAIL", "PASS"),
        ("flaky", "run-4", "PASS", "ERROR"),
        ("flaky", "run-5", "ERROR", "PASS"),
        ("gap", "run-4", "PASS", "SKIPPED"),
        ("healed", "run-5", "FAIL", "PASS"),
    ]
    everything = target.query(sql, ("generation-v1", 30))
    assert ("old-flip", "run-2", "FAIL", "PASS") in everything
    assert len(everything) == len(rows) + 2  # plus run-2's flips of old-flip and flaky
    assert target.query(sql, ("generation-v1", 1)) == []  # one run: nothing to flip from


def test_the_json_page_is_the_records_page_spliced_without_decoding(store: Store) -> None:
    """What GET .../results sends (Store.attempts_page_json) decodes to exactly the records
    Store.attempts_page builds, page by page, whatever the content holds."""
    _history_run(store, "run-1")
    records = _records()
    records[0]["output"] = 'Ответ: «ok» \u2028 "quoted" \\ [doc-1]'
    records[1]["graders"] = [{"grader": "contract", "passed": False, "violations": ["x"]}]
    records[2] = {"caseId": records[2]["caseId"], "index": 1, "status": "PASS", "model": "m-a"}
    store.record_attempts("run-1", records)
    for status in (None, "FAIL"):
        after = None
        while True:
            page = store.attempts_page("run-1", limit=7, status=status, after=after)
            raw = store.attempts_page_json("run-1", limit=7, status=status, after=after)
            assert [json.loads(r.record) for r in raw] == page
            assert [(r.case_id, r.attempt_index, r.status) for r in raw] == [
                (p["caseId"], p["index"], p["status"]) for p in page
            ]
            assert [r.record_model for r in raw] == [p.get("model") for p in page]
            if len(page) < 7:
                break
            after = _key(page[-1])


@pytest.mark.parametrize(
    "record",
    [
        {"caseId": "a", "index": 1, "status": "FAIL"},  # no other field, no content
        {"caseId": "a", "index": 1, "status": "FAIL", "model": "m", "output": 'é " \\ \u2028'},
        {"case_id": "a", "index": 1, "status": "FAIL", "tries": 2},  # snake_case: no caseId
    ],
)
def test_the_json_page_gives_each_kind_of_record_back(store: Store, record: dict[str, Any]) -> None:
    _history_run(store, "run-1")
    store.record_attempts("run-1", [record])
    (decoded,) = store.attempts_page("run-1", limit=5)
    (raw,) = store.attempts_page_json("run-1", limit=5)
    assert json.loads(raw.record) == decoded
    assert (raw.case_id, raw.attempt_index, raw.status) == ("a", 1, "FAIL")
    assert raw.record_model == record.get("model")


def test_a_damaged_content_is_never_spliced_into_invalid_json() -> None:
    from goldeval.store.reads import record_json

    for body in ("null", '"text"', "[1, 2]"):
        text = record_json("a", 1, "FAIL", '{"tries":2}', body)
        record = json.loads(text)  # valid JSON whatever the stored content was
        assert record["caseId"] == "a" and record["content"] == json.loads(body)
