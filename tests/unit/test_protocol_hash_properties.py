"""Every input that can change a verdict is in the dataset hash or the protocol (issue 15).

Property: take a valid row, change any one field (a top-level field, an expect key added,
removed or changed, ``"rag": []`` written instead of left out...) or any grader option, and
``datasetHash`` or ``graderConfigHash`` changes. Rows are built through ``parse_rows``, the
loader pytest uses, so only changes the loader accepts are tried.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goldeval.core.errors import DatasetError
from goldeval.dataset.case import GoldenCase, dataset_hash, selected_attempts
from goldeval.dataset.domain import DomainConfig
from goldeval.dataset.manifest import Manifest
from goldeval.dataset.rows import CORE_EXPECT_KEYS, Dataset, parse_rows
from goldeval.graders.base import ExpectKey
from goldeval.graders.contract import ContractGrader
from goldeval.graders.registry import builtin_graders
from goldeval.results.run_document import config_fingerprint

GRADERS = [ContractGrader(), *builtin_graders()]
KEYS: dict[str, ExpectKey] = {k.name: k for k in CORE_EXPECT_KEYS}
for _g in GRADERS:
    for _k in _g.expect_keys:
        KEYS.setdefault(_k.name, _k)

WORDS = st.text(alphabet='abcxyz é"\\\n\u00e9\U0001f600', min_size=0, max_size=6)
STR_LISTS = st.lists(WORDS, max_size=3)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2), WORDS)
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(WORDS, inner, max_size=3),
    max_leaves=6,
)  # fmt: skip

#: Values per expect key that the loader can accept (type-correct for the key's kind).
KIND_VALUES = {
    "str": WORDS,
    "int": st.integers(-500, 500),
    "number": st.one_of(st.integers(-5, 5), st.floats(-5, 5, allow_nan=False)),
    "bool": st.booleans(),
    "list[str]": STR_LISTS,
    "object": st.dictionaries(WORDS, JSON, max_size=3),
    "list": st.lists(JSON, max_size=3),
    "any": JSON,
}


def load(tmp: Path, row: dict[str, Any]) -> GoldenCase | None:
    """The row as the loader reads it, or None when the loader refuses it."""
    path = tmp / "rows.jsonl"
    path.write_text(json.dumps(row, ensure_ascii=False) + "\n", encoding="utf-8")
    try:
        (case,) = parse_rows(path, KEYS, GRADERS)
    except DatasetError:
        return None
    return case


@st.composite
def rows(draw: st.DrawFn) -> dict[str, Any]:
    expect: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(sorted(KEYS)), max_size=4, unique=True)):
        expect[name] = draw(KIND_VALUES[KEYS[name].kind])
    row: dict[str, Any] = {"id": draw(st.sampled_from(["a", "b-1", "c.x"])), "prompt": draw(WORDS)}
    if draw(st.booleans()):
        row["expect"] = expect
    for fld, strat in (
        ("must_not", STR_LISTS),
        ("tags", st.lists(st.sampled_from(["smoke", "api", "e2e"]), max_size=2)),
        ("metadata", st.dictionaries(WORDS, JSON, max_size=2)),
    ):
        if draw(st.booleans()):
            row[fld] = draw(strat)
    return row


@st.composite
def changes(draw: st.DrawFn, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with one field changed, added or removed."""
    new = json.loads(json.dumps(row))
    what = draw(st.sampled_from(["prompt", "id", "must_not", "tags", "metadata", "expect"]))
    if what == "prompt":
        new["prompt"] = draw(WORDS)
    elif what == "id":
        new["id"] = draw(st.sampled_from(["a", "b-1", "c.x", "d"]))
    elif what == "must_not":
        new["must_not"] = draw(STR_LISTS)
    elif what == "tags":
        new["tags"] = draw(st.lists(st.sampled_from(["smoke", "api", "e2e", "slow"]), max_size=2))
    elif what == "metadata":
        new["metadata"] = draw(st.dictionaries(WORDS, JSON, max_size=2))
    else:
        expect = new.setdefault("expect", {})
        name = draw(st.sampled_from(sorted(KEYS)))
        if name in expect and draw(st.booleans()):
            del expect[name]
        else:
            expect[name] = draw(KIND_VALUES[KEYS[name].kind])
    return new


def meaning(case: GoldenCase) -> str:
    """Everything grading and selection can read from a case (duplicate tags count once)."""
    return json.dumps(
        [case.id, case.prompt, case.expect, list(case.must_not), list(case.tags), case.metadata],
        sort_keys=True,
        ensure_ascii=False,
    )


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_changing_any_field_of_a_row_changes_the_dataset_hash(
    tmp_path: Path, data: st.DataObject
) -> None:
    row = data.draw(rows())
    before = load(tmp_path, row)
    if before is None:
        return
    after = load(tmp_path, data.draw(changes(row)))
    if after is None or meaning(after) == meaning(before):
        return  # refused by the loader, or a change the loader normalises away (e.g. null)
    other = GoldenCase("zz", "other", {"refuse": True})
    assert dataset_hash([before, other]) != dataset_hash([after, other]), (before, after)


@pytest.mark.parametrize("key, empty", [("rag", []), ("contains", []), ("red", False)])
def test_an_empty_default_written_out_is_not_an_absent_key(key: str, empty: Any) -> None:
    # {"rag": []} grades retrieval and makes the contract grader apply; no rag does neither.
    absent = GoldenCase("a", "q", {"layer": "api"})
    written = GoldenCase("a", "q", {"layer": "api", key: empty})
    assert dataset_hash([absent]) != dataset_hash([written])


def test_reference_rows_hash_as_before() -> None:
    # The reference serialises rag/contains as [] and red as false: rows that leave them out
    # keep the reference's hash (the conformance test pins the full datasets).
    case = GoldenCase("a", "q", {"layer": "api", "rag": ["x"], "contains": ["y"]}, ("z",))
    assert "explicit" not in case.canonical()


def dataset_with(options: dict[str, Any]) -> Dataset:
    manifest = Manifest.model_validate({"version": "d-v1", "grader_options": options})
    return Dataset(
        dir=Path("."),
        manifest_path=Path("dataset.yaml"),
        manifest=manifest,
        rows_path=Path("rows.jsonl"),
        cases=[],
        pack=None,
        domain=DomainConfig(),
    )


OPTIONS = st.dictionaries(
    st.sampled_from(["cites", "similarity", "regex"]),
    st.dictionaries(st.sampled_from(["pattern", "header", "threshold"]), JSON, max_size=3),
    max_size=3,
)


@settings(max_examples=300, deadline=None)
@given(a=OPTIONS, b=OPTIONS)
def test_grader_options_are_in_the_protocol(a: dict[str, Any], b: dict[str, Any]) -> None:
    ha = config_fingerprint(dataset_with(a).grader_config(["cites"]))
    hb = config_fingerprint(dataset_with(b).grader_config(["cites"]))
    same = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert (ha == hb) == same


def test_no_grader_options_keep_the_hash_baselines_were_captured_with() -> None:
    ds = dataset_with({})
    assert "options" not in ds.grader_config(["contract"])


def test_the_cites_pattern_changes_the_grader_config() -> None:
    a = dataset_with({"cites": {"pattern": r"\[([a-z-]+)\]"}})
    b = dataset_with({"cites": {"pattern": r"\(([a-z-]+)\)"}})
    assert config_fingerprint(a.grader_config(["cites"])) != config_fingerprint(
        b.grader_config(["cites"])
    )


ATTEMPTS = st.dictionaries(
    st.sampled_from(["a", "b", "c"]),
    st.sets(st.tuples(st.sampled_from(["", "m2"]), st.integers(1, 3)), min_size=1),
    min_size=1,
)


@settings(max_examples=300, deadline=None)
@given(attempts=ATTEMPTS, configured=st.integers(1, 3))
def test_selected_attempts_is_absent_exactly_for_full_runs(
    attempts: dict[str, set[tuple[str, int]]], configured: int
) -> None:
    result = selected_attempts(attempts, list(attempts), configured)
    full = all(
        {i for m2, i in pairs if m2 == model} == set(range(1, configured + 1))
        for pairs in attempts.values()
        for model in {m for m, _ in pairs}
    )
    assert (result is None) == full
    if result is not None:
        assert result == {c: sorted({i for _, i in p}) for c, p in sorted(attempts.items())}
