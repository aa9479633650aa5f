"""Schema 12: the manifest variant of each attempt is a column of its own (issue 35), written
by the plugin's path, read back with the records, and queryable with SQL.

Real SQLite files and a real PostgreSQL schema (tests/store/conftest.py).
"""

from __future__ import annotations

import json

from goldeval.core.models import AttemptRecord
from goldeval.results.attempt_payloads import attempt_entry, attempt_payload
from goldeval.store import Store
from goldeval.store.base import AttemptText
from tests.store.conftest import Target


def _texts(variant: str, model: str | None, statuses: list[str]) -> list[AttemptText]:
    out = []
    for n, status in enumerate(statuses):
        record = AttemptRecord.model_validate(
            {"caseId": f"c{n}", "index": 1, "status": status, "model": model, "output": "x"}
        )
        entry = attempt_entry(attempt_payload(record, False, variant))
        # As the recorder writes it: the model column holds the variant's name.
        out.append(
            AttemptText(entry.case_id, entry.index, entry.key, entry.status, entry.text, 0, variant)
        )
    return out


def test_each_attempt_keeps_its_variant_and_sql_can_ask_for_it(
    store: Store, target: Target
) -> None:
    store.begin_run(
        "run-1",
        dataset_id="faq-v1",
        dataset_hash="h",
        mode="fixture",
        protocol={},
        configuration={},
    )
    # Two variants asking the same model (a prompt A/B): told apart by the variant column.
    store.record_attempt_texts("run-1", _texts("control", "m", ["PASS", "PASS", "FAIL"]))
    store.record_attempt_texts("run-1", _texts("concise", "m", ["PASS", "FAIL", "FAIL"]))
    records = store.attempts("run-1")
    assert len(records) == 6
    assert {(r["caseId"], r["variant"], r["model"]) for r in records if r["caseId"] == "c0"} == {
        ("c0", "control", "m"),
        ("c0", "concise", "m"),
    }
    raw = store.attempts_page_json("run-1", limit=10)
    assert {(r.case_id, r.model, r.variant, r.record_model) for r in raw if r.case_id == "c0"} == {
        ("c0", "control", "control", "m"),
        ("c0", "concise", "concise", "m"),
    }
    assert [json.loads(r.record) for r in raw] == store.attempts_page("run-1", limit=10)
    page = store.attempts_page("run-1", limit=10, status="FAIL")
    assert sorted((r["caseId"], r["variant"]) for r in page) == [
        ("c1", "concise"),
        ("c2", "concise"),
        ("c2", "control"),
    ]
    # The question a team asks of its history: pass rate per variant.
    rows = target.query(
        "SELECT variant, SUM(CASE WHEN status = 'PASS' THEN 1 ELSE 0 END), COUNT(*)"
        " FROM attempts WHERE run_id = 'run-1' GROUP BY variant ORDER BY variant"
    )
    assert [(v, int(p), int(n)) for v, p, n in rows] == [("concise", 1, 3), ("control", 2, 3)]
    # Outside variant sessions the column is empty and the record has no "variant".
    store.begin_run(
        "run-2",
        dataset_id="faq-v1",
        dataset_hash="h",
        mode="fixture",
        protocol={},
        configuration={},
    )
    record = {"caseId": "c0", "index": 1, "status": "PASS"}
    store.record_attempt_texts("run-2", [AttemptText("c0", 1, None, "PASS", json.dumps(record))])
    (plain,) = store.attempts("run-2")
    assert "variant" not in plain
    assert target.query("SELECT variant FROM attempts WHERE run_id = 'run-2'") == [(None,)]
