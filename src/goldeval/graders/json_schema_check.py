"""The engine of the ``json_schema`` grader (:mod:`goldeval.graders.json_schema`): checking a
schema at collection and validating the answer's JSON against it.

Kept apart from the grader so that the jsonschema library loads only when a row uses
``json_schema`` (importing it costs every collection, see docs/performance.md).

The JSON value is found by :mod:`goldeval.graders.json_extract` and validated by the
`jsonschema <https://python-jsonschema.readthedocs.io/>`_ library as **JSON Schema Draft
2020-12** (``$schema`` is not consulted), so a plain pydantic ``Model.model_json_schema()``
(``$defs``/``$ref``, ``anyOf`` with ``null``, ``prefixItems``, ``uniqueItems``, ``multipleOf``,
``const``, ...) works as written. Rules worth knowing:

* **References** resolve inside the schema only (``#``, ``#/$defs/<name>``,
  ``#/definitions/<name>``, ``$id``/``$anchor`` of the schema); nothing is fetched over the
  network. An unresolvable ``$ref`` or a ``$ref`` cycle that consumes no data is a collection
  error.
* **Numbers**: ``integer`` accepts ``1.0``; booleans are not numbers (as the specification
  says).
* **format** is asserted for a fixed set that needs no optional package, so a verdict does not
  depend on what else is installed: ``date-time`` (RFC 3339, with a time zone), ``date``,
  ``email`` (something@something), ``ipv4``, ``ipv6``, ``uuid`` (hyphenated) and ``regex``.
  Other formats (``uri``, ``hostname``, ...) are annotations, as in the specification's
  default.
* **Patterns** (``pattern``, ``patternProperties``) are evaluated under the grader time budget
  (:mod:`goldeval.graders.budget`) on at most the first 1 MB of a string, also when
  ``unevaluatedProperties`` asks which keys ``patternProperties`` covered (the library matched
  them with :mod:`re` itself: :mod:`goldeval.graders.json_schema_unevaluated`).
* **Unknown keywords** are ignored (vendor extensions such as pydantic's ``discriminator`` are
  fine), except one that looks like a misspelt keyword (``requried``, ``minLenght``): that is
  a collection error, as a silently disabled check would be.
* **Messages**: one violation per failure, ``<JSON path>: <what failed>`` on one line of at
  most :data:`MESSAGE_LIMIT` characters; at most
  :data:`~goldeval.graders.common.MAX_REPORTED` per answer.

Version 2 of this grader (the library) replaced version 1 (a hand-written subset): the
protocol's ``graderConfigHash`` names the version, so a baseline graded by version 1 is
incomparable, not silently compared.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, UnknownType, ValidationError, best_match
from jsonschema.protocols import Validator
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from goldeval.graders.budget import pattern_error
from goldeval.graders.common import (
    MAX_REPORTED,
    json_type,
    show,
)
from goldeval.graders.json_paths import format_path
from goldeval.graders.json_schema_formats import CHECKED_FORMATS, FORMATS
from goldeval.graders.json_schema_keywords import SchemaValidator

__all__ = [
    "CHECKED_FORMATS",
    "MESSAGE_LIMIT",
    "check_schema",
    "validate_json",
]

#: Longest violation message (path included).
MESSAGE_LIMIT = 300
#: Most problems reported for one schema at collection.
MAX_SCHEMA_PROBLEMS = 20

#: Keywords whose errors carry their final message (built above).
_OWN_MESSAGES = frozenset({"additionalProperties", "multipleOf", "pattern", "required"})
#: No retrieval: a reference outside the schema is unresolvable, never fetched.
_REGISTRY: Registry[Any] = Registry()


def _validator(schema: Any) -> Validator:
    validator: Validator = SchemaValidator(schema, registry=_REGISTRY, format_checker=FORMATS)
    return validator


# --------------------------------------------------------------------------- messages


def _one_line(text: str, limit: int = MESSAGE_LIMIT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _none_matched(error: ValidationError, keyword: str, count: int) -> str:
    first: dict[int, ValidationError] = {}
    for sub in error.context or []:
        index = sub.relative_schema_path[0] if sub.relative_schema_path else None
        if isinstance(index, int) and index not in first:
            first[index] = sub
    parts = [
        f"#{i}: {format_path(first[i].absolute_path)}: {_one_line(_describe(first[i]), 80)}"
        for i in sorted(first)[:4]
    ]
    more = "; …" if count > 4 else ""
    return f"matches none of the {count} {keyword} alternatives ({'; '.join(parts)}{more})"


def _describe(error: ValidationError) -> str:
    """What failed, in the project's words (the library's message only as a fallback)."""
    keyword, value, instance = error.validator, error.validator_value, error.instance
    if keyword in _OWN_MESSAGES or (keyword == "oneOf" and not error.context):
        return error.message
    if keyword is None:
        return "no value is allowed here (schema false)"
    if keyword == "type":
        names = value if isinstance(value, list) else [value]
        want = " or ".join(str(n) for n in names)
        return f"expected {want}, got {json_type(instance)} {show(instance, 40)}"
    if keyword in ("anyOf", "oneOf") and isinstance(value, list):
        return _none_matched(error, keyword, len(value))
    bounds = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
    if keyword in bounds:
        return f"must be {bounds[keyword]} {show(value)}, got {show(instance, 40)}"
    if keyword == "const":
        return f"must be {show(value)}, got {show(instance)}"
    if keyword == "enum":
        return f"must be one of {show(value)}, got {show(instance)}"
    sizes = {
        "minLength": ("at least", "characters"),
        "maxLength": ("at most", "characters"),
        "minItems": ("at least", "items"),
        "maxItems": ("at most", "items"),
        "minProperties": ("at least", "properties"),
        "maxProperties": ("at most", "properties"),
    }
    if keyword in sizes and isinstance(instance, (str, list, dict)):
        how, what = sizes[keyword]
        return f"must have {how} {value} {what}, got {len(instance)}"
    if keyword == "uniqueItems":
        return "items must be unique (some items are equal)"
    if keyword == "format":
        return f"is not a valid {value}: {show(instance, 60)}"
    if keyword == "not":
        return f"must not match the schema {show(value, 60)}"
    return _one_line(error.message)


def validate_json(instance: Any, schema: Any) -> list[tuple[str, str]]:
    """Validate a JSON value against a (checked) schema: a list of (path, message), at most
    ``MAX_REPORTED + 1`` of them."""
    errors: list[tuple[str, str]] = []
    try:
        for error in _validator(schema).iter_errors(instance):
            errors.append((format_path(error.absolute_path), _describe(error)))
            if len(errors) > MAX_REPORTED:
                break
    except RecursionError:
        errors.append(("$", "JSON nested too deeply to validate"))
    except (Unresolvable, UnknownType, SchemaError) as exc:  # an unchecked schema
        errors.append(("$", _one_line(f"unusable schema: {exc}")))
    return [(_short_path(path), _one_line(message, _room(path))) for path, message in errors]


def _short_path(path: str) -> str:
    return path if len(path) <= MESSAGE_LIMIT // 2 else path[: MESSAGE_LIMIT // 2 - 1] + "…"


def _room(path: str) -> int:
    """Characters left for the message after ``<path>: ``."""
    return MESSAGE_LIMIT - len(_short_path(path)) - 2


# --------------------------------------------------------------------------- schema checks

_META = Draft202012Validator(Draft202012Validator.META_SCHEMA, format_checker=FORMATS)
#: Keywords that assert something: a near miss of one is reported as a likely typo.
_KEYWORDS = tuple(
    sorted(
        set(Draft202012Validator.VALIDATORS)
        | {"$defs", "definitions", "minContains", "maxContains"}
    )
)
#: Every Draft 2020-12 keyword: never reported (``example`` is close to ``examples``, but an
#: annotation typo disables no check, and OpenAPI writes ``example``).
_ALL_KEYWORDS = frozenset(_KEYWORDS) | {
    "$anchor",
    "$comment",
    "$dynamicAnchor",
    "$id",
    "$schema",
    "$vocabulary",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "default",
    "deprecated",
    "description",
    "examples",
    "readOnly",
    "title",
    "writeOnly",
}
_ONE_SCHEMA = (
    "additionalProperties",
    "contains",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_MAPS = ("$defs", "definitions", "dependentSchemas", "patternProperties", "properties")


def _pointer(where: str, *parts: Any) -> str:
    escaped = [str(p).replace("~", "~0").replace("/", "~1") for p in parts]
    return "/".join([where, *escaped])


def _meta_problems(schema: Any, where: str) -> list[str]:
    """Problems the Draft 2020-12 meta-schema finds (patterns checked by both engines)."""
    problems: list[str] = []
    for error in _META.iter_errors(schema):
        at = _pointer(where, *error.absolute_path)
        if error.validator == "format" and isinstance(error.instance, str):
            message = f"invalid regular expression {error.instance!r}: "
            message += pattern_error(error.instance) or "does not compile"
        else:
            best = best_match(error.context) if error.context else error
            message = best.message if best is not None else error.message
        problem = _one_line(f"{at}: {message}")
        if problem not in problems:
            problems.append(problem)
        if len(problems) >= MAX_SCHEMA_PROBLEMS:
            break
    return problems


def _children(node: Mapping[str, Any], where: str) -> Iterator[tuple[Any, str]]:
    for key in _ONE_SCHEMA:
        if key in node:
            yield node[key], _pointer(where, key)
    for key in _SCHEMA_LISTS:
        if isinstance(node.get(key), list):
            for i, child in enumerate(node[key]):
                yield child, _pointer(where, key, i)
    for key in _SCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            for name, child in node[key].items():
                yield child, _pointer(where, key, name)


def _walk_problems(node: Any, where: str, resolver: Any, problems: list[str]) -> None:
    """References that do not resolve or loop, likely typos, and ``definitions`` (not a
    2020-12 keyword, so the meta-schema does not look inside)."""
    if not isinstance(node, dict) or len(problems) >= MAX_SCHEMA_PROBLEMS:
        return
    if "$id" in node and where != "#":
        resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
    for key in node:
        if key in _ALL_KEYWORDS or key.startswith("x-"):
            continue
        close = difflib.get_close_matches(key, _KEYWORDS, n=1, cutoff=0.85)
        if close:
            problems.append(
                f"{where}: unknown keyword {key!r}, did you mean {close[0]!r}? (JSON Schema "
                "ignores unknown keywords, so the check would silently not happen)"
            )
    ref = node.get("$ref")
    if isinstance(ref, str):
        problem = _ref_problem(ref, node, resolver)
        if problem:
            problems.append(f"{_pointer(where, '$ref')}: {problem}")
    if isinstance(node.get("definitions"), dict):
        for name, child in node["definitions"].items():
            problems.extend(_meta_problems(child, _pointer(where, "definitions", name)))
    for child, at in _children(node, where):
        _walk_problems(child, at, resolver, problems)


def _ref_problem(ref: str, node: Mapping[str, Any], resolver: Any) -> str | None:
    """Why ``ref`` is unusable: it does not resolve, or a chain of plain references comes back
    to where it started (validation would recurse without consuming data)."""
    seen: set[int] = {id(node)}
    current: Any = ref
    while isinstance(current, str):
        try:
            resolved = resolver.lookup(current)
        except Unresolvable:
            return (
                f"cannot resolve {current!r} (only references inside the schema: '#', "
                "'#/$defs/<name>', '#/definitions/<name>', or an $id/$anchor it declares)"
            )
        target = resolved.contents
        if id(target) in seen:
            return f"{ref!r} refers back to itself (a $ref cycle)"
        seen.add(id(target))
        resolver = resolved.resolver
        current = target.get("$ref") if isinstance(target, dict) else None
    return None


def _root_resolver(schema: Any) -> Any:
    resource: Resource[Any] = DRAFT202012.create_resource(schema)
    uri = resource.id() or ""
    return _REGISTRY.with_resource(uri, resource).crawl().resolver(base_uri=uri)


def check_schema(schema: Any) -> list[str]:
    """Problems that make a schema unusable, each ``<location>: <message>`` (empty: usable)."""
    try:
        key = json.dumps(schema, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return _check(schema)
    return list(_check_cached(key))


@functools.lru_cache(maxsize=256)
def _check_cached(key: str) -> tuple[str, ...]:
    return tuple(_check(json.loads(key)))


def _check(schema: Any) -> list[str]:
    if not isinstance(schema, (dict, bool)):
        return [f"#: a schema must be an object or a boolean, got {json_type(schema)}"]
    try:
        problems = _meta_problems(schema, "#")
        if problems:
            return problems
        _walk_problems(schema, "#", _root_resolver(schema), problems)
        if problems:
            return problems[:MAX_SCHEMA_PROBLEMS]
        # A cycle through applicators (allOf: [{$ref: "#"}]) shows when validating anything.
        validator = _validator(schema)
        probes: tuple[Any, ...] = (None, {}, [], "", 0)
        for probe in probes:
            for _error in validator.iter_errors(probe):
                pass
    except RecursionError:
        return ["#: the schema is nested too deeply or refers to itself without consuming data"]
    except (Unresolvable, UnknownType, SchemaError) as exc:
        return [_one_line(f"#: {exc}")]
    return []
