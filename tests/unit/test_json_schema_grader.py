"""The json_schema grader on the jsonschema library (issue 20): JSON Schema Draft 2020-12.

A pydantic ``model_json_schema()`` validates as written ($defs/$ref, prefixItems, uniqueItems,
multipleOf, formats); a bad schema is a collection error naming file, line and field; the
grader's version enters the protocol's grader configuration.
"""

from __future__ import annotations

import datetime as dt
import enum
import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, Optional

import pytest
from pydantic import BaseModel, Field

from goldeval.core.errors import DatasetError
from goldeval.core.models import GraderOutcome
from goldeval.dataset.case import GoldenCase
from goldeval.dataset.rows import load_dataset, parse_rows
from goldeval.graders import budget
from goldeval.graders.base import GradeContext
from goldeval.graders.contract import ContractGrader
from goldeval.graders.json_schema import JsonSchemaGrader
from goldeval.graders.json_schema_check import (
    CHECKED_FORMATS,
    MESSAGE_LIMIT,
    check_schema,
    validate_json,
)
from goldeval.graders.registry import builtin_graders
from goldeval.providers.base import Answer
from goldeval.results.run_document import config_fingerprint
from tests.helpers import ROOT

GRADER = JsonSchemaGrader()


def grade(schema: Any, answer: Any) -> GraderOutcome:
    text = answer if isinstance(answer, str) else json.dumps(answer)
    ctx = GradeContext(
        case=GoldenCase("c1", "p", {"json_schema": schema}),
        answer=Answer(text=text),
        retrieved=[],
        pack=None,
    )
    return GRADER.grade(ctx)


def reasons(outcome: GraderOutcome) -> dict[str, str]:
    """Violations by JSON path."""
    return {v.reason.split(": ", 1)[0]: v.reason.split(": ", 1)[1] for v in outcome.violations}


# --------------------------------------------------------------------------- pydantic


class Kind(enum.Enum):
    BOOK = "book"
    GIFT = "gift"


class Item(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-\d+$")
    qty: int = Field(ge=1, multiple_of=5)
    price: float = Field(gt=0, multiple_of=0.01)


class Order(BaseModel):
    id: uuid.UUID
    created: dt.datetime
    kind: Kind
    status: Literal["open", "closed"]
    note: Optional[str] = None  # noqa: UP045 - the anyOf-with-null schema pydantic writes
    items: list[Item] = Field(min_length=1)
    pair: tuple[int, str]
    tags: set[str]
    extra: dict[str, int] = {}
    parent: Optional[Order] = None  # noqa: UP045


SCHEMA = Order.model_json_schema()
ORDER = Order(
    id=uuid.UUID("12345678-1234-5678-1234-567812345678"),
    created=dt.datetime(2026, 12, 3, 10, 0, tzinfo=dt.timezone.utc),
    kind=Kind.BOOK,
    status="open",
    items=[Item(sku="ABC-1", qty=10, price=19.99)],
    pair=(1, "a"),
    tags={"x", "y"},
    extra={"k": 1},
    parent=Order(
        id=uuid.uuid4(),
        created=dt.datetime.now(dt.timezone.utc),
        kind=Kind.GIFT,
        status="closed",
        items=[Item(sku="XYZ-2", qty=5, price=0.3)],
        pair=(2, "b"),
        tags=set(),
    ),
)


def test_pydantic_model_json_schema_round_trip() -> None:
    for key in ("$defs", "$ref", "prefixItems", "uniqueItems", "multipleOf", "anyOf"):
        assert key in json.dumps(SCHEMA), key  # the schema uses what version 1 refused
    assert GRADER.validate_expect({"json_schema": SCHEMA}) == []
    out = grade(SCHEMA, ORDER.model_dump_json())
    assert out.passed, out.violations
    fenced = f"Here is the order:\n```json\n{ORDER.model_dump_json(indent=2)}\n```"
    assert grade(SCHEMA, fenced).passed


def test_pydantic_schema_violations_name_the_path_and_what_failed() -> None:
    bad = json.loads(ORDER.model_dump_json())
    bad["id"] = "not-a-uuid"
    bad["created"] = "2026-13-03T10:00:00Z"
    bad["kind"] = "toy"
    bad["items"][0] = {"sku": "abc", "qty": 7, "price": 19.995}
    bad["pair"] = ["a", 1, 2]
    bad["tags"] = ["x", "x"]
    bad["extra"] = {"k": "one"}
    bad["parent"]["status"] = "lost"
    got = reasons(grade(SCHEMA, bad))
    assert got == {
        "$.id": 'is not a valid uuid: "not-a-uuid"',
        "$.created": 'is not a valid date-time: "2026-13-03T10:00:00Z"',
        "$.kind": 'must be one of ["book", "gift"], got "toy"',
        "$.items[0].sku": 'does not match pattern /^[A-Z]{3}-\\d+$/: "abc"',
        "$.items[0].qty": "must be a multiple of 5, got 7",
        "$.items[0].price": "must be a multiple of 0.01, got 19.995",
        "$.pair": "must have at most 2 items, got 3",
        "$.pair[0]": 'expected integer, got string "a"',
        "$.pair[1]": "expected string, got integer 1",
        "$.tags": "items must be unique (some items are equal)",
        "$.extra.k": 'expected integer, got string "one"',
        "$.parent": got["$.parent"],
    }
    assert got["$.parent"].startswith(
        "matches none of the 2 anyOf alternatives (#0: "
        '$.parent.status: must be one of ["open", "closed"]'
    )


# --------------------------------------------------------------------------- keywords


@pytest.mark.parametrize(
    ("schema", "value", "ok"),
    [
        ({"prefixItems": [{"type": "integer"}, {"type": "string"}]}, [1, "a"], True),
        ({"prefixItems": [{"type": "integer"}, {"type": "string"}]}, [1, "a", None], True),
        ({"prefixItems": [{"type": "integer"}], "items": False}, [1, 2], False),
        ({"prefixItems": [{"type": "integer"}, {"type": "string"}]}, ["a", 1], False),
        ({"uniqueItems": True}, [1, 2, 3], True),
        ({"uniqueItems": True}, [1, True], True),  # JSON: true is not 1
        ({"uniqueItems": True}, [1, 1.0], False),  # ... but 1.0 is
        ({"uniqueItems": True}, [{"a": [1]}, {"a": [1]}], False),
        ({"multipleOf": 5}, 10, True),
        ({"multipleOf": 5}, 7, False),
        ({"multipleOf": 0.01}, 19.99, True),  # the library alone says no (float division)
        ({"multipleOf": 0.01}, 0.3, True),
        ({"multipleOf": 0.01}, 0.305, False),
        ({"multipleOf": 0.5}, 1e308, True),
        ({"multipleOf": 2}, 4.0, True),
        ({"multipleOf": 2}, 1e999, False),  # reads as inf
        (
            {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"type": "string"}}},
            "x",
            True,
        ),
        (
            {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"type": "string"}}},
            1,
            False,
        ),
        ({"$defs": {"s": {"$anchor": "str", "type": "string"}}, "$ref": "#str"}, 1, False),
        (
            {
                "$id": "https://example.com/root",
                "$defs": {"s": {"type": "string"}},
                "$ref": "https://example.com/root#/$defs/s",
            },
            "x",
            True,
        ),
        ({"if": {"type": "integer"}, "then": {"minimum": 0}}, -1, False),
        ({"not": {"type": "null"}}, None, False),
        ({"dependentRequired": {"a": ["b"]}}, {"a": 1}, False),
        (
            {"patternProperties": {"^n_": {"type": "integer"}}, "additionalProperties": False},
            {"n_a": 1},
            True,
        ),
        (
            {"patternProperties": {"^n_": {"type": "integer"}}, "additionalProperties": False},
            {"n_a": 1, "b": 2},
            False,
        ),
        (
            {"unevaluatedProperties": False, "allOf": [{"properties": {"a": {}}}]},
            {"a": 1, "b": 2},
            False,
        ),
        ({"type": "object", "discriminator": {"propertyName": "kind"}}, {}, True),  # vendor key
        ({"example": 1, "nullable": True, "x-order": 2}, 1, True),  # OpenAPI's words
        ({"contains": {"type": "string"}, "minContains": 2}, ["a", 1], False),
        ({"$comment": "c", "$id": "urn:x", "readOnly": True, "deprecated": True}, 1, True),
    ],
)
def test_draft_2020_12_keywords(schema: Any, value: Any, ok: bool) -> None:
    assert check_schema(schema) == []
    errors = validate_json(value, schema)
    assert (not errors) is ok, errors


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date-time", "2026-12-03T10:00:00.5+01:00", "2026-12-03T10:00:00"),  # RFC 3339: a zone
        ("date-time", "2026-12-03t10:00:00z", "2026-12-03T25:00:00Z"),
        ("date", "2026-02-28", "2026-02-30"),
        ("email", "a.b@example.com", "a.b example.com"),
        ("ipv4", "127.0.0.1", "127.0.0.256"),
        ("ipv6", "::1", "1::2::3"),
        ("uuid", "12345678-1234-5678-1234-567812345678", "12345678123456781234567812345678"),
        ("regex", "^a+$", "(unclosed"),
    ],
)
def test_checked_formats(fmt: str, good: str, bad: str) -> None:
    assert fmt in CHECKED_FORMATS
    assert validate_json(good, {"format": fmt}) == []
    expected = [("$", f"is not a valid {fmt}: {json.dumps(bad)}")]
    assert validate_json(bad, {"format": fmt}) == expected
    assert validate_json(5, {"format": fmt}) == []  # formats apply to strings only


def test_other_formats_are_annotations_so_verdicts_do_not_depend_on_installed_packages() -> None:
    assert set(CHECKED_FORMATS) == {"date", "date-time", "email", "ipv4", "ipv6", "regex", "uuid"}
    for fmt in ("uri", "hostname", "iri", "json-pointer", "time", "duration", "made-up"):
        assert validate_json("not really", {"format": fmt}) == []


def test_messages_are_one_bounded_line() -> None:
    long_key = "k" * 1000
    schema = {
        "type": "object",
        "properties": {long_key: {"const": "x" * 5000}},
        "additionalProperties": {"enum": ["y" * 5000, "z"]},
    }
    value = {long_key: "line1\nline2" * 1000, "other\nkey": "a\nb" * 2000}
    errors = validate_json(value, schema)
    assert len(errors) == 2
    for path, message in errors:
        line = f"{path}: {message}"
        assert "\n" not in line
        assert len(line) <= MESSAGE_LIMIT
    out = grade(
        {"anyOf": [{"type": "string", "minLength": 10**6}, {"type": "integer"}]},
        json.dumps("x" * 100_000),
    )
    assert len(out.violations[0].reason) <= MESSAGE_LIMIT


def test_user_patterns_stay_under_the_time_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(budget.ENV_GRADER_TIMEOUT, "0.3")
    evil = r"(a|aa)+$"
    for schema in (
        {"patternProperties": {evil: {}}},
        {"patternProperties": {evil: {}}, "additionalProperties": False},
    ):
        assert check_schema(schema) == []
        with pytest.raises(budget.GraderTimeout), budget.budget(GRADER.name):
            grade(schema, {"a" * 64 + "!": 1})


@pytest.mark.parametrize(
    "schema",
    [
        {"unevaluatedProperties": False, "patternProperties": {r"^(a|aa)+$": {}}},
        {"unevaluatedProperties": False, "allOf": [{"patternProperties": {r"^(a|aa)+$": {}}}]},
        {
            "$defs": {"p": {"patternProperties": {r"^(a|aa)+$": {}}}},
            "$ref": "#/$defs/p",
            "unevaluatedProperties": False,
        },
    ],
)
def test_unevaluated_properties_match_patterns_under_the_budget(
    monkeypatch: pytest.MonkeyPatch, schema: Any
) -> None:
    """The library matched the keys ``patternProperties`` covered with ``re.search`` itself:
    ``unevaluatedProperties`` listed first ran the pattern unbudgeted (40 ``a`` and ``!``:
    about 20 s over a 2 s budget, 48 ``a``: more than ten minutes, past SIGTERM)."""
    import time

    monkeypatch.setenv(budget.ENV_GRADER_TIMEOUT, "0.3")
    assert check_schema(schema) == []
    started = time.monotonic()
    with pytest.raises(budget.GraderTimeout), budget.budget(GRADER.name):
        grade(schema, {"a" * 40 + "!": 1})
    assert time.monotonic() - started < 5
    # the walk still finds what each form evaluated
    assert validate_json({"aa": 1}, schema) == []
    assert validate_json({"b": 1}, schema) != []


def test_a_schema_whose_work_multiplies_stays_under_the_time_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two anyOf branches at every level of a 30-deep answer: 4x per level (depth 18 took
    75 s, the whole run hung). The validation stops at the grader's budget, as patterns do."""
    import time

    monkeypatch.setenv(budget.ENV_GRADER_TIMEOUT, "0.3")
    branch = {"type": "array", "items": {"$ref": "#/$defs/n"}}
    schema = {"$defs": {"n": {"anyOf": [branch, branch]}}, "$ref": "#/$defs/n"}
    assert check_schema(schema) == []
    started = time.monotonic()
    with pytest.raises(budget.GraderTimeout, match="JSON schema"), budget.budget(GRADER.name):
        grade(schema, "[" * 30 + "1" + "]" * 30)
    assert time.monotonic() - started < 5


def test_unique_items_is_linear_and_compares_as_json_schema_does() -> None:
    """The library compared every pair of objects (8,000 of them, a 100 KB answer: 65 s)."""
    import time

    started = time.monotonic()
    assert grade({"uniqueItems": True}, [{"a": i} for i in range(20_000)]).passed
    assert time.monotonic() - started < 5
    assert not grade({"uniqueItems": True}, [1, 1.0]).passed  # equal numbers
    assert grade({"uniqueItems": True}, [True, 1]).passed  # a boolean is no number
    assert not grade({"uniqueItems": True}, [{"a": 1, "b": [2]}, {"b": [2.0], "a": 1}]).passed
    assert grade({"uniqueItems": False}, [1, 1]).passed
    out = grade({"uniqueItems": True}, [{"x": 1}, {"x": 1}])
    assert reasons(out) == {"$": "items must be unique (some items are equal)"}


def test_deep_data_and_recursive_schemas_never_crash() -> None:
    schema = {
        "$defs": {"n": {"type": "object", "properties": {"c": {"$ref": "#/$defs/n"}}}},
        "$ref": "#/$defs/n",
    }
    deep = '{"c": ' * 900 + '{"c": 1}' + "}" * 900
    out = grade(schema, deep)
    assert not out.passed
    assert out.violations[0].category in ("SCHEMA", "FORMAT")


# --------------------------------------------------------------------------- bad schemas


HITS: list[str] = []


class _Recorder(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        HITS.append(self.path)
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def schema_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_remote_references_are_refused_never_fetched(schema_server: str) -> None:
    HITS.clear()
    schema = {"type": "object", "properties": {"a": {"$ref": f"{schema_server}/s.json"}}}
    (problem,) = check_schema(schema)
    assert problem.startswith(f"#/properties/a/$ref: cannot resolve '{schema_server}/s.json'")
    out = grade(schema, {"a": 1})
    assert out.violations[0].category == "GRADER_CONFIG"
    assert HITS == []


def test_a_bad_schema_in_a_row_is_a_collection_error_naming_file_line_and_field(
    tmp_path: Path,
) -> None:
    graders = [ContractGrader(), *builtin_graders()]
    keys = {k.name: k for g in graders for k in g.expect_keys}
    rows = [
        {"id": "ok", "prompt": "p", "expect": {"json_schema": SCHEMA}},
        {
            "id": "typo",
            "prompt": "p",
            "expect": {"json_schema": {"type": "object", "requried": ["a"]}},
        },
        {"id": "bad-ref", "prompt": "p", "expect": {"json_schema": {"$ref": "#/$defs/nope"}}},
        {
            "id": "bad-type",
            "prompt": "p",
            "expect": {"json_schema": {"properties": {"n": {"type": "float"}}}},
        },
        {"id": "bad-regex", "prompt": "p", "expect": {"json_schema": {"pattern": "(a"}}},
        {
            "id": "typo-deep",
            "prompt": "p",
            "expect": {
                "json_schema": {
                    "$defs": {"i": {"type": "object", "properties": {"n": {"minLenght": 2}}}}
                }
            },
        },
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        parse_rows(path, keys, graders)
    text = str(info.value)
    assert ":1:" not in text
    assert (
        f"{path}:2: expect.json_schema: #: unknown keyword 'requried', did you mean 'required'?"
    ) in text
    assert f"{path}:3: expect.json_schema: #/$ref: cannot resolve '#/$defs/nope'" in text
    assert f"{path}:4: expect.json_schema: #/properties/n/type: 'float' is not one of" in text
    assert f"{path}:5: expect.json_schema: #/pattern: invalid regular expression '(a'" in text
    assert (
        f"{path}:6: expect.json_schema: #/$defs/i/properties/n: unknown keyword "
        "'minLenght', did you mean 'minLength'?"
    ) in text
    assert "Traceback" not in text


# --------------------------------------------------------------------------- versioning


def test_only_json_schema_changed_version() -> None:
    names = {g.name: g.config_name for g in [ContractGrader(), *builtin_graders()]}
    assert names.pop("json_schema") == "json_schema@v2"
    assert all(name == config for name, config in names.items())  # their baselines still match


def test_baselines_graded_by_version_1_are_incomparable() -> None:
    """The quickstart's committed baselines were re-captured with version 2; the hash the
    version-1 grader gave the same dataset is another one, so comparing is refused (exit 65)."""
    folder = ROOT / "examples" / "quickstart"
    graders = [ContractGrader(), *builtin_graders()]
    ds = load_dataset(
        folder / "golden" / "faq", project_root=folder, graders=graders, require_fixtures=False
    )
    used = [g for g in graders if any(g.applies(c) for c in ds.cases)]
    assert "json_schema" in [g.name for g in used]
    now = config_fingerprint(ds.grader_config(sorted(g.config_name for g in used)))
    # The version-1 era had no profiles: its configuration named none.
    old_config = ds.grader_config(sorted(g.name for g in used))
    assert old_config.pop("profile") == "generic"
    before = config_fingerprint(old_config)
    assert before == "1b5280f7be56b55685e0f096ec2ea63c21a7e72422b7d29fafc18eaddd60b11e"
    for name in ("faq-v1.json", "live-faq-v1.json"):
        baseline = json.loads((folder / "baselines" / name).read_text("utf-8"))
        assert baseline["protocol"]["graderConfigHash"] == now != before
