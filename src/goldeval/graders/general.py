"""General-purpose graders: deterministic checks (and one soft similarity score) for any dataset.

==============  ========================================  ======  ==================================
grader          expect keys                               mode    passes when
==============  ========================================  ======  ==================================
exact           equals, normalize                         hard    the answer equals ``equals`` after
                                                                  the ``normalize`` steps
regex           regex, not_regex                          hard    every ``regex`` pattern matches
                                                                  and no ``not_regex`` pattern does
contains_any    contains_any                              hard    at least one listed string occurs
json_schema     json_schema                               hard    the extracted JSON validates
                                                                  against the schema (subset below)
json_equals     json_equals, json_ignore                  hard    the extracted JSON equals
                                                                  ``json_equals`` outside ignored
                                                                  paths
tool_calls      tool_calls, tool_calls_order              hard    the expected calls were made:
                                                                  names, argument subsets, order
number          number                                    hard    the extracted number is within
                                                                  tolerance of ``number.value``
cites           cites, cites_only                         hard    every id in ``cites`` is cited
                                                                  (with ``cites_only``: no others)
must_not        (top-level ``must_not``)                  hard    no banned string occurs (rows
                                                                  without contract keys only)
similarity      similar_to, similarity_threshold          SOFT    cosine(embedding(answer),
                                                                  embedding(similar_to)) >=
                                                                  threshold (default 0.8)
==============  ========================================  ======  ==================================

A manifest may switch any of them with ``graders: {name: hard|soft|off}``; ``similarity`` is
hard only when the manifest says so. Every grader reports violations naming itself and never
raises on a malformed answer (``None``, empty, huge, binary garbage, invalid JSON): it returns a
failed :class:`GraderOutcome` instead.

Rules worth knowing
-------------------

* **Answer text.** ``None`` is graded as the empty string.
* **exact.** ``normalize`` is a list of steps (or one step name, or ``"all"``), applied to
  both sides in this order: ``nfc`` (Unicode NFC), ``case`` (``str.casefold``),
  ``punctuation`` (drop every Unicode punctuation character, category ``P*``),
  ``whitespace`` (collapse runs to one space, strip the ends). Without ``normalize`` the
  comparison is byte-exact, trailing newline included.
* **regex.** :func:`re.search` without flags (use inline flags such as ``(?i)``). Only the first
  :data:`REGEX_SCAN_LIMIT` characters (1 MB) of the answer are searched; the violation says so
  when the answer was longer. For ``not_regex`` a longer answer fails (the tail cannot be shown
  free of the pattern). Every user pattern (here, in ``json_schema`` ``pattern`` and in the
  ``cites`` option) is evaluated by the ``regex`` engine in its ``re``-compatible mode under a
  time budget (:mod:`goldeval.graders.budget`, ``GOLDEVAL_GRADER_TIMEOUT``, default 2 s per
  grader and attempt): a pattern that backtracks catastrophically (``(a|aa)+$``) makes the
  attempt ERROR with ``errorKind: GRADER_TIMEOUT`` instead of hanging the run.
* **JSON extraction** (``json_schema``, ``json_equals``): the first of (1) the whole answer,
  stripped; (2) the first ````` ```json ````` (or untagged ````` ``` `````) fenced block whose
  body parses; (3) the first ``{`` or ``[`` from which a complete JSON value decodes (at most
  :data:`JSON_CANDIDATES` start positions are tried). ``NaN``/``Infinity`` are not JSON. Note
  that (3) takes the *first* value, so ``see [1] ... {"a": 1}`` extracts ``[1]``: ask for a
  fenced block when the answer mixes prose and JSON.
* **JSON paths** are written ``$.items[2].price``; keys that are not identifiers are quoted:
  ``$["a b"]``. ``json_ignore`` entries are such paths, where ``[*]`` and ``.*`` match any index
  or key; an entry without a leading ``$`` is a literal top-level key. Ignoring a path ignores
  its whole subtree.
* **JSON schema subset** (no dependency): ``type`` (a name or a list; ``integer`` accepts
  ``1.0``; booleans are not numbers), ``properties``, ``required``, ``additionalProperties``
  (boolean or schema), ``items`` (one schema), ``enum``, ``const``, ``minimum``, ``maximum``,
  ``exclusiveMinimum``, ``exclusiveMaximum`` (numbers, draft-06+), ``minLength``,
  ``maxLength`` (code points), ``pattern`` (``re.search``), ``minItems``, ``maxItems``,
  ``anyOf``, ``oneOf``, ``allOf``, ``$ref`` to ``#``, ``#/definitions/...`` or
  ``#/$defs/...`` (sibling keywords of ``$ref`` apply too), boolean schemas. Annotations
  (``$schema``, ``$id``, ``$comment``, ``title``, ``description``, ``default``, ``examples``,
  ``format``, ``readOnly``, ``writeOnly``, ``deprecated``) are accepted and not asserted. Any
  other keyword is a collection error naming it. At most :data:`MAX_REPORTED` errors are
  reported per answer.
* **tool_calls.** Each expected call is ``{"name", "arguments"?}`` (or just the name as a
  string). ``arguments`` is a recursive subset: every expected key must be present with a
  matching value; extra keys are allowed; lists must have the same length and match item by
  item; scalars compare as JSON (``1 == 1.0``, ``true != 1``). ``tool_calls_order``:
  ``exact`` (exactly these calls, in this order, nothing else), ``subsequence`` (default: in
  this order, other calls may come between), ``any`` (each expected call matches a distinct
  actual call, any order, extras allowed). Arguments that arrive as a JSON string are parsed.
  ``tool_calls: []`` with ``exact`` asserts that no tool was called.
* **number.** When the whole answer is a JSON number, that number. Otherwise the LAST number in
  the text matching ``[-+]?(digits[.digits]|.digits)([eE][-+]?digits)?``, where a sign or number
  glued to a preceding letter, digit or ``.`` does not count (``x-5`` → 5, ``2024-01-05`` → 5,
  ``v1.2`` → nothing). Thousands separators are not supported: ``1,234`` reads as 234. Passes
  when ``|got - value| <= max(abs_tol, rel_tol * |value|)``; a bare number means
  ``abs_tol = 1e-9``, and so does an object without tolerances.
* **cites.** Citations are found with a pattern (default ``\\[([A-Za-z0-9_.:-]+)\\]``, i.e.
  ``[doc-id]``; the first capture group is the id, or the whole match without groups; a
  captured ``a, b`` counts as two ids) in the first 1 MB. Options come from ``ctx.options``
  (the manifest's ``grader_options: {cites: {pattern, header}}``); with ``header: "RAG:"`` a
  first answer line ``RAG: a, b`` (header matched case-insensitively) also cites ``a`` and ``b``.
* **similarity.** See :mod:`goldeval.providers.embeddings` for configuration. Without a
  configured provider the outcome has ``score=None`` and a violation, and (being soft) never
  fails the attempt. ``passed = score >= threshold``.

Options: a grader reads ``ctx.options[<grader name>]`` when that is a mapping, else
``ctx.options`` itself, so the pipeline may pass either one grader's options or the manifest's
whole ``grader_options``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import sys
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeGuard

from goldeval.core.errors import GoldevalError, ProviderError
from goldeval.core.models import GraderOutcome, Severity, Violation
from goldeval.graders.base import ExpectKey, GradeContext, Grader
from goldeval.graders.budget import compile_pattern, pattern_error
from goldeval.graders.budget import finditer as budget_finditer
from goldeval.graders.budget import search as budget_search

if TYPE_CHECKING:
    from goldeval.dataset.case import GoldenCase

__all__ = [
    "CONTRACT_KEYS",
    "JSON_CANDIDATES",
    "MAX_REPORTED",
    "REGEX_SCAN_LIMIT",
    "CitesGrader",
    "ContainsAnyGrader",
    "ExactGrader",
    "JsonEqualsGrader",
    "JsonSchemaGrader",
    "MustNotGrader",
    "NumberGrader",
    "RegexGrader",
    "SimilarityGrader",
    "ToolCallsGrader",
    "builtin_graders",
    "check_schema",
    "extract_json",
    "extract_number",
    "format_path",
    "json_diff",
    "normalize_text",
    "parse_path",
    "validate_json",
]

#: Characters of the answer searched by regex-based checks (regex, cites, schema ``pattern``).
REGEX_SCAN_LIMIT = 1_000_000
#: Start positions tried by the "first JSON value in the text" extraction rule.
JSON_CANDIDATES = 20
#: Most violations one grader reports for one answer (the rest are counted).
MAX_REPORTED = 50
#: Expect keys of the reference contract; ``must_not`` grades rows that use none of them.
CONTRACT_KEYS = ("layer", "class", "status", "rag", "refuse", "contains")
#: Order of the normalisation steps of the ``exact`` grader.
NORMALIZE_STEPS = ("nfc", "case", "punctuation", "whitespace")
DEFAULT_CITE_PATTERN = r"\[([A-Za-z0-9_.:-]+)\]"
DEFAULT_SIMILARITY_THRESHOLD = 0.8
TOOL_ORDERS = ("exact", "subsequence", "any")

HIGH = Severity.HIGH

# --------------------------------------------------------------------------- helpers


def _answer_text(ctx: GradeContext) -> str:
    text: Any = ctx.answer.text
    if text is None:
        return ""
    if isinstance(text, bytes):
        return text.decode("utf-8", "replace")
    return text if isinstance(text, str) else str(text)


def _excerpt(text: str, limit: int = 160) -> str:
    head = text[: limit * 4]
    flat = " ".join(head.split())
    if len(flat) > limit or len(head) < len(text):
        return flat[:limit] + "…"
    return flat


def _show(value: Any, limit: int = 80) -> str:
    """A short JSON rendering of a value for messages."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _options(ctx: GradeContext, name: str) -> Mapping[str, Any]:
    opts: Any = ctx.options or {}
    if not isinstance(opts, Mapping):
        return {}
    nested = opts.get(name)
    if isinstance(nested, Mapping):
        return nested
    return opts


def _present(expect: Mapping[str, Any], key: str) -> bool:
    return expect.get(key) is not None


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _json_eq(a: Any, b: Any) -> bool:
    """JSON equality: ``1 == 1.0``, but booleans never equal numbers; deep for containers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_eq(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_eq(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _key_path(path: str, key: str) -> str:
    if _IDENT.match(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def format_path(tokens: Sequence[str | int]) -> str:
    """``["items", 2, "price"]`` → ``$.items[2].price``."""
    path = "$"
    for token in tokens:
        path = f"{path}[{token}]" if isinstance(token, int) else _key_path(path, token)
    return path


class _Grader(Grader):
    """Shared plumbing: primary keys decide ``applies``; outcome and violation builders."""

    #: Keys whose presence makes the grader apply (secondary keys only modify them).
    primary: tuple[str, ...] = ()

    def applies(self, case: GoldenCase) -> bool:
        return any(case.expect.get(k) is not None for k in self.primary)

    def violation(
        self, ctx: GradeContext, category: str, reason: str, severity: Severity = HIGH
    ) -> Violation:
        return Violation(
            case_id=ctx.case.id,
            category=category,
            severity=severity,
            grader=self.name,
            reason=reason,
        )

    def outcome(
        self,
        violations: list[Violation],
        *,
        passed: bool | None = None,
        score: float | None = None,
        threshold: float | None = None,
    ) -> GraderOutcome:
        return GraderOutcome(
            grader=self.name,
            passed=not violations if passed is None else passed,
            hard=self.hard,
            score=score,
            threshold=threshold,
            violations=violations,
        )

    def capped(self, ctx: GradeContext, violations: list[Violation]) -> list[Violation]:
        if len(violations) <= MAX_REPORTED:
            return violations
        rest = len(violations) - MAX_REPORTED
        kept = violations[:MAX_REPORTED]
        kept.append(
            self.violation(ctx, kept[-1].category, f"... and {rest} more", kept[-1].severity)
        )
        return kept

    def config_error(self, ctx: GradeContext, reason: str) -> GraderOutcome:
        """The row's expect value is unusable (a row built without dataset validation)."""
        return self.outcome([self.violation(ctx, "GRADER_CONFIG", reason)])

    def requires(self, expect: Mapping[str, Any], key: str, needs: str) -> list[tuple[str, str]]:
        if _present(expect, key) and not _present(expect, needs):
            return [(f"expect.{key}", f"has no effect without expect.{needs}")]
        return []


# --------------------------------------------------------------------------- exact


@functools.lru_cache(maxsize=1)
def _punctuation_table() -> dict[int, None]:
    return {
        cp: None
        for cp in range(sys.maxunicode + 1)
        if unicodedata.category(chr(cp)).startswith("P")
    }


def _normalize_steps(value: Any) -> list[str] | str:
    """The normalisation steps of ``expect.normalize``, or an error message."""
    if value is None:
        return []
    if value == "all":
        return list(NORMALIZE_STEPS)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return f'must be "all" or a list of {", ".join(NORMALIZE_STEPS)}'
    unknown = [v for v in value if v not in NORMALIZE_STEPS]
    if unknown:
        return f"unknown step {unknown[0]!r} (known: all, {', '.join(NORMALIZE_STEPS)})"
    return [s for s in NORMALIZE_STEPS if s in value]


def normalize_text(text: str, steps: Sequence[str]) -> str:
    """Apply the ``exact`` grader's normalisation steps (see the module docstring)."""
    if "nfc" in steps:
        text = unicodedata.normalize("NFC", text)
    if "case" in steps:
        text = text.casefold()
    if "punctuation" in steps:
        text = text.translate(_punctuation_table())
    if "whitespace" in steps:
        text = " ".join(text.split())
    return text


def _diff_excerpt(expected: str, got: str, context: int = 30) -> str:
    limit = min(len(expected), len(got))
    i = 0
    while i < limit and expected[i] == got[i]:
        i += 1
    start = max(0, i - context)
    lead = "…" if start else ""

    def piece(text: str) -> str:
        end = i + context
        tail = "…" if end < len(text) else ""
        return lead + json.dumps(text[start:end], ensure_ascii=False)[1:-1] + tail

    return (
        f"first difference at character {i}: expected «{piece(expected)}», "
        f"got «{piece(got)}» (lengths {len(expected)} vs {len(got)})"
    )


class ExactGrader(_Grader):
    name = "exact"
    primary = ("equals",)
    expect_keys = (
        ExpectKey("equals", "str", "the answer must equal this text (after `normalize`)"),
        ExpectKey(
            "normalize",
            "any",
            'normalisation for `equals`: "all" or a list of case, whitespace, nfc, punctuation',
        ),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        errors = self.requires(expect, "normalize", "equals")
        steps = _normalize_steps(expect.get("normalize"))
        if isinstance(steps, str):
            errors.append(("expect.normalize", steps))
        return errors

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        expected = ctx.case.expect.get("equals")
        if not isinstance(expected, str):
            return self.config_error(ctx, "expect.equals must be a string")
        steps = _normalize_steps(ctx.case.expect.get("normalize"))
        if isinstance(steps, str):
            return self.config_error(ctx, f"expect.normalize {steps}")
        got = normalize_text(_answer_text(ctx), steps)
        want = normalize_text(expected, steps)
        if got == want:
            return self.outcome([])
        how = f" (normalized: {', '.join(steps)})" if steps else ""
        reason = f"answer differs from expect.equals{how}: {_diff_excerpt(want, got)}"
        return self.outcome([self.violation(ctx, "MISMATCH", reason)])


# --------------------------------------------------------------------------- regex


def _pattern_list(value: Any) -> list[str] | None:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _compile_errors(key: str, value: Any) -> list[tuple[str, str]]:
    if value is None:
        return []
    patterns = _pattern_list(value)
    if patterns is None:
        return [(f"expect.{key}", "must be a regular expression or a list of them")]
    if not patterns:
        return [(f"expect.{key}", "must not be an empty list")]
    errors: list[tuple[str, str]] = []
    for i, pattern in enumerate(patterns):
        fld = f"expect.{key}" if isinstance(value, str) else f"expect.{key}[{i}]"
        problem = pattern_error(pattern)
        if problem is not None:
            errors.append((fld, f"invalid regular expression {pattern!r}: {problem}"))
    return errors


def _scan(text: str) -> tuple[str, str]:
    """(searched text, note for messages): the first REGEX_SCAN_LIMIT characters."""
    if len(text) <= REGEX_SCAN_LIMIT:
        return text, ""
    return text[:REGEX_SCAN_LIMIT], (
        f" (answer truncated: only the first {REGEX_SCAN_LIMIT:,} of {len(text):,} characters "
        "were searched)"
    )


class RegexGrader(_Grader):
    name = "regex"
    primary = ("regex", "not_regex")
    expect_keys = (
        ExpectKey("regex", "any", "pattern (or list): each must match somewhere (re.search)"),
        ExpectKey("not_regex", "any", "pattern (or list): none may match"),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        return _compile_errors("regex", expect.get("regex")) + _compile_errors(
            "not_regex", expect.get("not_regex")
        )

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        text, note = _scan(_answer_text(ctx))
        violations: list[Violation] = []
        for key, must in (("regex", True), ("not_regex", False)):
            value = ctx.case.expect.get(key)
            if value is None:
                continue
            patterns = _pattern_list(value)
            if patterns is None or _compile_errors(key, value):
                violations.append(
                    self.violation(
                        ctx, "GRADER_CONFIG", f"expect.{key} is not a valid pattern list"
                    )
                )
                continue
            for pattern in patterns:
                # Within the grader's time budget: a pattern that backtracks catastrophically
                # ends as an ERROR attempt (GRADER_TIMEOUT), not as a hung run.
                match = budget_search(pattern, text, grader=self.name)
                if must and match is None:
                    violations.append(
                        self.violation(
                            ctx,
                            "PATTERN",
                            f"no match for /{pattern}/{note}; answer: «{_excerpt(text)}»",
                        )
                    )
                elif not must and match is not None:
                    violations.append(
                        self.violation(
                            ctx,
                            "PATTERN",
                            f"forbidden pattern /{pattern}/ matched "
                            f"«{_excerpt(match.group(0), 80)}» "
                            f"at character {match.start()}",
                        )
                    )
                elif not must and note:
                    violations.append(
                        self.violation(
                            ctx,
                            "PATTERN",
                            f"cannot show the answer free of /{pattern}/{note}",
                        )
                    )
        return self.outcome(violations)


# --------------------------------------------------------------------------- contains_any


class ContainsAnyGrader(_Grader):
    name = "contains_any"
    primary = ("contains_any",)
    expect_keys = (
        ExpectKey("contains_any", "list[str]", "at least one of these substrings must occur"),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        value = expect.get("contains_any")
        if not isinstance(value, list):
            return []
        if not value:
            return [("expect.contains_any", "must not be empty")]
        if any(isinstance(v, str) and not v for v in value):
            return [("expect.contains_any", "must not contain an empty string (it always matches)")]
        return []

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        options = ctx.case.expect.get("contains_any")
        if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            return self.config_error(ctx, "expect.contains_any must be a list of strings")
        text = _answer_text(ctx)
        if any(o in text for o in options):
            return self.outcome([])
        return self.outcome(
            [
                self.violation(
                    ctx,
                    "CONTENT",
                    f"none of {_show(options)} occurs in the answer: «{_excerpt(text)}»",
                )
            ]
        )


# --------------------------------------------------------------------------- JSON extraction


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_JSON_START = re.compile(r"[\[{]")


@dataclass
class Extracted:
    """The JSON value found in an answer (``found=False``: ``error`` says why)."""

    found: bool
    value: Any = None
    source: str = ""
    error: str = ""


def _loads(text: str) -> tuple[bool, Any]:
    try:
        return True, _DECODER.decode(text)
    except (ValueError, RecursionError):
        return False, None


def _fences(text: str) -> Iterator[tuple[str, str]]:
    """(info string, body) of each ``` fenced block, in order (a linear scan)."""
    pos = 0
    while True:
        start = text.find("```", pos)
        if start < 0:
            return
        newline = text.find("\n", start + 3)
        if newline < 0:
            return
        end = text.find("```", newline + 1)
        if end < 0:
            return
        info = text[start + 3 : newline].strip()
        yield (info.split()[0] if info else ""), text[newline + 1 : end]
        pos = end + 3


def extract_json(text: str | None) -> Extracted:
    """The JSON value in an answer, by the extraction rule of the module docstring."""
    if text is None or not text.strip():
        return Extracted(False, error="the answer is empty")
    stripped = text.strip()
    ok, value = _loads(stripped)
    if ok:
        return Extracted(True, value, "the whole answer")
    for info, body in _fences(text):
        if info.lower() not in ("", "json"):
            continue
        ok, value = _loads(body.strip())
        if ok:
            return Extracted(True, value, "a fenced block")
    tried = 0
    for match in _JSON_START.finditer(text):
        if tried >= JSON_CANDIDATES:
            break
        tried += 1
        try:
            value, _end = _DECODER.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            continue
        return Extracted(True, value, f"the JSON value at character {match.start()}")
    return Extracted(False, error=f"no JSON value found in the answer: «{_excerpt(text)}»")


# --------------------------------------------------------------------------- JSON schema

_TYPES = ("null", "boolean", "integer", "number", "string", "array", "object")
_SCHEMA_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        "format",
        "readOnly",
        "writeOnly",
        "deprecated",
    }
)
_SCHEMA_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "anyOf",
        "oneOf",
        "allOf",
        "$ref",
        "definitions",
        "$defs",
    }
)
_MAX_SCHEMA_DEPTH = 200


def _pointer_part(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


def _resolve_ref(root: Any, ref: str) -> tuple[bool, Any]:
    """Resolve ``#``, ``#/definitions/...`` or ``#/$defs/...`` against the root schema."""
    if ref == "#":
        return True, root
    if not (ref.startswith("#/definitions/") or ref.startswith("#/$defs/")):
        return False, None
    node: Any = root
    for raw in ref[2:].split("/"):
        part = _pointer_part(raw)
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False, None
    return True, node


def _nonneg_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_schema(schema: Any) -> list[str]:
    """Problems with a schema for our subset, each ``<location>: <message>`` (empty: usable)."""
    errors: list[str] = []
    try:
        _check_schema(schema, schema, "#", errors, 0)
    except RecursionError:
        errors.append("#: schema nested too deeply")
    return errors


def _check_schema(node: Any, root: Any, where: str, errors: list[str], depth: int) -> None:
    if depth > _MAX_SCHEMA_DEPTH:
        errors.append(f"{where}: schema nested too deeply")
        return
    if isinstance(node, bool):
        return
    if not isinstance(node, dict):
        errors.append(f"{where}: a schema must be an object or a boolean, got {_json_type(node)}")
        return

    def sub(value: Any, at: str) -> None:
        _check_schema(value, root, at, errors, depth + 1)

    for key in node:
        if key not in _SCHEMA_KEYWORDS and key not in _SCHEMA_ANNOTATIONS:
            errors.append(f"{where}: unsupported JSON Schema keyword {key!r}")
    if "type" in node:
        t = node["type"]
        names = t if isinstance(t, list) else [t]
        if not names or not all(isinstance(n, str) and n in _TYPES for n in names):
            errors.append(f"{where}/type: must be one of {', '.join(_TYPES)} or a list of them")
    for key in ("properties", "definitions", "$defs"):
        if key in node:
            value = node[key]
            if not isinstance(value, dict):
                errors.append(f"{where}/{key}: must be an object of schemas")
            else:
                for name, child in value.items():
                    sub(child, f"{where}/{key}/{name}")
    if "required" in node:
        req = node["required"]
        if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
            errors.append(f"{where}/required: must be a list of property names")
    if "additionalProperties" in node:
        sub(node["additionalProperties"], f"{where}/additionalProperties")
    if "items" in node:
        if isinstance(node["items"], list):
            errors.append(f"{where}/items: a list of schemas (tuple validation) is not supported")
        else:
            sub(node["items"], f"{where}/items")
    if "enum" in node and not isinstance(node["enum"], list):
        errors.append(f"{where}/enum: must be a list")
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if key in node and not _is_number(node[key]):
            errors.append(f"{where}/{key}: must be a number")
    for key in ("minLength", "maxLength", "minItems", "maxItems"):
        if key in node and not _nonneg_int(node[key]):
            errors.append(f"{where}/{key}: must be a non-negative integer")
    if "pattern" in node:
        pattern = node["pattern"]
        if not isinstance(pattern, str):
            errors.append(f"{where}/pattern: must be a string")
        else:
            problem = pattern_error(pattern)
            if problem is not None:
                errors.append(f"{where}/pattern: invalid regular expression {pattern!r}: {problem}")
    for key in ("anyOf", "oneOf", "allOf"):
        if key in node:
            branches = node[key]
            if not isinstance(branches, list) or not branches:
                errors.append(f"{where}/{key}: must be a non-empty list of schemas")
            else:
                for i, child in enumerate(branches):
                    sub(child, f"{where}/{key}/{i}")
    if "$ref" in node:
        ref = node["$ref"]
        if not isinstance(ref, str):
            errors.append(f"{where}/$ref: must be a string")
        else:
            ok, _target = _resolve_ref(root, ref)
            if not ok:
                errors.append(
                    f"{where}/$ref: cannot resolve {ref!r} (supported: '#', "
                    "'#/definitions/<name>', '#/$defs/<name>')"
                )
            elif _ref_cycle(root, node):
                errors.append(f"{where}/$ref: {ref!r} refers back to itself (a $ref cycle)")


def _ref_cycle(root: Any, node: dict[str, Any]) -> bool:
    """Whether following plain ``$ref`` chains from ``node`` comes back to a visited schema."""
    seen: set[int] = set()
    current: Any = node
    while isinstance(current, dict) and isinstance(current.get("$ref"), str):
        if id(current) in seen:
            return True
        seen.add(id(current))
        ok, current = _resolve_ref(root, current["$ref"])
        if not ok:
            return False
    return False


class _SchemaValidator:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.errors: list[tuple[str, str]] = []
        self.limit = MAX_REPORTED + 1
        self._refs: set[tuple[str, str]] = set()
        self._depth = 0

    def collect(self, instance: Any, schema: Any, path: str) -> list[tuple[str, str]]:
        saved = self.errors
        self.errors = []
        try:
            self.validate(instance, schema, path)
            return self.errors
        finally:
            self.errors = saved

    def add(self, path: str, message: str) -> None:
        self.errors.append((path, message))

    def validate(self, instance: Any, schema: Any, path: str) -> None:
        if len(self.errors) >= self.limit:
            return
        if schema is True:
            return
        if schema is False:
            self.add(path, "no value is allowed here (schema false)")
            return
        if not isinstance(schema, dict):
            return
        self._depth += 1
        try:
            if self._depth > 4 * _MAX_SCHEMA_DEPTH:
                self.add(path, "schema/data nested too deeply to validate")
                return
            self._keywords(instance, schema, path)
        finally:
            self._depth -= 1

    def _keywords(self, instance: Any, schema: dict[str, Any], path: str) -> None:
        ref = schema.get("$ref")
        if isinstance(ref, str):
            key = (ref, path)
            ok, target = _resolve_ref(self.root, ref)
            if not ok:
                self.add(path, f"cannot resolve $ref {ref!r}")
            elif key in self._refs:
                self.add(path, f"$ref {ref!r} loops without consuming data")
            else:
                self._refs.add(key)
                try:
                    self.validate(instance, target, path)
                finally:
                    self._refs.discard(key)
        if "type" in schema:
            names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            if not any(self._is_type(instance, n) for n in names):
                want = " or ".join(str(n) for n in names)
                self.add(path, f"expected {want}, got {_json_type(instance)} {_show(instance, 40)}")
                return  # the other keywords would only repeat the type error
        if "const" in schema and not _json_eq(instance, schema["const"]):
            self.add(path, f"must be {_show(schema['const'])}, got {_show(instance)}")
        if isinstance(schema.get("enum"), list) and not any(
            _json_eq(instance, e) for e in schema["enum"]
        ):
            self.add(path, f"must be one of {_show(schema['enum'])}, got {_show(instance)}")
        if _is_number(instance):
            self._number(instance, schema, path)
        elif isinstance(instance, str):
            self._string(instance, schema, path)
        elif isinstance(instance, list):
            self._array(instance, schema, path)
        elif isinstance(instance, dict):
            self._object(instance, schema, path)
        for sub in schema.get("allOf") or []:
            self.validate(instance, sub, path)
        if isinstance(schema.get("anyOf"), list):
            results = [self.collect(instance, s, path) for s in schema["anyOf"]]
            if all(results):
                self.add(path, self._none_matched("anyOf", results))
        if isinstance(schema.get("oneOf"), list):
            results = [self.collect(instance, s, path) for s in schema["oneOf"]]
            valid = [i for i, r in enumerate(results) if not r]
            if not valid:
                self.add(path, self._none_matched("oneOf", results))
            elif len(valid) > 1:
                self.add(
                    path,
                    f"matches {len(valid)} oneOf alternatives ({', '.join(map(str, valid))}); "
                    "exactly one must match",
                )

    @staticmethod
    def _none_matched(keyword: str, results: list[list[tuple[str, str]]]) -> str:
        parts = [f"#{i}: {r[0][0]}: {r[0][1]}" for i, r in enumerate(results[:4])]
        more = "; …" if len(results) > 4 else ""
        return (
            f"matches none of the {len(results)} {keyword} alternatives ({'; '.join(parts)}{more})"
        )

    @staticmethod
    def _is_type(instance: Any, name: Any) -> bool:
        if name == "integer":
            return (isinstance(instance, int) and not isinstance(instance, bool)) or (
                isinstance(instance, float) and instance.is_integer()
            )
        if name == "number":
            return _is_number(instance)
        return bool(_json_type(instance) == name)

    def _number(self, value: float, schema: dict[str, Any], path: str) -> None:
        for key, op in (
            ("minimum", ">="),
            ("maximum", "<="),
            ("exclusiveMinimum", ">"),
            ("exclusiveMaximum", "<"),
        ):
            bound = schema.get(key)
            if not _is_number(bound):
                continue
            ok = {
                ">=": value >= bound,
                "<=": value <= bound,
                ">": value > bound,
                "<": value < bound,
            }[op]
            if not ok:
                self.add(path, f"must be {op} {bound}, got {value}")

    def _string(self, value: str, schema: dict[str, Any], path: str) -> None:
        lo, hi = schema.get("minLength"), schema.get("maxLength")
        if _nonneg_int(lo) and len(value) < lo:
            self.add(path, f"must have at least {lo} characters, got {len(value)}")
        if _nonneg_int(hi) and len(value) > hi:
            self.add(path, f"must have at most {hi} characters, got {len(value)}")
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            if pattern_error(pattern) is not None:
                self.add(path, f"schema pattern {pattern!r} does not compile")
                return
            found = (
                budget_search(pattern, value[:REGEX_SCAN_LIMIT], grader="json_schema") is not None
            )
            if not found:
                self.add(path, f"does not match pattern /{pattern}/: {_show(value, 40)}")

    def _array(self, value: list[Any], schema: dict[str, Any], path: str) -> None:
        lo, hi = schema.get("minItems"), schema.get("maxItems")
        if _nonneg_int(lo) and len(value) < lo:
            self.add(path, f"must have at least {lo} items, got {len(value)}")
        if _nonneg_int(hi) and len(value) > hi:
            self.add(path, f"must have at most {hi} items, got {len(value)}")
        items = schema.get("items")
        if items is not None and not isinstance(items, list):
            for i, item in enumerate(value):
                if len(self.errors) >= self.limit:
                    return
                self.validate(item, items, f"{path}[{i}]")

    def _object(self, value: dict[str, Any], schema: dict[str, Any], path: str) -> None:
        required = schema.get("required")
        if isinstance(required, list):
            for name in required:
                if isinstance(name, str) and name not in value:
                    self.add(_key_path(path, name), "required property is missing")
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        extra = schema.get("additionalProperties", True)
        for name, child in value.items():
            if len(self.errors) >= self.limit:
                return
            at = _key_path(path, name)
            if name in props:
                self.validate(child, props[name], at)
            elif extra is False:
                self.add(at, "additional property is not allowed")
            elif isinstance(extra, dict):
                self.validate(child, extra, at)


def validate_json(instance: Any, schema: Any) -> list[tuple[str, str]]:
    """Validate a JSON value against a schema of our subset: a list of (path, message)."""
    validator = _SchemaValidator(schema)
    try:
        validator.validate(instance, schema, "$")
    except RecursionError:
        validator.errors.append(("$", "JSON nested too deeply to validate"))
    return validator.errors


class JsonSchemaGrader(_Grader):
    name = "json_schema"
    primary = ("json_schema",)
    expect_keys = (
        ExpectKey("json_schema", "object", "the answer's JSON must validate (schema subset)"),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        schema = expect.get("json_schema")
        if not isinstance(schema, dict):
            return []
        return [("expect.json_schema", message) for message in check_schema(schema)]

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        schema = ctx.case.expect.get("json_schema")
        problems = check_schema(schema) if isinstance(schema, dict) else ["must be an object"]
        if problems:
            return self.config_error(ctx, f"expect.json_schema: {problems[0]}")
        found = extract_json(_answer_text(ctx))
        if not found.found:
            return self.outcome([self.violation(ctx, "FORMAT", found.error)])
        errors = validate_json(found.value, schema)
        violations = [
            self.violation(ctx, "SCHEMA", f"{path}: {message}") for path, message in errors
        ]
        return self.outcome(self.capped(ctx, violations))


# --------------------------------------------------------------------------- json_equals

_ANY = object()
_PATH_TOKEN = re.compile(r'\.(\*)|\.([^.\[\]]+)|\[(\d+)\]|\[(\*)\]|\[("(?:[^"\\]|\\.)*")\]')
_Token = Any  # str key, int index or the wildcard _ANY


def parse_path(path: str) -> list[_Token] | None:
    """``$.a[0]["b c"][*]`` → tokens; a bare ``name`` is the top-level key; None if invalid."""
    if not path.startswith("$"):
        return [path] if path else None
    tokens: list[_Token] = []
    pos = 1
    while pos < len(path):
        match = _PATH_TOKEN.match(path, pos)
        if match is None:
            return None
        star_key, key, index, star_index, quoted = match.groups()
        if star_key or star_index:
            tokens.append(_ANY)
        elif key is not None:
            tokens.append(key)
        elif index is not None:
            tokens.append(int(index))
        else:
            try:
                tokens.append(json.loads(quoted))
            except ValueError:
                return None
        pos = match.end()
    return tokens


def _ignored(tokens: Sequence[Any], patterns: Sequence[Sequence[Any]]) -> bool:
    for pattern in patterns:
        if len(pattern) == len(tokens) and all(
            p is _ANY or (p == t and isinstance(p, int) == isinstance(t, int))
            for p, t in zip(pattern, tokens, strict=True)
        ):
            return True
    return False


def json_diff(
    expected: Any, actual: Any, ignore: Sequence[Sequence[Any]] = ()
) -> Iterator[tuple[str, str]]:
    """Differences between two JSON values as (path, message), skipping ignored paths."""
    stack: list[tuple[Any, Any, list[Any]]] = [(expected, actual, [])]
    while stack:
        exp, act, tokens = stack.pop()
        if tokens and _ignored(tokens, ignore):
            continue
        path = format_path(tokens)
        if isinstance(exp, dict) and isinstance(act, dict):
            children: list[tuple[Any, Any, list[Any]]] = []
            for key in exp:
                sub = [*tokens, key]
                if key not in act:
                    if not _ignored(sub, ignore):
                        yield format_path(sub), f"missing (expected {_show(exp[key])})"
                else:
                    children.append((exp[key], act[key], sub))
            for key in act:
                sub = [*tokens, key]
                if key not in exp and not _ignored(sub, ignore):
                    yield format_path(sub), f"unexpected key (got {_show(act[key])})"
            stack.extend(reversed(children))
        elif isinstance(exp, list) and isinstance(act, list):
            if len(exp) != len(act):
                yield path, f"expected {len(exp)} items, got {len(act)}"
            stack.extend(
                reversed(
                    [(e, a, [*tokens, i]) for i, (e, a) in enumerate(zip(exp, act, strict=False))]
                )
            )
        elif _json_type(exp) in ("object", "array") or _json_type(act) in ("object", "array"):
            yield path, f"expected {_json_type(exp)}, got {_json_type(act)} {_show(act, 60)}"
        elif not _json_eq(exp, act):
            yield path, f"expected {_show(exp)}, got {_show(act)}"


class JsonEqualsGrader(_Grader):
    name = "json_equals"
    primary = ("json_equals",)
    expect_keys = (
        ExpectKey("json_equals", "any", "the answer's JSON must equal this value"),
        ExpectKey(
            "json_ignore", "list[str]", "JSON paths ($.a.b, $.items[*].id) or top-level keys"
        ),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        errors = self.requires(expect, "json_ignore", "json_equals")
        ignore = expect.get("json_ignore")
        if isinstance(ignore, list):
            for i, path in enumerate(ignore):
                if isinstance(path, str) and parse_path(path) is None:
                    errors.append(
                        (
                            f"expect.json_ignore[{i}]",
                            f"invalid JSON path {path!r} (e.g. $.meta.id, $.items[*].ts, or a "
                            "top-level key)",
                        )
                    )
        return errors

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        expected = ctx.case.expect.get("json_equals")
        raw_ignore = ctx.case.expect.get("json_ignore") or []
        ignore: list[list[Any]] = []
        if isinstance(raw_ignore, list):
            for path in raw_ignore:
                tokens = parse_path(path) if isinstance(path, str) else None
                if tokens is None:
                    return self.outcome(
                        [
                            self.violation(
                                ctx,
                                "GRADER_CONFIG",
                                f"expect.json_ignore: invalid path {_show(path)}",
                            )
                        ]
                    )
                ignore.append(tokens)
        found = extract_json(_answer_text(ctx))
        if not found.found:
            return self.outcome([self.violation(ctx, "FORMAT", found.error)])
        violations: list[Violation] = []
        try:
            for path, message in json_diff(expected, found.value, ignore):
                violations.append(self.violation(ctx, "MISMATCH", f"{path}: {message}"))
                if len(violations) > MAX_REPORTED:
                    break
        except RecursionError:  # pragma: no cover - json_diff is iterative; _show guards too
            violations.append(self.violation(ctx, "FORMAT", "JSON nested too deeply to compare"))
        return self.outcome(self.capped(ctx, violations))


# --------------------------------------------------------------------------- tool_calls


@dataclass(frozen=True)
class _Call:
    name: str
    arguments: Any


def _expected_calls(value: Any) -> list[_Call] | str:
    if not isinstance(value, list):
        return "must be a list of {name, arguments} objects"
    calls: list[_Call] = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            if not item:
                return f"[{i}]: the tool name must not be empty"
            calls.append(_Call(item, {}))
            continue
        if not isinstance(item, dict):
            return f"[{i}]: must be an object {{name, arguments}} or a tool name"
        unknown = [k for k in item if k not in ("name", "arguments")]
        if unknown:
            return f"[{i}]: unknown key {unknown[0]!r} (known: name, arguments)"
        name = item.get("name")
        if not isinstance(name, str) or not name:
            return f"[{i}].name: must be a non-empty string"
        args = item.get("arguments", {})
        if args is None:
            args = {}
        if not isinstance(args, dict):
            return f"[{i}].arguments: must be an object (the argument subset to match)"
        calls.append(_Call(name, args))
    return calls


def _actual_calls(ctx: GradeContext) -> list[_Call]:
    raw: Any = getattr(ctx.answer, "tool_calls", None)
    if not isinstance(raw, (list, tuple)):
        return []
    calls: list[_Call] = []
    for item in raw:
        if isinstance(item, Mapping):
            name, args = item.get("name"), item.get("arguments")
        else:
            name, args = getattr(item, "name", None), getattr(item, "arguments", None)
        if isinstance(args, str):
            ok, parsed = _loads(args)
            args = parsed if ok else args
        if not isinstance(name, str):
            name = "" if name is None else str(name)
        calls.append(_Call(name, args))
    return calls


def _subset_diff(expected: Any, actual: Any, path: str = "$") -> str | None:
    """First place where ``expected`` is not a recursive subset of ``actual`` (None: it is)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{path}: expected an object, got {_json_type(actual)} {_show(actual, 40)}"
        for key, value in expected.items():
            at = _key_path(path, key)
            if key not in actual:
                return f"{at}: missing (expected {_show(value, 40)})"
            problem = _subset_diff(value, actual[key], at)
            if problem:
                return problem
        return None
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return f"{path}: expected an array, got {_json_type(actual)} {_show(actual, 40)}"
        if len(expected) != len(actual):
            return f"{path}: expected {len(expected)} items, got {len(actual)}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            problem = _subset_diff(e, a, f"{path}[{i}]")
            if problem:
                return problem
        return None
    if not _json_eq(expected, actual):
        return f"{path}: expected {_show(expected, 40)}, got {_show(actual, 40)}"
    return None


def _call_problem(expected: _Call, actual: _Call) -> str | None:
    if expected.name != actual.name:
        return f"expected {expected.name}, got {actual.name}"
    try:
        problem = _subset_diff(expected.arguments, actual.arguments)
    except RecursionError:
        problem = "$: arguments nested too deeply"
    return f"{actual.name} arguments differ at {problem}" if problem else None


def _describe(call: _Call) -> str:
    return f"{call.name}({_show(call.arguments, 60)})" if call.arguments else f"{call.name}(…)"


def _names(calls: Sequence[_Call]) -> str:
    if not calls:
        return "no tool calls were made"
    shown = ", ".join(c.name for c in calls[:20])
    more = ", …" if len(calls) > 20 else ""
    return f"calls made: {shown}{more}"


def _bipartite(expected: Sequence[_Call], actual: Sequence[_Call]) -> list[int | None]:
    """For each expected call, the index of a distinct matching actual call (or None)."""
    ok = [[_call_problem(e, a) is None for a in actual] for e in expected]
    owner: list[int | None] = [None] * len(actual)

    def augment(i: int, seen: set[int]) -> bool:
        for j in range(len(actual)):
            if ok[i][j] and j not in seen:
                seen.add(j)
                current = owner[j]
                if current is None or augment(current, seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(expected)):
        augment(i, set())
    result: list[int | None] = [None] * len(expected)
    for j, who in enumerate(owner):
        if who is not None:
            result[who] = j
    return result


class ToolCallsGrader(_Grader):
    name = "tool_calls"
    primary = ("tool_calls",)
    expect_keys = (
        ExpectKey("tool_calls", "list", "expected calls: [{name, arguments (subset)}]"),
        ExpectKey("tool_calls_order", "str", "exact | subsequence (default) | any"),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        errors = self.requires(expect, "tool_calls_order", "tool_calls")
        value = expect.get("tool_calls")
        if isinstance(value, list):
            calls = _expected_calls(value)
            if isinstance(calls, str):
                errors.append(("expect.tool_calls", calls))
        order = expect.get("tool_calls_order")
        if isinstance(order, str) and order not in TOOL_ORDERS:
            errors.append(("expect.tool_calls_order", f"must be one of {', '.join(TOOL_ORDERS)}"))
        return errors

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        expected = _expected_calls(ctx.case.expect.get("tool_calls"))
        order = ctx.case.expect.get("tool_calls_order") or "subsequence"
        if isinstance(expected, str) or order not in TOOL_ORDERS:
            what = expected if isinstance(expected, str) else f"unknown order {order!r}"
            return self.config_error(ctx, f"expect.tool_calls: {what}")
        actual = _actual_calls(ctx)
        violations: list[Violation] = []

        def missing(i: int, call: _Call, among: Sequence[_Call], where: str = "") -> None:
            same = [a for a in among if a.name == call.name]
            if same:
                detail = _call_problem(call, same[0]) or "no distinct call left to match"
            else:
                detail = _names(actual)
            violations.append(
                self.violation(
                    ctx,
                    "TOOL_CALL",
                    f"expected call #{i} {_describe(call)} not found{where}: {detail}",
                )
            )

        if order == "exact":
            if len(expected) != len(actual):
                violations.append(
                    self.violation(
                        ctx,
                        "TOOL_CALL",
                        f"expected exactly {len(expected)} calls "
                        f"({', '.join(c.name for c in expected) or 'none'}), got {len(actual)} "
                        f"({_names(actual)})",
                    )
                )
            for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
                problem = _call_problem(e, a)
                if problem:
                    violations.append(self.violation(ctx, "TOOL_CALL", f"call #{i}: {problem}"))
        elif order == "subsequence":
            start = 0
            for i, call in enumerate(expected):
                hit = next(
                    (
                        j
                        for j in range(start, len(actual))
                        if _call_problem(call, actual[j]) is None
                    ),
                    None,
                )
                if hit is None:
                    where = f" after call #{start - 1}" if start else ""
                    missing(i, call, actual[start:], where)
                else:
                    start = hit + 1
        else:
            for i, j in enumerate(_bipartite(expected, actual)):
                if j is None:
                    missing(i, expected[i], actual)
        return self.outcome(self.capped(ctx, violations))


# --------------------------------------------------------------------------- number

_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def extract_number(text: str | None) -> float | None:
    """The number an answer gives, by the rule in the module docstring (None: no number)."""
    if text is None:
        return None
    stripped = text.strip()
    if not stripped:
        return None
    if len(stripped) < 1000:
        ok, value = _loads(stripped)
        if ok and _is_number(value):
            try:
                return float(value)
            except OverflowError:  # a huge JSON integer
                return math.inf
    last: str | None = None
    for match in _NUMBER.finditer(text):
        last = match.group(0)
    if last is None:
        return None
    try:
        return float(last)  # a huge digit run reads as inf, reported as out of range
    except ValueError:  # pragma: no cover - the regex only matches float syntax
        return None


def _number_spec(value: Any) -> tuple[float, float, float] | str:
    """(value, abs_tol, rel_tol) of ``expect.number``, or an error message."""
    if _is_number(value):
        target, abs_tol, rel_tol = value, 1e-9, 0.0
    elif isinstance(value, dict):
        unknown = [k for k in value if k not in ("value", "abs_tol", "rel_tol")]
        if unknown:
            return f"unknown key {unknown[0]!r} (known: value, abs_tol, rel_tol)"
        if not _is_number(value.get("value")):
            return "needs a numeric `value`"
        target = value["value"]
        raw_abs, raw_rel = value.get("abs_tol"), value.get("rel_tol")
        for name, tol in (("abs_tol", raw_abs), ("rel_tol", raw_rel)):
            if tol is not None and not (_is_number(tol) and math.isfinite(tol) and tol >= 0):
                return f"{name} must be a non-negative number"
        abs_tol = 1e-9 if raw_abs is None and raw_rel is None else (raw_abs or 0.0)
        rel_tol = raw_rel or 0.0
    else:
        return "must be a number or {value, abs_tol?, rel_tol?}"
    if not math.isfinite(target):
        return "value must be finite"
    return float(target), float(abs_tol), float(rel_tol)


class NumberGrader(_Grader):
    name = "number"
    primary = ("number",)
    expect_keys = (
        ExpectKey(
            "number",
            "any",
            "expected number: a bare number (abs_tol 1e-9) or {value, abs_tol?, rel_tol?}",
        ),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        if not _present(expect, "number"):
            return []
        spec = _number_spec(expect["number"])
        return [("expect.number", spec)] if isinstance(spec, str) else []

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        spec = _number_spec(ctx.case.expect.get("number"))
        if isinstance(spec, str):
            return self.config_error(ctx, f"expect.number {spec}")
        target, abs_tol, rel_tol = spec
        text = _answer_text(ctx)
        got = extract_number(text)
        if got is None:
            return self.outcome(
                [
                    self.violation(
                        ctx,
                        "FORMAT",
                        f"no number in the answer: «{_excerpt(text)}»",
                    )
                ]
            )
        tolerance = max(abs_tol, rel_tol * abs(target))
        if not math.isfinite(got):
            reason = f"the last number in the answer is out of range; expected {target:g}"
            return self.outcome([self.violation(ctx, "FORMAT", reason)])
        if abs(got - target) <= tolerance:
            return self.outcome([])
        return self.outcome(
            [
                self.violation(
                    ctx,
                    "MISMATCH",
                    f"expected {target:g} ± {tolerance:g}, got {got:g} "
                    f"(off by {abs(got - target):g}; "
                    "the last number in the answer)",
                )
            ]
        )


# --------------------------------------------------------------------------- cites


def _cited(text: str, options: Mapping[str, Any]) -> set[str] | str:
    """The ids an answer cites, or an error message about the options."""
    pattern = options.get("pattern", DEFAULT_CITE_PATTERN)
    header = options.get("header")
    if not isinstance(pattern, str) or not pattern:
        return "option `pattern` must be a non-empty regular expression"
    if header is not None and (not isinstance(header, str) or not header):
        return "option `header` must be a non-empty string such as 'RAG:'"
    problem = pattern_error(pattern)
    if problem is not None:
        return f"option `pattern` {pattern!r} does not compile: {problem}"
    groups = compile_pattern(pattern).groups
    cited: set[str] = set()
    scanned, _note = _scan(text)
    for match in budget_finditer(pattern, scanned, grader="cites"):
        raw = match.group(1) if groups else match.group(0)
        if raw:
            cited.update(part.strip() for part in raw.split(",") if part.strip())
    if header:
        line = text.lstrip()[:100_000].split("\n", 1)[0].strip()
        if line[: len(header)].upper() == header.upper():
            cited.update(p.strip() for p in line[len(header) :].split(",") if p.strip())
    return cited


class CitesGrader(_Grader):
    name = "cites"
    primary = ("cites",)
    expect_keys = (
        ExpectKey("cites", "list[str]", "document ids the answer must cite ([doc-id] by default)"),
        ExpectKey("cites_only", "bool", "true: citing any other id also fails"),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        errors = self.requires(expect, "cites_only", "cites")
        cites = expect.get("cites")
        if isinstance(cites, list) and any(isinstance(c, str) and not c.strip() for c in cites):
            errors.append(("expect.cites", "ids must not be blank"))
        return errors

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        wanted = ctx.case.expect.get("cites")
        if not isinstance(wanted, list) or not all(isinstance(c, str) for c in wanted):
            return self.config_error(ctx, "expect.cites must be a list of strings")
        text = _answer_text(ctx)
        cited = _cited(text, _options(ctx, self.name))
        if isinstance(cited, str):
            return self.config_error(ctx, f"cites: {cited}")
        note = _scan(text)[1]
        violations = [
            self.violation(ctx, "CITATION", f"missing citation {doc!r}{note}")
            for doc in dict.fromkeys(wanted)
            if doc not in cited
        ]
        if ctx.case.expect.get("cites_only") is True:
            violations += [
                self.violation(ctx, "CITATION", f"unexpected citation {doc!r} (cites_only)")
                for doc in sorted(cited - set(wanted))
            ]
        return self.outcome(self.capped(ctx, violations))


# --------------------------------------------------------------------------- must_not


class MustNotGrader(_Grader):
    """Top-level ``must_not`` for rows the contract grader does not handle."""

    name = "must_not"
    expect_keys = ()

    def applies(self, case: GoldenCase) -> bool:
        return bool(case.must_not) and not any(k in case.expect for k in CONTRACT_KEYS)

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        text = _answer_text(ctx)
        violations = [
            self.violation(ctx, "FORBIDDEN", f"contains banned {banned!r}")
            for banned in dict.fromkeys(ctx.case.must_not)
            if isinstance(banned, str) and banned and banned in text
        ]
        return self.outcome(violations)


# --------------------------------------------------------------------------- similarity


class SimilarityGrader(_Grader):
    """Soft by default: cosine similarity of embeddings (see providers/embeddings.py)."""

    name = "similarity"
    hard = False
    primary = ("similar_to",)
    expect_keys = (
        ExpectKey("similar_to", "str", "reference text the answer should mean the same as"),
        ExpectKey("similarity_threshold", "number", "minimum cosine similarity (default 0.8)"),
    )

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        #: Environment read for GOLDEVAL_EMBED_*; None means ``os.environ`` at grade time.
        self.environ = environ

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        errors = self.requires(expect, "similarity_threshold", "similar_to")
        threshold = expect.get("similarity_threshold")
        if _is_number(threshold) and not (-1.0 <= threshold <= 1.0):
            errors.append(("expect.similarity_threshold", "must be between -1 and 1 (a cosine)"))
        ref = expect.get("similar_to")
        if isinstance(ref, str) and not ref.strip():
            errors.append(("expect.similar_to", "must not be blank"))
        return errors

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        from goldeval.providers.embeddings import embedding_settings

        raw = ctx.case.expect.get("similarity_threshold")
        threshold = float(raw) if _is_number(raw) else DEFAULT_SIMILARITY_THRESHOLD
        reference = ctx.case.expect.get("similar_to")

        def fail(reason: str, severity: Severity = Severity.LOW) -> GraderOutcome:
            return self.outcome(
                [self.violation(ctx, "SIMILARITY", reason, severity)],
                passed=False,
                threshold=threshold,
            )

        if not isinstance(reference, str):
            return fail("expect.similar_to must be a string")
        try:
            settings = embedding_settings(
                _options(ctx, self.name), os.environ if self.environ is None else self.environ
            )
        except GoldevalError as exc:
            return fail(f"embedding provider misconfigured: {exc}")
        if settings is None:
            return fail(
                "no embedding provider configured (set GOLDEVAL_EMBED_PROVIDER=ollama|openai, "
                "GOLDEVAL_EMBED_URL, GOLDEVAL_EMBED_MODEL, or grader_options.similarity)"
            )
        text = _answer_text(ctx)
        if not text.strip():
            return fail("the answer is empty", Severity.MEDIUM)
        try:
            with settings.client() as client:
                score = client.similarity(text, reference)
        except ProviderError as exc:
            return self.outcome(
                [self.violation(ctx, exc.kind, f"{exc.kind}: {exc.message}", Severity.LOW)],
                passed=False,
                threshold=threshold,
            )
        except GoldevalError as exc:
            return fail(f"embedding provider misconfigured: {exc}")
        score = round(score, 6)
        if score >= threshold:
            return self.outcome([], passed=True, score=score, threshold=threshold)
        return self.outcome(
            [
                self.violation(
                    ctx,
                    "SIMILARITY",
                    f"similarity {score:.3f} < threshold {threshold:g} to expect.similar_to "
                    f"«{_excerpt(reference, 80)}»",
                    Severity.MEDIUM,
                )
            ],
            passed=False,
            score=score,
            threshold=threshold,
        )


# --------------------------------------------------------------------------- registry


def builtin_graders() -> list[Grader]:
    """The general-purpose graders, in reporting order (registered by
    goldeval.pytest_plugin.builtins)."""
    return [
        ExactGrader(),
        RegexGrader(),
        ContainsAnyGrader(),
        JsonSchemaGrader(),
        JsonEqualsGrader(),
        ToolCallsGrader(),
        NumberGrader(),
        CitesGrader(),
        MustNotGrader(),
        SimilarityGrader(),
    ]
