"""Dataset loading: precise errors, hashes, kinds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goldeval.core.errors import DatasetError
from goldeval.dataset.case import GoldenCase, dataset_hash
from goldeval.dataset.pack import pack_hash
from goldeval.dataset.rows import check_case_id, parse_rows
from goldeval.graders.contract import ContractGrader

KEYS = {k.name: k for k in ContractGrader.expect_keys}
from goldeval.dataset.rows import CORE_EXPECT_KEYS  # noqa: E402

KEYS.update({k.name: k for k in CORE_EXPECT_KEYS})


def write(tmp_path: Path, data: bytes) -> Path:
    p = tmp_path / "rows.jsonl"
    p.write_bytes(data)
    return p


def test_blank_comment_bom_crlf(tmp_path: Path) -> None:
    p = write(tmp_path, b'\xef\xbb\xbf# comment\r\n\r\n{"id":"a","prompt":"p"}\r\n   \n')
    (c,) = parse_rows(p, KEYS)
    assert c.id == "a" and c.line == 3


@pytest.mark.parametrize(
    "line,field,fragment",
    [
        (b'{"id":"a","prompt":"p",}', None, "invalid JSON"),
        (b"[1,2]", None, "must be a JSON object"),
        (b'{"prompt":"p"}', "id", "missing or blank"),
        (b'{"id":"  ","prompt":"p"}', "id", "missing or blank"),
        (b'{"id":"../x","prompt":"p"}', "id", "not filename-safe"),
        (b'{"id":"CON","prompt":"p"}', "id", "reserved"),
        (b'{"id":"a","prompt":3}', "prompt", "must be a string"),
        (b'{"id":"a","prompt":"p","expect":{"status":"401"}}', "expect.status", "expected int"),
        (b'{"id":"a","prompt":"p","expect":{"statuz":401}}', "expect.statuz", "did you mean"),
        (b'{"id":"a","prompt":"p","mustnot":[]}', "mustnot", "did you mean 'must_not'"),
        (b'{"id":"a","prompt":"p","tags":["smoke test"]}', "tags", "cannot be a pytest marker"),
        (b'{"id":"a","id":"b","prompt":"p"}', "id", "duplicate key"),
        (b'{"id":"a","prompt":"p","expect":{"red":"yes"}}', "expect.red", "expected bool"),
    ],
)
def test_each_error_names_file_line_field(
    tmp_path: Path, line: bytes, field: str | None, fragment: str
) -> None:
    p = write(tmp_path, b'{"id":"ok","prompt":"p"}\n' + line + b"\n")
    with pytest.raises(DatasetError) as exc:
        parse_rows(p, KEYS)
    text = str(exc.value)
    assert f"{p}:2: " in text
    if field:
        assert f": {field}: " in text
    assert fragment in text


def test_invalid_utf8_and_duplicate_ids_name_both_lines(tmp_path: Path) -> None:
    p = write(tmp_path, b'{"id":"a","prompt":"p"}\n{"id":"\xff"}\n{"id":"a","prompt":"q"}\n')
    with pytest.raises(DatasetError) as exc:
        parse_rows(p, KEYS)
    text = str(exc.value)
    assert f"{p}:2: not valid UTF-8" in text
    assert f"{p}:3: id: duplicate id 'a' (first defined at line 1)" in text


def test_long_and_hostile_ids() -> None:
    assert check_case_id("a" * 128) is None
    assert check_case_id("a" * 129) is not None
    for bad in ("/etc/passwd", "..", ".hidden", "a/b", "a\\b", "nul.txt"):
        assert check_case_id(bad) is not None


def test_dataset_hash_is_order_independent_and_content_sensitive() -> None:
    a = GoldenCase("a", "p", {"rag": ["x"]})
    b = GoldenCase("b", "q", {"refuse": True})
    assert dataset_hash([a, b]) == dataset_hash([b, a])
    assert dataset_hash([a, b]) != dataset_hash([a, GoldenCase("b", "q2", {"refuse": True})])
    assert dataset_hash([a]) != dataset_hash(
        [GoldenCase("a", "p", {"rag": ["x"]}, tags=("smoke",))]
    )


def test_pack_hash_covers_paths_and_contents() -> None:
    base = {"a.md": b"1", "rag/b.md": b"2"}
    assert pack_hash(base) == pack_hash(dict(reversed(list(base.items()))))
    assert pack_hash(base) != pack_hash({"a.md": b"1", "rag/c.md": b"2"})
    assert pack_hash(base) != pack_hash({"a.md": b"1", "rag/b.md": b"3"})


def test_kinds_follow_the_reference_order() -> None:
    assert GoldenCase("hallucinate-x", "p", {"layer": "e2e", "red": True}).kinds == [
        "GENERATION",
        "RAG",
        "RETRIEVAL",
        "NEGATIVE",
        "HALLUCINATION",
        "LAYER",
    ]
    assert GoldenCase("mixed-layer", "p", {"refuse": True}).kinds == [
        "GENERATION",
        "NEGATIVE",
        "REFUSAL",
        "LAYER",
    ]


def test_many_errors_reported_together(tmp_path: Path) -> None:
    rows = "\n".join(json.dumps({"id": f"bad id {i}", "prompt": "p"}) for i in range(30))
    p = write(tmp_path, rows.encode())
    with pytest.raises(DatasetError) as exc:
        parse_rows(p, KEYS)
    assert "... and 10 more" in str(exc.value)
