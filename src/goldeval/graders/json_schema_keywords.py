"""The keywords the ``json_schema`` grader checks its own way (:mod:`goldeval.graders.
json_schema_check` validates with them): patterns under the grader's time budget (the library
calls ``re.search``), one error per missing or additional property with the property's own
path (the library reports them all at the object), ``multipleOf`` in decimal arithmetic,
``uniqueItems`` in linear time, and the keywords where a validation's work can multiply
checked against the grader's budget as they start."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal, localcontext
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend

from goldeval.graders.budget import check_time
from goldeval.graders.budget import search as budget_search
from goldeval.graders.common import REGEX_SCAN_LIMIT, is_number, show
from goldeval.graders.json_schema_unevaluated import unevaluated_properties

__all__ = ["SchemaValidator"]

_GRADER = "json_schema"


def _search(pattern: str, text: str) -> bool:
    return budget_search(pattern, text[:REGEX_SCAN_LIMIT], grader=_GRADER) is not None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if isinstance(instance, str) and not _search(pattern, instance):
        yield ValidationError(f"does not match pattern /{pattern}/: {show(instance, 40)}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not isinstance(instance, dict):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not isinstance(instance, dict):
        return
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = [
        key
        for key in instance
        if key not in properties and not any(_search(p, key) for p in patterns)
    ]
    if isinstance(additional, dict):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif additional is False:
        for key in extras:
            yield ValidationError("additional property is not allowed", path=[key])


def _required(
    validator: Any, required: Sequence[Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not isinstance(instance, dict):
        return
    for name in required:
        if name not in instance:
            yield ValidationError("required property is missing", path=[name])


def _multiple_of(
    validator: Any, divisor: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    """Decimal arithmetic on the numbers as written: the library divides floats, so 19.99 is
    not a multiple of 0.01 there (19.99 / 0.01 == 1998.9999999999998)."""
    if not is_number(instance) or not is_number(divisor) or divisor <= 0:
        return
    if isinstance(instance, int) and isinstance(divisor, int):
        ok = instance % divisor == 0
    elif isinstance(instance, float) and not math.isfinite(instance):
        ok = False  # 1e999 reads as inf
    else:
        # repr: the shortest text that reads back as this float ("19.99", not its binary value)
        value, step = Decimal(repr(instance)), Decimal(repr(divisor))
        with localcontext() as context:
            context.prec = len(str(abs(int(instance)))) + 800  # exact for every float quotient
            ok = value % step == 0
    if not ok:
        yield ValidationError(f"must be a multiple of {show(divisor)}, got {show(instance, 40)}")


def _one_of(
    validator: Any, branches: Sequence[Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    errors: list[ValidationError] = []
    valid: list[int] = []
    for index, branch in enumerate(branches):
        found = list(validator.descend(instance, branch, schema_path=index))
        errors.extend(found)
        if not found:
            valid.append(index)
    if not valid:
        yield ValidationError("matches no oneOf alternative", context=errors)
    elif len(valid) > 1:
        yield ValidationError(
            f"matches {len(valid)} oneOf alternatives ({', '.join(map(str, valid))}); "
            "exactly one must match"
        )


def _canonical(value: Any) -> str:
    """One text per JSON value as JSON Schema compares them: ``1`` and ``1.0`` equal, ``true``
    and ``1`` not, object keys unordered."""

    def normal(v: Any) -> Any:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, list):
            return [normal(x) for x in v]
        if isinstance(v, dict):
            return {k: normal(x) for k, x in v.items()}
        return v

    return json.dumps(normal(value), sort_keys=True, separators=(",", ":"))


def _unique_items(
    validator: Any, unique: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    """Linear, by each item's canonical text: the library compares every pair of unsortable
    items (8,000 objects, a 100 KB answer: 65 s)."""
    if unique is not True or not isinstance(instance, list):
        return
    seen: set[str] = set()
    for item in instance:
        key = _canonical(item)
        if key in seen:
            yield ValidationError(f"{show(instance, 40)} has non-unique elements")
            return
        seen.add(key)


_DOING = "validating the answer against its JSON schema (branches that multiply at every level?)"


def _budgeted(keyword: Any) -> Any:
    """``keyword``'s check, started only while the grader's time budget lasts: a schema whose
    ``anyOf`` branches at every level of a nested answer costs 4x per level (depth 18: 75 s),
    and no single pattern's timeout can stop that."""

    def check(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        check_time(_GRADER, _DOING)
        return keyword(validator, value, instance, schema)

    return check


_OWN_KEYWORDS = {
    "additionalProperties": _additional_properties,
    "multipleOf": _multiple_of,
    "oneOf": _one_of,
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "required": _required,
    "uniqueItems": _unique_items,
    "unevaluatedProperties": unevaluated_properties,
}
#: Where the work of a validation can multiply: the keywords that apply a subschema again to
#: the same value (each branch, each reference). Checking the clock at each of them bounds
#: the whole; leaf keywords (type, minLength) are constant work and stay unwrapped (wrapping
#: every keyword made a plain validation 1.8x slower).
_BRANCHING = frozenset(
    {
        "$ref",
        "$dynamicRef",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "if",
        "contains",
        "dependentSchemas",
        "unevaluatedItems",
        "unevaluatedProperties",
        # leaf keywords whose own work is the schema's list: a 5,000-value enum under
        # `items` of a 10,000-item answer ran 38 s over a 1 s budget (a re-probe)
        "enum",
        "const",
    }
)
_CHECKS = {**Draft202012Validator.VALIDATORS, **_OWN_KEYWORDS}
SchemaValidator: type[Validator] = extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    validators={
        name: _budgeted(keyword) if name in _BRANCHING else keyword
        for name, keyword in _CHECKS.items()
    },
)
