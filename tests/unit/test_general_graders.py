"""General-purpose graders: pass/fail paths, malformed answers, collection-time validation.

The similarity grader runs against a real local FakeLLMServer (no httpx patching).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

# httpx imports httpcore lazily. Importing it here, at collection, keeps it in sys.modules
# across pytester's in-process runs (which drop modules first imported during a run and would
# leave httpx mapping exceptions of a stale httpcore).
import httpcore  # noqa: F401
import pytest

from goldeval.core.errors import DatasetError, ProviderError
from goldeval.core.models import GraderOutcome, Severity
from goldeval.dataset.case import GoldenCase
from goldeval.dataset.rows import parse_rows
from goldeval.graders import registry
from goldeval.graders.base import ExpectKey, GradeContext, Grader
from goldeval.graders.cites import CitesGrader
from goldeval.graders.common import MAX_REPORTED, REGEX_SCAN_LIMIT
from goldeval.graders.contains_any import ContainsAnyGrader
from goldeval.graders.contract import ContractGrader
from goldeval.graders.exact import ExactGrader, normalize_text
from goldeval.graders.json_equals import JsonEqualsGrader
from goldeval.graders.json_extract import JSON_CANDIDATES, extract_json
from goldeval.graders.json_paths import parse_path
from goldeval.graders.json_schema import JsonSchemaGrader
from goldeval.graders.json_schema_check import check_schema, validate_json
from goldeval.graders.must_not import MustNotGrader
from goldeval.graders.number import NumberGrader, extract_number
from goldeval.graders.regex import RegexGrader
from goldeval.graders.registry import builtin_graders
from goldeval.graders.similarity import SimilarityGrader
from goldeval.graders.tool_calls import ToolCallsGrader
from goldeval.providers.base import Answer, ToolCall
from goldeval.providers.embeddings import (
    MAX_INPUT_CHARS,
    EmbeddingClient,
    cosine,
    embedding_settings,
)
from goldeval.testing.llm_server import FakeLLMServer, Fault

TEN_MB = "lorem ipsum dolor sit amet " * (10 * 1024 * 1024 // 27)
GARBAGE = random.Random(0).randbytes(200_000).decode("utf-8", errors="replace")
SURROGATES = "caf\udce9 \udcff\udcfe answer"
MALFORMED: dict[str, str | None] = {
    "none": None,
    "empty": "",
    "ten_mb": TEN_MB,
    "binary_garbage": GARBAGE,
    "invalid_json": '{"a": [1, 2,, }',
    "lone_surrogates": SURROGATES,
    "deep_brackets": "[" * 50_000,
}


def make_ctx(
    expect: dict[str, Any],
    text: str | None = "",
    *,
    must_not: Sequence[str] = (),
    options: Mapping[str, Any] | None = None,
    tool_calls: list[ToolCall] | None = None,
) -> GradeContext:
    return GradeContext(
        case=GoldenCase(id="case-1", prompt="prompt", expect=expect, must_not=tuple(must_not)),
        answer=Answer(text=text, tool_calls=tool_calls or []),
        retrieved=[],
        pack=None,
        options=options or {},
    )


def grade(
    grader: Grader, expect: dict[str, Any], text: str | None = "", **kw: Any
) -> GraderOutcome:
    outcome = grader.grade(make_ctx(expect, text, **kw))
    assert outcome.grader == grader.name
    for v in outcome.violations:
        assert v.grader == grader.name
        assert v.case_id == "case-1"
    assert outcome.passed == (not outcome.violations) or grader.name == "similarity"
    return outcome


def reasons(outcome: GraderOutcome) -> str:
    return "\n".join(v.reason for v in outcome.violations)


# --------------------------------------------------------------------------- registry


def test_builtin_graders_have_unique_names_and_keys() -> None:
    graders = builtin_graders()
    names = [g.name for g in graders]
    assert names == [
        "exact",
        "regex",
        "contains_any",
        "json_schema",
        "json_equals",
        "tool_calls",
        "number",
        "cites",
        "must_not",
        "similarity",
    ]
    keys = [k.name for g in graders for k in g.expect_keys]
    contract_keys = {k.name for k in ContractGrader.expect_keys}
    assert len(keys) == len(set(keys))
    assert not set(keys) & contract_keys
    assert all(k.description for g in graders for k in g.expect_keys)
    hardness = {g.name: g.hard for g in graders}
    assert hardness.pop("similarity") is False
    assert all(hardness.values())


def test_module_docstring_lists_every_grader_and_key() -> None:
    doc = registry.__doc__ or ""
    for g in builtin_graders():
        assert f"\n{g.name} " in doc
        for k in g.expect_keys:
            assert k.name in doc


# --------------------------------------------------------------------------- malformed answers

UNSATISFIABLE: list[tuple[Grader, dict[str, Any]]] = [
    (ExactGrader(), {"equals": "the exact answer", "normalize": "all"}),
    (RegexGrader(), {"regex": r"\bexpected-token\b"}),
    (ContainsAnyGrader(), {"contains_any": ["expected-token"]}),
    (JsonSchemaGrader(), {"json_schema": {"type": "object", "required": ["a"]}}),
    (JsonEqualsGrader(), {"json_equals": {"a": 1}}),
    (ToolCallsGrader(), {"tool_calls": [{"name": "search"}]}),
    (NumberGrader(), {"number": {"value": 123456.789, "abs_tol": 0.001}}),
    (CitesGrader(), {"cites": ["doc-1"]}),
    (SimilarityGrader(environ={}), {"similar_to": "the reference"}),
]


@pytest.mark.parametrize("kind", list(MALFORMED))
@pytest.mark.parametrize(("grader", "expect"), UNSATISFIABLE, ids=lambda v: getattr(v, "name", ""))
def test_malformed_answers_fail_without_raising(
    grader: Grader, expect: dict[str, Any], kind: str
) -> None:
    start = time.perf_counter()
    outcome = grade(grader, expect, MALFORMED[kind])
    assert time.perf_counter() - start < 10
    assert outcome.passed is False
    assert outcome.violations
    assert all(v.grader == grader.name for v in outcome.violations)


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_must_not_never_raises_on_malformed_answers(kind: str) -> None:
    outcome = grade(MustNotGrader(), {}, MALFORMED[kind], must_not=["banned-token"])
    assert outcome.passed


def test_tool_call_arguments_of_any_shape_do_not_crash() -> None:
    calls = [
        ToolCall("search", "not json {"),  # type: ignore[arg-type]
        ToolCall("search", None),  # type: ignore[arg-type]
        ToolCall(None, {"q": 1}),  # type: ignore[arg-type]
    ]
    out = grade(
        ToolCallsGrader(),
        {"tool_calls": [{"name": "search", "arguments": {"q": "x"}}]},
        tool_calls=calls,
    )
    assert not out.passed
    assert "search arguments differ at $" in reasons(out)


# --------------------------------------------------------------------------- exact


def test_exact_passes_on_identical_text() -> None:
    assert grade(ExactGrader(), {"equals": "Paris"}, "Paris").passed


def test_exact_is_exact_without_normalize_and_shows_a_diff() -> None:
    out = grade(ExactGrader(), {"equals": "The capital is Paris"}, "The capital is Rome\n")
    assert not out.passed
    (v,) = out.violations
    assert v.category == "MISMATCH"
    assert v.severity is Severity.HIGH
    assert "first difference at character 15" in v.reason
    assert "«The capital is Paris»" in v.reason
    assert "«The capital is Rome\\n»" in v.reason
    assert len(v.reason) < 300


def test_exact_diff_excerpt_is_short_for_huge_answers() -> None:
    out = grade(ExactGrader(), {"equals": "lorem ipsum"}, TEN_MB)
    assert not out.passed
    assert len(out.violations[0].reason) < 400


@pytest.mark.parametrize(
    ("normalize", "expected", "answer"),
    [
        (["case"], "PARIS", "paris"),
        (["case"], "STRASSE", "straße"),
        (["whitespace"], "a b c", "  a\n\tb   c\n"),
        (["nfc"], "café", "cafe\u0301"),
        (["punctuation"], "Hello world", "Hello, world!"),
        (["punctuation"], "quote", "«quote»"),
        ("all", "hello world", "  Hello,\n   WORLD!  "),
        (["case", "whitespace"], "a b", " A  B "),
    ],
)
def test_exact_normalize_options(normalize: Any, expected: str, answer: str) -> None:
    assert grade(ExactGrader(), {"equals": expected, "normalize": normalize}, answer).passed


def test_exact_normalize_does_not_go_beyond_what_was_asked() -> None:
    out = grade(ExactGrader(), {"equals": "Paris", "normalize": ["whitespace"]}, "paris")
    assert not out.passed
    assert "normalized: whitespace" in reasons(out)


def test_normalize_text_order() -> None:
    assert normalize_text(" A,  B ", ["case", "punctuation", "whitespace"]) == "a b"


@pytest.mark.parametrize(
    ("expect", "field", "fragment"),
    [
        ({"equals": "x", "normalize": ["case", "x"]}, "expect.normalize", "unknown step 'x'"),
        ({"equals": "x", "normalize": 3}, "expect.normalize", 'must be "all" or a list'),
        ({"equals": "x", "normalize": "some"}, "expect.normalize", "unknown step 'some'"),
        ({"normalize": "all"}, "expect.normalize", "has no effect without expect.equals"),
    ],
)
def test_exact_validate_expect(expect: dict[str, Any], field: str, fragment: str) -> None:
    errors = ExactGrader().validate_expect(expect)
    assert any(f == field and fragment in m for f, m in errors), errors


def test_exact_applies_only_with_equals() -> None:
    g = ExactGrader()
    assert g.applies(make_ctx({"equals": "x"}).case)
    assert not g.applies(make_ctx({"contains": ["x"]}).case)


# --------------------------------------------------------------------------- regex


def test_regex_single_and_list_pass() -> None:
    g = RegexGrader()
    assert grade(g, {"regex": r"HTTP \d{3}"}, "returns HTTP 404").passed
    assert grade(g, {"regex": [r"^class \w+", r"(?i)assert"]}, "class Foo:\n  ASSERT x").passed


def test_regex_each_pattern_must_match() -> None:
    out = grade(RegexGrader(), {"regex": ["foo", "bar", "baz"]}, "foo only")
    assert not out.passed
    assert [v.category for v in out.violations] == ["PATTERN", "PATTERN"]
    assert "no match for /bar/" in out.violations[0].reason
    assert "answer: «foo only»" in out.violations[0].reason


def test_not_regex_fails_when_any_matches() -> None:
    g = RegexGrader()
    assert grade(g, {"not_regex": ["password", r"sk-\w+"]}, "nothing secret").passed
    out = grade(g, {"not_regex": ["password", r"sk-\w+"]}, "the key is sk-abc123 ok")
    assert not out.passed
    (v,) = out.violations
    assert "forbidden pattern /sk-\\w+/ matched «sk-abc123» at character 11" in v.reason


def test_regex_and_not_regex_together() -> None:
    out = grade(RegexGrader(), {"regex": "ok", "not_regex": "error"}, "ok but error")
    assert len(out.violations) == 1
    assert "forbidden" in out.violations[0].reason


def test_regex_caps_the_searched_text_and_says_so() -> None:
    g = RegexGrader()
    tail = TEN_MB + "NEEDLE"
    start = time.perf_counter()
    out = grade(g, {"regex": "NEEDLE"}, tail)
    assert time.perf_counter() - start < 5
    assert not out.passed
    assert f"only the first {REGEX_SCAN_LIMIT:,} of {len(tail):,} characters" in reasons(out)
    # A match inside the first megabyte is found even in a huge answer.
    assert grade(g, {"regex": "lorem"}, TEN_MB).passed


def test_not_regex_on_truncated_answer_fails_closed() -> None:
    out = grade(RegexGrader(), {"not_regex": "NEEDLE"}, TEN_MB)
    assert not out.passed
    assert "cannot show the answer free of /NEEDLE/" in reasons(out)
    assert "truncated" in reasons(out)


@pytest.mark.parametrize(
    ("expect", "field", "fragment"),
    [
        ({"regex": "("}, "expect.regex", "invalid regular expression '('"),
        ({"regex": ["ok", "[a-"]}, "expect.regex[1]", "invalid regular expression '[a-'"),
        ({"not_regex": "*x"}, "expect.not_regex", "invalid regular expression"),
        ({"regex": 5}, "expect.regex", "must be a regular expression or a list"),
        ({"regex": ["a", 1]}, "expect.regex", "must be a regular expression or a list"),
        ({"not_regex": []}, "expect.not_regex", "must not be an empty list"),
    ],
)
def test_regex_validate_expect(expect: dict[str, Any], field: str, fragment: str) -> None:
    errors = RegexGrader().validate_expect(expect)
    assert any(f == field and fragment in m for f, m in errors), errors


def test_regex_grade_reports_a_bad_pattern_instead_of_raising() -> None:
    out = grade(RegexGrader(), {"regex": "("}, "text")
    assert out.violations[0].category == "GRADER_CONFIG"


# --------------------------------------------------------------------------- contains_any


def test_contains_any() -> None:
    g = ContainsAnyGrader()
    assert grade(g, {"contains_any": ["Paris", "Lyon"]}, "I live in Lyon.").passed
    out = grade(g, {"contains_any": ["Paris", "Lyon"]}, "I live in Rome.")
    assert not out.passed
    assert out.violations[0].category == "CONTENT"
    assert '["Paris", "Lyon"]' in out.violations[0].reason


def test_contains_any_is_case_sensitive() -> None:
    assert not grade(ContainsAnyGrader(), {"contains_any": ["Paris"]}, "paris").passed


@pytest.mark.parametrize(
    ("value", "fragment"),
    [([], "must not be empty"), (["ok", ""], "must not contain an empty string")],
)
def test_contains_any_validate_expect(value: list[str], fragment: str) -> None:
    errors = ContainsAnyGrader().validate_expect({"contains_any": value})
    assert errors and fragment in errors[0][1]


@pytest.mark.parametrize("pattern", ["", "|", ".*", "(?i)", "x?", "(?:)|abc"])
@pytest.mark.parametrize("key", ["regex", "not_regex"])
def test_a_pattern_found_in_any_text_is_refused(pattern: str, key: str) -> None:
    """``regex: ""`` passed a completely wrong answer (a probe), as ``contains_any: [""]``
    would have, which is refused; as ``not_regex`` it fails every answer."""
    errors = RegexGrader().validate_expect({key: [pattern]})
    assert errors and errors[0][0] == f"expect.{key}[0]"
    assert "is found in any text" in errors[0][1]
    assert ("passes whatever" if key == "regex" else "fails every answer") in errors[0][1]


@pytest.mark.parametrize("pattern", ["^$", "^ok", r"\d+", "(?i)paris", "a*b"])
def test_a_pattern_some_text_lacks_is_kept(pattern: str) -> None:
    assert RegexGrader().validate_expect({"regex": pattern}) == []


@pytest.mark.parametrize(
    ("grader", "expect", "field"),
    [
        (CitesGrader(), {"cites": []}, "expect.cites"),
        (
            SimilarityGrader(),
            {"similar_to": "x", "similarity_threshold": -1},
            "expect.similarity_threshold",
        ),
    ],
    ids=["cites-none", "similarity-minus-one"],
)
def test_a_check_every_answer_passes_is_refused(
    grader: Grader, expect: dict[str, Any], field: str
) -> None:
    """A probe: ``cites: []`` and a similarity threshold of -1 (every cosine reaches it)
    passed an unrelated answer."""
    errors = grader.validate_expect(expect)
    assert [f for f, _ in errors] == [field], errors


def test_citing_nothing_is_a_check_with_cites_only() -> None:
    assert CitesGrader().validate_expect({"cites": [], "cites_only": True}) == []


def test_an_empty_banned_string_is_refused(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "a", "prompt": "p", "must_not": ["x", ""]}) + "\n")
    graders: list[Grader] = [ContractGrader(), *builtin_graders()]
    keys = {k.name: k for g in graders for k in g.expect_keys}
    with pytest.raises(DatasetError, match="must_not: must not contain an empty string"):
        parse_rows(rows, keys, graders)


# --------------------------------------------------------------------------- JSON extraction


@pytest.mark.parametrize(
    ("text", "value", "source"),
    [
        ('{"a": 1}', {"a": 1}, "the whole answer"),
        ("  [1, 2]\n", [1, 2], "the whole answer"),
        ("42", 42, "the whole answer"),
        ('Here:\n```json\n{"a": 2}\n```\nDone {"b": 3}', {"a": 2}, "a fenced block"),
        ('```JSON\n{"a": 2}\n```', {"a": 2}, "a fenced block"),
        ('```\n{"a": 4}\n```', {"a": 4}, "a fenced block"),
        ('```python\nx = {"a": 5}\n```\n```json\n{"a": 6}\n```', {"a": 6}, "a fenced block"),
        ('The result is {"a": 3} as requested.', {"a": 3}, "the JSON value at character 14"),
        ('Broken {"a": ,} then {"b": 1}', {"b": 1}, "the JSON value at character 21"),
        ('see [1] and {"a": 1}', [1], "the JSON value at character 4"),
    ],
)
def test_extract_json(text: str, value: Any, source: str) -> None:
    found = extract_json(text)
    assert found.found, found.error
    assert found.value == value
    assert found.source == source


@pytest.mark.parametrize("text", [None, "", "   ", "no json here", '{"a": NaN}', "[Infinity]"])
def test_extract_json_failures(text: str | None) -> None:
    assert not extract_json(text).found


def test_extract_json_tries_a_bounded_number_of_start_positions() -> None:
    text = "{x " * (JSON_CANDIDATES + 5) + '{"a": 1}'
    assert not extract_json(text).found
    assert extract_json("{x " * (JSON_CANDIDATES - 1) + '{"a": 1}').found


# --------------------------------------------------------------------------- json_schema

ORDER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["id", "items"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "integer", "minimum": 1},
        "note": {"type": ["string", "null"], "maxLength": 10},
        "items": {
            "type": "array",
            "minItems": 1,
            "items": {"$ref": "#/definitions/item"},
        },
    },
    "definitions": {
        "item": {
            "type": "object",
            "required": ["sku", "price"],
            "properties": {
                "sku": {"type": "string", "pattern": "^[A-Z]{3}-\\d+$"},
                "price": {"type": "number", "exclusiveMinimum": 0},
            },
        }
    },
}


def test_json_schema_passes() -> None:
    answer = {"id": 7, "note": None, "items": [{"sku": "ABC-1", "price": 2.5}]}
    g = JsonSchemaGrader()
    assert grade(g, {"json_schema": ORDER_SCHEMA}, json.dumps(answer)).passed
    fenced = f"Here you go:\n```json\n{json.dumps(answer, indent=2)}\n```\n"
    assert grade(g, {"json_schema": ORDER_SCHEMA}, fenced).passed


def test_json_schema_violations_carry_json_paths() -> None:
    answer = {
        "id": 0,
        "note": "far too long a note",
        "extra": True,
        "items": [
            {"sku": "ABC-1", "price": 1},
            {"sku": "abc", "price": 1},
            {"sku": "XYZ-2", "price": "12"},
            {"sku": "XYZ-3"},
        ],
    }
    out = grade(JsonSchemaGrader(), {"json_schema": ORDER_SCHEMA}, json.dumps(answer))
    got = {v.reason.split(":", 1)[0] for v in out.violations}
    assert got == {
        "$.id",
        "$.note",
        "$.extra",
        "$.items[1].sku",
        "$.items[2].price",
        "$.items[3].price",
    }
    by_path = {v.reason.split(":", 1)[0]: v.reason for v in out.violations}
    assert "expected number, got string" in by_path["$.items[2].price"]
    assert "required property is missing" in by_path["$.items[3].price"]
    assert "additional property is not allowed" in by_path["$.extra"]
    assert "must be >= 1, got 0" in by_path["$.id"]
    assert all(v.category == "SCHEMA" for v in out.violations)


def test_json_schema_quotes_non_identifier_keys() -> None:
    schema = {"type": "object", "properties": {"a b": {"type": "string"}}}
    out = grade(JsonSchemaGrader(), {"json_schema": schema}, '{"a b": 1}')
    assert out.violations[0].reason.startswith('$["a b"]: expected string')


def test_json_schema_unparsable_answer_is_a_format_violation() -> None:
    out = grade(JsonSchemaGrader(), {"json_schema": {"type": "object"}}, "Sorry, no JSON.")
    assert out.violations[0].category == "FORMAT"
    assert "no JSON value found" in out.violations[0].reason


@pytest.mark.parametrize(
    ("schema", "value", "ok"),
    [
        ({"type": "integer"}, 3, True),
        ({"type": "integer"}, 3.0, True),
        ({"type": "integer"}, 3.5, False),
        ({"type": "integer"}, True, False),
        ({"type": "number"}, 3, True),
        ({"type": "number"}, False, False),
        ({"type": "boolean"}, 0, False),
        ({"type": "null"}, None, True),
        ({"type": ["string", "null"]}, None, True),
        ({"type": ["string", "null"]}, 1, False),
        ({"enum": [1, "a", None]}, 1.0, True),
        ({"enum": [1, "a", None]}, True, False),
        ({"const": {"a": [1]}}, {"a": [1.0]}, True),
        ({"const": False}, 0, False),
        ({"minimum": 2, "maximum": 4}, 4, True),
        ({"exclusiveMaximum": 4}, 4, False),
        ({"exclusiveMinimum": 4}, 4.001, True),
        ({"minimum": 2}, "not a number", True),
        ({"minLength": 2, "maxLength": 3}, "ab", True),
        ({"minLength": 2}, "é", False),
        ({"maxLength": 1}, "é", True),
        ({"pattern": "^a"}, "ba", False),
        ({"minItems": 1, "maxItems": 2}, [], False),
        ({"maxItems": 2}, [1, 2, 3], False),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 1, True),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, 1.5, False),
        ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 1.5, True),
        ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 1, False),
        ({"allOf": [{"type": "string"}, {"minLength": 3}]}, "ab", False),
        ({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"}, "x", True),
        ({"$defs": {"s": {"type": "string"}}, "$ref": "#/$defs/s"}, 1, False),
        ({"additionalProperties": {"type": "integer"}}, {"a": 1, "b": "x"}, False),
        ({"properties": {"a": False}}, {"a": 1}, False),
        (True, {"anything": 1}, True),
        ({"title": "T", "description": "d", "format": "uri", "$schema": "x"}, "no", True),
        ({"format": "email"}, "no", False),
    ],
)
def test_schema_keywords(schema: Any, value: Any, ok: bool) -> None:
    assert check_schema(schema) == []
    errors = validate_json(value, schema)
    assert (not errors) is ok, errors


def test_schema_any_and_one_of_messages() -> None:
    ((path, msg),) = validate_json(1.5, {"anyOf": [{"type": "string"}, {"type": "integer"}]})
    assert path == "$"
    assert msg.startswith("matches none of the 2 anyOf alternatives (#0: $: expected string")
    ((path, msg),) = validate_json(1, {"oneOf": [{"type": "number"}, {"type": "integer"}]})
    assert "matches 2 oneOf alternatives (0, 1); exactly one must match" in msg


def test_schema_recursive_ref_and_deep_data() -> None:
    schema = {
        "$defs": {
            "node": {
                "type": "object",
                "properties": {"child": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}},
            }
        },
        "$ref": "#/$defs/node",
    }
    assert check_schema(schema) == []
    tree: dict[str, Any] = {"v": 1}
    for _ in range(30):
        tree = {"v": 1, "child": tree}
    assert validate_json(tree, schema) == []
    deep = '{"child": ' * 400 + '{"v": "x"}' + "}" * 400
    out = grade(JsonSchemaGrader(), {"json_schema": schema}, deep)
    assert not out.passed  # either the leaf error or "too deeply": never a crash


def test_schema_reports_at_most_max_reported_errors() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    out = grade(JsonSchemaGrader(), {"json_schema": schema}, json.dumps(list(range(500))))
    assert len(out.violations) == MAX_REPORTED + 1
    assert out.violations[-1].reason.startswith("... and")


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        (
            {"properties": {"a": {"requried": ["b"]}}},
            "#/properties/a: unknown keyword 'requried', did you mean 'required'?",
        ),
        ({"type": "float"}, "#/type: 'float' is not one of ['array', 'boolean'"),
        ({"type": []}, "#/type: [] is not one of"),
        ({"required": "a"}, "#/required: 'a' is not of type 'array'"),
        ({"minLength": -1}, "#/minLength: -1 is less than the minimum of 0"),
        ({"maximum": "9"}, "#/maximum: '9' is not of type 'number'"),
        ({"pattern": "("}, "#/pattern: invalid regular expression '('"),
        ({"patternProperties": {"(": {}}}, "#/patternProperties: invalid regular expression '('"),
        ({"items": [{"type": "string"}]}, "#/items: [{'type': 'string'}] is not of type 'object',"),
        ({"anyOf": []}, "#/anyOf: [] should be non-empty"),
        ({"$ref": "#/definitions/missing"}, "#/$ref: cannot resolve '#/definitions/missing'"),
        ({"$ref": "http://example.com/s.json"}, "cannot resolve 'http://example.com/s.json'"),
        (
            {
                "definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}},
                "$ref": "#/definitions/a",
            },
            "a $ref cycle",
        ),
        ({"allOf": [{"$ref": "#"}]}, "refers to itself without consuming data"),
        ({"definitions": {"a": {"type": "float"}}}, "#/definitions/a/type: 'float' is not one of"),
        ({"enum": "a"}, "#/enum: 'a' is not of type 'array'"),
        ({"properties": {"a": 3}}, "#/properties/a: 3 is not of type 'object', 'boolean'"),
    ],
)
def test_json_schema_validate_expect(schema: Any, fragment: str) -> None:
    errors = JsonSchemaGrader().validate_expect({"json_schema": schema})
    assert errors, schema
    assert all(f == "expect.json_schema" for f, _ in errors)
    assert any(fragment in m for _, m in errors), errors
    assert len({m for _, m in errors}) == len(errors)  # the meta-schema repeats itself


def test_json_schema_grade_with_unusable_schema_is_config_error() -> None:
    out = grade(JsonSchemaGrader(), {"json_schema": {"type": "float"}}, "{}")
    assert out.violations[0].category == "GRADER_CONFIG"
    assert "'float'" in out.violations[0].reason


# --------------------------------------------------------------------------- json_equals


def test_json_equals_passes_regardless_of_key_order_and_int_float() -> None:
    expect = {"json_equals": {"a": 1, "b": [1, {"c": None}]}}
    assert grade(JsonEqualsGrader(), expect, '{"b": [1.0, {"c": null}], "a": 1}').passed


def test_json_equals_lists_differing_paths() -> None:
    expect = {"json_equals": {"a": 1, "b": {"c": [1, 2, 3]}, "d": "x", "t": True, "o": {}}}
    answer = '{"a": 2, "b": {"c": [1, 5]}, "e": 0, "t": 1, "o": []}'
    out = grade(JsonEqualsGrader(), expect, answer)
    got = [v.reason for v in out.violations]
    assert "$.a: expected 1, got 2" in got
    assert "$.b.c: expected 3 items, got 2" in got
    assert "$.b.c[1]: expected 2, got 5" in got
    assert '$.d: missing (expected "x")' in got
    assert "$.e: unexpected key (got 0)" in got
    assert "$.t: expected true, got 1" in got
    assert "$.o: expected object, got array []" in got
    assert all(v.category == "MISMATCH" for v in out.violations)


def test_json_equals_ignore_paths() -> None:
    expect = {
        "json_equals": {"id": 1, "meta": {"ts": 0, "v": 1}, "items": [{"id": 1, "n": "a"}]},
        "json_ignore": ["id", "$.meta.ts", "$.items[*].id"],
    }
    answer = {"id": 99, "meta": {"ts": 12345, "v": 1}, "items": [{"id": 7, "n": "a"}]}
    assert grade(JsonEqualsGrader(), expect, json.dumps(answer)).passed
    answer["meta"]["v"] = 2  # type: ignore[index]
    out = grade(JsonEqualsGrader(), expect, json.dumps(answer))
    assert [v.reason for v in out.violations] == ["$.meta.v: expected 1, got 2"]


def test_json_equals_ignore_covers_missing_and_extra_keys() -> None:
    expect = {"json_equals": {"a": 1, "gone": 1}, "json_ignore": ["$.gone", "$.new"]}
    assert grade(JsonEqualsGrader(), expect, '{"a": 1, "new": 2}').passed


@pytest.mark.parametrize(
    ("path", "tokens"),
    [
        ("$.a.b", ["a", "b"]),
        ("$.items[2].price", ["items", 2, "price"]),
        ('$["a b"][0]', ["a b", 0]),
        ("ts", ["ts"]),
        ("a.b", ["a.b"]),
        ("$", []),
    ],
)
def test_parse_path(path: str, tokens: list[Any]) -> None:
    assert parse_path(path) == tokens


def test_json_equals_validate_expect() -> None:
    g = JsonEqualsGrader()
    errors = g.validate_expect({"json_equals": {}, "json_ignore": ["$.ok", "$[", "$..x"]})
    assert [f for f, _ in errors] == ["expect.json_ignore[1]", "expect.json_ignore[2]"]
    assert g.validate_expect({"json_ignore": ["a"]})[0][1] == (
        "has no effect without expect.json_equals"
    )


def test_json_equals_null_expectation_is_graded() -> None:
    # json_equals: null is dropped by the dataset loader; a JSON false/0/[] is a real value.
    assert grade(JsonEqualsGrader(), {"json_equals": []}, "[]").passed
    assert not grade(JsonEqualsGrader(), {"json_equals": False}, "0").passed


# --------------------------------------------------------------------------- tool_calls

CALLS = [
    ToolCall("search", {"query": "weather paris", "filters": {"year": 2024, "lang": "fr"}}),
    ToolCall("fetch", {"url": "https://x"}),
    ToolCall("answer", {"text": "sunny", "sources": [1, 2]}),
]


@pytest.mark.parametrize(
    ("order", "expected", "ok"),
    [
        ("subsequence", ["search", "answer"], True),
        ("subsequence", ["answer", "search"], False),
        (None, ["search", "answer"], True),
        ("exact", ["search", "fetch", "answer"], True),
        ("exact", ["search", "answer"], False),
        ("exact", ["search", "answer", "fetch"], False),
        ("any", ["answer", "search"], True),
        ("any", ["answer", "answer"], False),
        ("exact", [], False),
        ("subsequence", [], True),
    ],
)
def test_tool_call_order_modes(order: str | None, expected: list[str], ok: bool) -> None:
    expect: dict[str, Any] = {"tool_calls": [{"name": n} for n in expected]}
    if order is not None:
        expect["tool_calls_order"] = order
    out = grade(ToolCallsGrader(), expect, None, tool_calls=CALLS)
    assert out.passed is ok, reasons(out)


def test_tool_call_argument_subsets() -> None:
    g = ToolCallsGrader()
    subset = {"name": "search", "arguments": {"filters": {"year": 2024}}}
    assert grade(g, {"tool_calls": [subset]}, tool_calls=CALLS).passed
    assert grade(
        g,
        {"tool_calls": [{"name": "answer", "arguments": {"sources": [1, 2.0]}}]},
        tool_calls=CALLS,
    ).passed
    wrong = {"name": "search", "arguments": {"filters": {"year": 2023}}}
    out = grade(g, {"tool_calls": [wrong]}, tool_calls=CALLS)
    assert "search arguments differ at $.filters.year: expected 2023, got 2024" in reasons(out)
    missing = {"name": "search", "arguments": {"filters": {"region": "eu"}}}
    out = grade(g, {"tool_calls": [missing]}, tool_calls=CALLS)
    assert "$.filters.region: missing" in reasons(out)
    partial_list = {"name": "answer", "arguments": {"sources": [1]}}
    out = grade(g, {"tool_calls": [partial_list]}, tool_calls=CALLS)
    assert "$.sources: expected 1 items, got 2" in reasons(out)


def test_tool_calls_string_arguments_are_parsed() -> None:
    calls = [ToolCall("search", '{"q": "x", "n": 3}')]  # type: ignore[arg-type]
    expect = {"tool_calls": [{"name": "search", "arguments": {"n": 3}}]}
    assert grade(ToolCallsGrader(), expect, tool_calls=calls).passed


def test_tool_calls_any_order_uses_a_full_matching() -> None:
    # A greedy match would give s(q=a) to the unconstrained call and then fail.
    calls = [ToolCall("s", {"q": "a"}), ToolCall("s", {"q": "b"})]
    expect = {
        "tool_calls": [{"name": "s"}, {"name": "s", "arguments": {"q": "a"}}],
        "tool_calls_order": "any",
    }
    assert grade(ToolCallsGrader(), expect, tool_calls=calls).passed


def test_tool_calls_messages() -> None:
    out = grade(ToolCallsGrader(), {"tool_calls": ["search"]}, "text only")
    assert "expected call #0 search(…) not found: no tool calls were made" in reasons(out)
    out = grade(ToolCallsGrader(), {"tool_calls": ["lookup"]}, tool_calls=CALLS)
    assert "calls made: search, fetch, answer" in reasons(out)
    out = grade(ToolCallsGrader(), {"tool_calls": ["answer", "search"]}, tool_calls=CALLS)
    assert "expected call #1 search(…) not found after call #2" in reasons(out)
    out = grade(
        ToolCallsGrader(),
        {"tool_calls": ["fetch", "search", "answer"], "tool_calls_order": "exact"},
        tool_calls=CALLS,
    )
    assert "call #0: expected fetch, got search" in reasons(out)
    assert all(v.category == "TOOL_CALL" for v in out.violations)


@pytest.mark.parametrize(
    ("expect", "fragment"),
    [
        ({"tool_calls": [{"arguments": {}}]}, "[0].name: must be a non-empty string"),
        ({"tool_calls": [{"name": "a", "args": {}}]}, "[0]: unknown key 'args'"),
        ({"tool_calls": [{"name": "a", "arguments": [1]}]}, "[0].arguments: must be an object"),
        ({"tool_calls": [3]}, "[0]: must be an object"),
        ({"tool_calls": ["a"], "tool_calls_order": "sorted"}, "must be one of exact"),
        ({"tool_calls_order": "any"}, "has no effect without expect.tool_calls"),
    ],
)
def test_tool_calls_validate_expect(expect: dict[str, Any], fragment: str) -> None:
    errors = ToolCallsGrader().validate_expect(expect)
    assert any(fragment in m for _, m in errors), errors


# --------------------------------------------------------------------------- number


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("The answer is 42.", 42.0),
        ("42", 42.0),
        ("  -3.5\n", -3.5),
        ("1e2", 100.0),
        ("first 10, then 2.5e-3", 0.0025),
        ("about 3.", 3.0),
        ("only .5 left", 0.5),
        ("+7 degrees", 7.0),
        ("it was -12 outside", -12.0),
        ("range 3-4", 4.0),
        ("x-5", 5.0),
        ("2024-01-05", 5.0),
        ("1,234", 234.0),
        ("42 is not 43", 43.0),
        ("5kg", 5.0),
        ('{"total": 17}', 17.0),
        ("v1.2", None),
        ("no digits at all", None),
        ("", None),
        (None, None),
        ("true", None),
    ],
)
def test_extract_number(text: str | None, value: float | None) -> None:
    assert extract_number(text) == value


@pytest.mark.parametrize(
    ("spec", "answer", "ok"),
    [
        (42, "It is 42", True),
        (42, "It is 42.000001", False),
        (0.1, "0.1", True),
        ({"value": 100, "abs_tol": 0.5}, "100.4", True),
        ({"value": 100, "abs_tol": 0.5}, "100.6", False),
        ({"value": 100, "rel_tol": 0.01}, "99.2", True),
        ({"value": 100, "rel_tol": 0.01}, "98.9", False),
        ({"value": 100, "abs_tol": 2, "rel_tol": 0.001}, "101.5", True),
        ({"value": -5}, "minus five is -5", True),
        ({"value": 3.14159}, "pi ≈ 3.14", False),
    ],
)
def test_number_tolerances(spec: Any, answer: str, ok: bool) -> None:
    out = grade(NumberGrader(), {"number": spec}, answer)
    assert out.passed is ok, reasons(out)


def test_number_messages() -> None:
    out = grade(NumberGrader(), {"number": {"value": 10, "abs_tol": 1}}, "maybe 12")
    (v,) = out.violations
    assert v.category == "MISMATCH"
    assert "expected 10 ± 1, got 12 (off by 2" in v.reason
    out = grade(NumberGrader(), {"number": 10}, "ten")
    assert out.violations[0].category == "FORMAT"
    assert "no number in the answer" in out.violations[0].reason
    out = grade(NumberGrader(), {"number": 10}, "9" * 400)
    assert "out of range" in out.violations[0].reason


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (True, "must be a number or"),
        ("42", "must be a number or"),
        ({"abs_tol": 1}, "needs a numeric `value`"),
        ({"value": 1, "tol": 1}, "unknown key 'tol'"),
        ({"value": 1, "abs_tol": -1}, "abs_tol must be a non-negative number"),
        ({"value": 1, "rel_tol": "x"}, "rel_tol must be a non-negative number"),
    ],
)
def test_number_validate_expect(value: Any, fragment: str) -> None:
    errors = NumberGrader().validate_expect({"number": value})
    assert errors and errors[0][0] == "expect.number" and fragment in errors[0][1], errors


# --------------------------------------------------------------------------- cites


def test_cites_default_pattern() -> None:
    g = CitesGrader()
    text = "Use retries [doc-1] and backoff [guide_2.md]."
    assert grade(g, {"cites": ["doc-1", "guide_2.md"]}, text).passed
    out = grade(g, {"cites": ["doc-1", "doc-3"]}, text)
    assert [v.reason for v in out.violations] == ["missing citation 'doc-3'"]
    assert out.violations[0].category == "CITATION"


def test_cites_only_fails_on_extra_citations() -> None:
    text = "A [doc-1] B [doc-2] C [doc-9]"
    assert grade(CitesGrader(), {"cites": ["doc-1"]}, text).passed
    out = grade(CitesGrader(), {"cites": ["doc-1"], "cites_only": True}, text)
    assert [v.reason for v in out.violations] == [
        "unexpected citation 'doc-2' (cites_only)",
        "unexpected citation 'doc-9' (cites_only)",
    ]


def test_cites_custom_pattern_from_options() -> None:
    text = "See (source: kb-7) and (source: kb-8)."
    pattern = r"\(source: ([\w-]+)\)"
    expect = {"cites": ["kb-7", "kb-8"]}
    assert not grade(CitesGrader(), expect, text).passed
    assert grade(CitesGrader(), expect, text, options={"cites": {"pattern": pattern}}).passed
    assert grade(CitesGrader(), expect, text, options={"pattern": pattern}).passed
    # Without a group the whole match is the id; a captured list counts as several ids.
    only = {"pattern": r"KB\d+"}
    assert grade(CitesGrader(), {"cites": ["KB7"]}, "per KB7.", options=only).passed
    assert grade(
        CitesGrader(), {"cites": ["a", "b"]}, "refs [a, b]", options={"pattern": r"\[([^\]]+)\]"}
    ).passed


def test_cites_rag_header() -> None:
    text = "rag: doc-1, doc-2\nbody without brackets"
    expect = {"cites": ["doc-1", "doc-2"], "cites_only": True}
    assert not grade(CitesGrader(), expect, text).passed
    assert grade(CitesGrader(), expect, text, options={"cites": {"header": "RAG:"}}).passed
    out = grade(
        CitesGrader(), expect, "intro\nRAG: doc-1, doc-2", options={"cites": {"header": "RAG:"}}
    )
    assert not out.passed  # the header counts only on the first line


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"pattern": "("}, "does not compile"),
        ({"pattern": 3}, "option `pattern` must be"),
        ({"header": ""}, "option `header` must be"),
    ],
)
def test_cites_bad_options_are_config_violations(options: dict[str, Any], fragment: str) -> None:
    out = grade(CitesGrader(), {"cites": ["a"]}, "[a]", options={"cites": options})
    assert out.violations[0].category == "GRADER_CONFIG"
    assert fragment in out.violations[0].reason


def test_cites_validate_expect() -> None:
    g = CitesGrader()
    assert g.validate_expect({"cites": ["ok", " "]}) == [("expect.cites", "ids must not be blank")]
    assert g.validate_expect({"cites_only": True})[0][0] == "expect.cites_only"
    assert g.validate_expect({"cites": ["a"], "cites_only": False}) == []


# --------------------------------------------------------------------------- must_not


def test_must_not_applies_only_to_rows_without_contract_keys() -> None:
    g = MustNotGrader()
    assert g.applies(make_ctx({"regex": "x"}, must_not=["bad"]).case)
    assert g.applies(make_ctx({}, must_not=["bad"]).case)
    assert not g.applies(make_ctx({}).case)
    for key, value in [
        ("layer", "api"),
        ("class", "X"),
        ("status", 200),
        ("rag", ["a"]),
        ("refuse", True),
        ("contains", ["x"]),
    ]:
        assert not g.applies(make_ctx({key: value}, must_not=["bad"]).case), key


def test_must_not_reports_each_banned_string() -> None:
    g = MustNotGrader()
    assert grade(g, {}, "clean answer", must_not=["DROP TABLE", "password"]).passed
    out = grade(
        g, {}, "password: DROP TABLE users; password", must_not=["DROP TABLE", "password", "rm -rf"]
    )
    assert [(v.category, v.severity, v.reason) for v in out.violations] == [
        ("FORBIDDEN", Severity.HIGH, "contains banned 'DROP TABLE'"),
        ("FORBIDDEN", Severity.HIGH, "contains banned 'password'"),
    ]


# --------------------------------------------------------------------------- dataset validation


def test_validate_expect_errors_surface_at_collection(tmp_path: Path) -> None:
    graders: list[Grader] = [ContractGrader(), *builtin_graders()]
    keys: dict[str, ExpectKey] = {}
    for g in graders:
        for k in g.expect_keys:
            keys.setdefault(k.name, k)
    rows = [
        {
            "id": "ok",
            "prompt": "p",
            "expect": {
                "regex": "a+",
                "json_schema": {"type": "object"},
                "number": {"value": 1, "rel_tol": 0.1},
            },
        },
        {"id": "bad-regex", "prompt": "p", "expect": {"regex": ["ok", "(unclosed"]}},
        {
            "id": "bad-schema",
            "prompt": "p",
            "expect": {"json_schema": {"oneOf": [{"minimum": "1"}]}},
        },
        {"id": "bad-type", "prompt": "p", "expect": {"contains_any": "x"}},
        {"id": "bad-tool", "prompt": "p", "expect": {"tool_calls": [{"name": ""}]}},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        parse_rows(path, keys, graders)
    text = str(info.value)
    assert ":2: expect.regex[1]: invalid regular expression '(unclosed'" in text
    assert ":3: expect.json_schema: #/oneOf/0/minimum: '1' is not of type 'number'" in text
    assert ":4: expect.contains_any: expected list[str], got str" in text
    assert ":5: expect.tool_calls: [0].name: must be a non-empty string" in text
    assert ":1:" not in text


# --------------------------------------------------------------------------- similarity


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


def sim_options(srv: FakeLLMServer, kind: str = "ollama") -> dict[str, Any]:
    url = srv.base_url if kind == "ollama" else srv.openai_base_url
    return {"similarity": {"provider": kind, "base_url": url, "model": "fake-embed:latest"}}


REF = "the cat sat on the mat"


@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_similarity_identical_texts_pass(server: FakeLLMServer, kind: str) -> None:
    g = SimilarityGrader(environ={})
    out = grade(g, {"similar_to": REF}, REF, options=sim_options(server, kind))
    assert out.passed
    assert out.hard is False
    assert out.score == pytest.approx(1.0)
    assert out.threshold == 0.8
    req = server.last_request
    assert req is not None
    assert req.path == ("/api/embed" if kind == "ollama" else "/v1/embeddings")
    assert req.json == {"model": "fake-embed:latest", "input": [REF, REF]}


def test_similarity_unrelated_texts_score_low(server: FakeLLMServer) -> None:
    g = SimilarityGrader(environ={})
    out = grade(
        g, {"similar_to": REF}, "quantum chromodynamics lattice gauge", options=sim_options(server)
    )
    assert not out.passed
    assert out.score is not None and out.score < 0.5
    (v,) = out.violations
    assert v.category == "SIMILARITY"
    assert f"similarity {out.score:.3f} < threshold 0.8" in v.reason


def test_similarity_threshold_from_the_row(server: FakeLLMServer) -> None:
    g = SimilarityGrader(environ={})
    expect = {"similar_to": REF, "similarity_threshold": 0.3}
    out = grade(g, {**expect}, "the cat sat somewhere else entirely", options=sim_options(server))
    assert out.threshold == 0.3
    assert out.score is not None
    assert out.passed is (out.score >= 0.3)


def test_similarity_openai_base_url_without_v1(server: FakeLLMServer) -> None:
    options = {"provider": "openai", "base_url": server.base_url}
    out = grade(SimilarityGrader(environ={}), {"similar_to": REF}, REF, options=options)
    assert out.passed
    assert server.last_request is not None and server.last_request.path == "/v1/embeddings"


def test_similarity_from_environment(
    server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOLDEVAL_EMBED_PROVIDER", "ollama")
    monkeypatch.setenv("GOLDEVAL_EMBED_URL", server.base_url)
    monkeypatch.setenv("GOLDEVAL_EMBED_MODEL", "env-model")
    out = grade(SimilarityGrader(), {"similar_to": REF}, REF)
    assert out.passed
    assert server.last_request is not None and server.last_request.model == "env-model"
    # Manifest options win over the environment, field by field.
    out = grade(
        SimilarityGrader(),
        {"similar_to": REF},
        REF,
        options={"similarity": {"model": "manifest-model"}},
    )
    assert out.passed
    assert server.requests[-1].model == "manifest-model"


def test_similarity_not_configured_is_a_soft_failure_with_no_score(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("GOLDEVAL_EMBED_PROVIDER", "GOLDEVAL_EMBED_URL", "GOLDEVAL_EMBED_MODEL"):
        monkeypatch.delenv(name, raising=False)
    out = grade(SimilarityGrader(), {"similar_to": REF}, REF)
    assert out.passed is False
    assert out.hard is False
    assert out.score is None
    assert out.threshold == 0.8
    assert "no embedding provider configured" in reasons(out)


def test_similarity_server_down_is_an_embedding_error_not_a_crash() -> None:
    with FakeLLMServer() as srv:
        options = sim_options(srv)
    out = grade(SimilarityGrader(environ={}), {"similar_to": REF}, REF, options=options)
    assert out.passed is False and out.hard is False and out.score is None
    (v,) = out.violations
    assert v.category == "EMBEDDING_ERROR"
    # the chat providers' client and wording (issue 16: one HTTP client for all calls)
    assert v.reason.startswith(
        "EMBEDDING_ERROR: MODEL_UNAVAILABLE after 4 tries: connection refused by http://127.0.0.1:"
    )


@pytest.mark.parametrize(
    ("fault", "fragment"),
    [
        (Fault.status(500), "HTTP 500 from"),
        (Fault.invalid_json(), "is not JSON"),
        (Fault.empty_content(), "returned 0 embeddings for 2 inputs"),
        (Fault.error_field("model not found"), "reported an error: model not found"),
        (Fault.hang(3), "within 0.5s (read timeout)"),
    ],
)
def test_similarity_server_faults(server: FakeLLMServer, fault: Fault, fragment: str) -> None:
    server.script([fault])
    options = sim_options(server)
    options["similarity"]["timeout"] = 0.5
    options["similarity"]["retries"] = 0  # retries: tests/reliability/test_secrets_masking.py
    out = grade(SimilarityGrader(environ={}), {"similar_to": REF}, REF, options=options)
    assert out.passed is False and out.score is None
    assert out.violations[0].category == "EMBEDDING_ERROR"
    assert fragment in out.violations[0].reason


def test_similarity_never_leaks_credentials(server: FakeLLMServer) -> None:
    secret = "sk-test-SECRET-123"
    server.script([Fault.status(401, body={"error": f"invalid api key {secret}"})])
    g = SimilarityGrader(environ={"GOLDEVAL_EMBED_API_KEY": secret})
    out = grade(g, {"similar_to": REF}, REF, options=sim_options(server, "openai"))
    assert secret not in reasons(out)
    assert "invalid api key ***" in reasons(out)
    assert server.requests[-1].headers["authorization"] == f"Bearer {secret}"
    url = server.base_url.replace("http://", "http://user:hunter2@")
    out = grade(
        SimilarityGrader(environ={}),
        {"similar_to": REF},
        REF,
        options={"provider": "ollama", "base_url": url},
    )
    assert out.passed
    server.script([Fault.status(503, body={"error": "hunter2"})])
    out = grade(
        SimilarityGrader(environ={}),
        {"similar_to": REF},
        REF,
        options={"provider": "ollama", "base_url": url},
    )
    assert "hunter2" not in reasons(out) and "user:" not in reasons(out)


def test_similarity_malformed_answers(server: FakeLLMServer) -> None:
    g = SimilarityGrader(environ={})
    options = sim_options(server)
    assert "the answer is empty" in reasons(grade(g, {"similar_to": REF}, None, options=options))
    out = grade(g, {"similar_to": REF}, SURROGATES, options=options)
    assert out.score is not None
    out = grade(g, {"similar_to": REF}, GARBAGE, options=options)
    assert out.score is not None
    grade(g, {"similar_to": REF}, TEN_MB, options=options)
    sent = server.requests[-1].json["input"][0]
    assert len(sent) == MAX_INPUT_CHARS


def test_similarity_bad_provider_config() -> None:
    out = grade(
        SimilarityGrader(environ={"GOLDEVAL_EMBED_PROVIDER": "cohere"}), {"similar_to": REF}, REF
    )
    assert not out.passed and "must be one of ollama, openai" in reasons(out)
    out = grade(
        SimilarityGrader(environ={}),
        {"similar_to": REF},
        REF,
        options={"provider": "ollama", "timeout": "soon"},
    )
    assert "timeout must be a positive number" in reasons(out)


def test_similarity_validate_expect() -> None:
    g = SimilarityGrader()
    assert g.validate_expect({"similar_to": "x", "similarity_threshold": 0.5}) == []
    assert g.validate_expect({"similar_to": "x", "similarity_threshold": 1.5})[0][1] == (
        "must be above -1 and at most 1 (a cosine)"
    )
    assert g.validate_expect({"similarity_threshold": 0.5})[0][0] == "expect.similarity_threshold"
    assert g.validate_expect({"similar_to": "  "}) == [("expect.similar_to", "must not be blank")]


def test_embedding_settings_resolution() -> None:
    assert embedding_settings({}, {}) is None
    s = embedding_settings({}, {"GOLDEVAL_EMBED_PROVIDER": "OpenAI", "GOLDEVAL_EMBED_API_KEY": "k"})
    assert s is not None
    assert (s.kind, s.base_url, s.model, s.api_key) == (
        "openai",
        "https://api.openai.com/v1",
        "text-embedding-3-small",
        "k",
    )
    assert "k" not in repr(s).replace("kind", "")
    s = embedding_settings({"provider": "ollama", "api_key_env": "MY_KEY"}, {"MY_KEY": "v"})
    assert s is not None and s.api_key == "v" and s.base_url == "http://127.0.0.1:11434"


def test_embedding_client_direct(server: FakeLLMServer) -> None:
    with EmbeddingClient("ollama", server.base_url, "m", timeout=5) as client:
        assert client.similarity("a b c", "a b c") == pytest.approx(1.0)
        assert len(client.embed(["x", "y", "z"])) == 3
    with pytest.raises(ProviderError) as info:
        cosine([0.0, 0.0], [1.0, 0.0])
    assert info.value.kind == "EMBEDDING_ERROR"
