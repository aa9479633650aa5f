"""``unevaluatedProperties`` for the ``json_schema`` grader, with its patterns under the grader's
time budget.

The jsonschema library finds the keys a schema evaluated by matching ``patternProperties``
with :func:`re.search` itself: a pattern that backtracks catastrophically on an answer's key
(``^(a|aa)+$`` on 48 ``a`` and ``!``) then ran for more than ten minutes holding the GIL, past
the grader's budget and past SIGTERM. This is the library's walk (jsonschema 4.26,
``_utils.find_evaluated_property_keys_by_schema``, MIT licence) with that one match done by
the budgeted engine (:mod:`goldeval.graders.budget`), so the pattern ends in GRADER_TIMEOUT.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jsonschema.exceptions import ValidationError

from goldeval.graders.budget import search as budget_search
from goldeval.graders.common import REGEX_SCAN_LIMIT

__all__ = ["unevaluated_properties"]

_GRADER = "json_schema"


def _matches(pattern: str, key: str) -> bool:
    return budget_search(pattern, key[:REGEX_SCAN_LIMIT], grader=_GRADER) is not None


def _valid(errors: Iterator[Any]) -> bool:
    return next(errors, None) is None


def _resolved_keys(validator: Any, instance: Any, reference: str) -> list[str]:
    resolved = validator._resolver.lookup(reference)
    inner = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
    return evaluated_keys(inner, instance, resolved.contents)


def evaluated_keys(validator: Any, instance: Any, schema: Any) -> list[str]:
    """The keys of ``instance`` that ``schema`` evaluates (properties, additional and
    unevaluated properties, pattern properties, dependent schemas, the valid branches of
    allOf/oneOf/anyOf, if/then/else, through $ref and $dynamicRef)."""
    if validator.is_type(schema, "boolean"):
        return []
    keys: list[str] = []
    for keyword in ("$ref", "$dynamicRef"):
        if (reference := schema.get(keyword)) is not None:
            keys += _resolved_keys(validator, instance, reference)
    properties = schema.get("properties")
    if validator.is_type(properties, "object"):
        keys += properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if (subschema := schema.get(keyword)) is not None:
            keys += (k for k, v in instance.items() if _valid(validator.descend(v, subschema)))
    for key in instance:
        if any(_matches(pattern, key) for pattern in schema.get("patternProperties", ())):
            keys.append(key)
    for key, subschema in schema.get("dependentSchemas", {}).items():
        if key in instance:
            keys += evaluated_keys(validator, instance, subschema)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if _valid(validator.descend(instance, subschema)):
                keys += evaluated_keys(validator, instance, subschema)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys += evaluated_keys(validator, instance, schema["if"])
            if "then" in schema:
                keys += evaluated_keys(validator, instance, schema["then"])
        elif "else" in schema:
            keys += evaluated_keys(validator, instance, schema["else"])
    return keys


def unevaluated_properties(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    """The library's ``unevaluatedProperties`` check over :func:`evaluated_keys`."""
    if not validator.is_type(instance, "object"):
        return
    evaluated = set(evaluated_keys(validator, instance, schema))
    invalid = [
        key
        for key in instance
        if key not in evaluated
        and not _valid(validator.descend(instance[key], unevaluated, path=key, schema_path=key))
    ]
    if not invalid:
        return
    shown = ", ".join(repr(k) for k in sorted(invalid, key=str))
    verb = "was" if len(invalid) == 1 else "were"
    if unevaluated is False:
        yield ValidationError(f"Unevaluated properties are not allowed ({shown} {verb} unexpected)")
    else:
        yield ValidationError(
            "Unevaluated properties are not valid under the given schema "
            f"({shown} {verb} unevaluated and invalid)"
        )
