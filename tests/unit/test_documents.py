"""The typed run document (goldeval.results.documents) over real documents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goldeval.core.errors import BaselineError
from goldeval.results.documents import RunDocument, Summary, validate_run_document

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = sorted([*ROOT.glob("baselines/*.json"), *ROOT.glob("examples/*/baselines/*.json")])


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_baselines_validate_and_dump_the_same_json(path: Path) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    typed = validate_run_document(doc, path)
    assert typed.dump() == doc
    assert typed.protocol is not None and typed.protocol.dataset_id
    assert len(typed.cases) == doc["casesTotal"]
    assert all(
        a.status in ("PASS", "FAIL", "SKIPPED", "ERROR") for c in typed.cases for a in c.attempts
    )


def test_committed_baselines_exist() -> None:
    assert len(COMMITTED) >= 3


def test_unknown_keys_are_kept_for_newer_writers() -> None:
    doc = {"runId": "r", "cases": [], "somethingNew": {"x": 1}}
    assert RunDocument.model_validate(doc).dump() == doc


def _doc() -> dict:
    return json.loads((ROOT / "baselines" / "generation-v1.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("edit", "field", "message"),
    [
        (lambda d: d.update(protocol="x"), "protocol", "must be an object, got a string"),
        (lambda d: d["protocol"].update(attempts="1"), "protocol.attempts", "must be an integer"),
        (lambda d: d["protocol"].update(attempts=True), "protocol.attempts", "must be an integer"),
        (lambda d: d.update(cases=5), "cases", "must be a list, got a number"),
        (
            lambda d: d["cases"][1]["attempts"][0].update(status=3),
            "cases[1].attempts[0].status",
            "must be a string",
        ),
        (
            lambda d: d["metrics"]["overallPassRate"].update(hits=1.5),
            "metrics.overallPassRate.hits",
            "must be an integer",
        ),
        (lambda d: d.update(notes=[1]), "notes[0]", "must be a string"),
        (
            lambda d: d["metrics"].update(passAtK=_pass_at_k(passAtK="0.5")),
            "metrics.passAtK.byK[0].passAtK",
            "must be a number, got a string",
        ),
    ],
)
def test_wrong_types_name_the_field(edit, field: str, message: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    doc = _doc()
    edit(doc)
    with pytest.raises(BaselineError) as caught:
        validate_run_document(doc, tmp_path / "b.json")
    assert caught.value.field == field
    assert message in caught.value.message


def _pass_at_k(**row: object) -> dict:
    ci = {"lower": 0.25, "upper": 0.75, "method": "bootstrap-percentile"}
    first = {"k": 1, "cases": 10, "passAtK": 0.5, "passAtKCi95": ci, "passHatK": 0.5}
    return {
        "cases": 10,
        "resamples": 2000,
        "seed": 0,
        "confidence": 0.95,
        "byK": [{**first, "passHatKCi95": ci, **row}],
    }


def test_a_run_with_pass_at_k_validates_and_dumps_the_same_json(tmp_path: Path) -> None:
    doc = _doc()
    doc["metrics"]["passAtK"] = _pass_at_k()
    typed = validate_run_document(doc, tmp_path / "run.json")
    assert typed.metrics is not None and typed.metrics.pass_at_k is not None
    assert typed.metrics.pass_at_k.by_k[0].pass_at_k_ci95 is not None
    assert typed.dump() == doc


def test_non_finite_numbers_are_refused(tmp_path: Path) -> None:
    doc = _doc()
    doc["durationMs"] = float("inf")
    with pytest.raises(BaselineError) as caught:
        validate_run_document(doc, tmp_path / "b.json")
    assert caught.value.field == "durationMs"


def test_summary_is_the_run_without_cases() -> None:
    doc = _doc()
    summary = {
        k: v
        for k, v in doc.items()
        if k in Summary.model_fields or k in {f.alias for f in Summary.model_fields.values()}
    }
    typed = Summary.model_validate(summary)
    assert typed.metrics is not None and typed.metrics.overall_pass_rate is not None
