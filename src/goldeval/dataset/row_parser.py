"""Parse a JSONL rows file into cases, reporting every problem with its file, line and field.

One row is read in named steps (:func:`_parse_row`): decode the JSON, then each field in the
order of ``ROW_FIELDS``; a row with a problem makes no case, and the whole file is reported at
once (DatasetErrors) so one run shows every broken row.
"""

from __future__ import annotations

import io
import json
import keyword
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goldeval.core.errors import DatasetError, DatasetErrors, GoldevalError
from goldeval.core.json_numbers import bounded_int, int_parser
from goldeval.core.limits import default
from goldeval.core.safe_files import read_regular_file
from goldeval.dataset.case import GoldenCase
from goldeval.dataset.expect import ExpectKey
from goldeval.dataset.manifest import Manifest
from goldeval.dataset.profiles import JAVA_AUTOTEST, get_profile
from goldeval.dataset.request import check_messages, parse_request
from goldeval.dataset.row_fields import RESERVED_TAGS, ROW_FIELDS, TAG, check_case_id, suggest
from goldeval.dataset.templates import CompiledTemplates, TemplateProblem

if TYPE_CHECKING:
    from goldeval.graders.base import Grader


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


#: One decoder for every row: ``json.loads(..., object_pairs_hook=...)`` builds a new decoder
#: per call, which cost more than decoding a short row.
_ROW_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys)
#: The same for a line with a run of 309 digits: its integers are checked (json_numbers).
_ROW_DECODER_CHECKED = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys, parse_int=bounded_int)


@dataclass(frozen=True)
class _Rules:
    """What every row of one file is checked against."""

    path: Path
    expect_keys: dict[str, ExpectKey]
    graders: Sequence[Grader]
    reserved_tags: Collection[str]
    profile: str
    templates: CompiledTemplates | None
    base_request: dict[str, Any]
    #: The variants' own templates (name, templates): a row must render under each too.
    variant_templates: tuple[tuple[str, CompiledTemplates], ...] = ()


class _Row:
    """One row's problems, each with the file, line and field."""

    __slots__ = ("errors", "lineno", "path")

    def __init__(self, path: Path, lineno: int) -> None:
        self.path, self.lineno = path, lineno
        self.errors: list[GoldevalError] = []

    def err(self, message: str, fld: str | None = None, hint: str | None = None) -> None:
        self.errors.append(
            DatasetError(message, path=self.path, line=self.lineno, field=fld, hint=hint)
        )


def parse_rows(
    path: Path,
    expect_keys: dict[str, ExpectKey],
    graders: Sequence[Grader] = (),
    reserved_tags: Collection[str] = RESERVED_TAGS,
    manifest: Manifest | None = None,
) -> list[GoldenCase]:
    """Parse and validate a JSONL rows file; raise DatasetErrors listing every problem.

    ``manifest``: the dataset's (its profile names the cases' kinds; its prompt templates
    must render over every row's variables).

    ``reserved_tags``: names a row tag may not take because they are marks with behaviour
    (pytest's own and the running plugins'); the default is :data:`RESERVED_TAGS`.
    """
    data = read_regular_file(path)
    rules = _Rules(
        path=path,
        expect_keys=expect_keys,
        graders=graders,
        reserved_tags=reserved_tags,
        profile=get_profile(manifest.profile).name if manifest is not None else JAVA_AUTOTEST,
        templates=manifest.templates() if manifest is not None else None,
        base_request=(manifest.request or {}) if manifest is not None else {},
        variant_templates=_variant_templates(manifest),
    )
    errors: list[GoldevalError] = []
    cases: list[GoldenCase] = []
    first_line: dict[str, int] = {}
    most = int(default("dataset_rows"))
    rows = 0
    for lineno, line in _text_lines(data, path, errors):
        if not line.strip() or line.startswith("#"):
            continue
        rows += 1
        if rows > most:  # 800,000 rows of 49 MB took 2.9 GB and a MemoryError to collect
            raise DatasetError(
                f"more than {most:,} rows (limit dataset_rows)",
                path=path,
                line=lineno,
                hint="split the dataset into several, or select rows with -m/-k from smaller ones",
            )
        row = _Row(path, lineno)
        case = _parse_row(line, row, rules, first_line)
        errors.extend(row.errors)
        if case is not None:
            cases.append(case)
    if errors:
        if len(errors) == 1:
            raise errors[0]
        raise DatasetErrors(errors)
    return cases


def _text_lines(data: bytes, path: Path, errors: list[GoldevalError]) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line; a line that is not UTF-8 is a problem in ``errors``."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    # Line by line from the buffer, not data.split(): that list held a second copy of the
    # whole file for the length of the loop.
    for lineno, raw in enumerate(io.BytesIO(data), start=1):
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            yield lineno, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            errors.append(
                DatasetError(
                    f"not valid UTF-8 at byte {exc.start}",
                    path=path,
                    line=lineno,
                    hint="save the file as UTF-8",
                )
            )


def _parse_row(
    line: str, row: _Row, rules: _Rules, first_line: dict[str, int]
) -> GoldenCase | None:
    """One row's case, or None when it has a problem (recorded in ``row.errors``)."""
    obj = _decode(line, row)
    if obj is None:
        return None
    for key in obj:
        if key not in ROW_FIELDS:
            row.err(
                "unknown field",
                fld=key,
                hint=suggest(key, ROW_FIELDS) or f"known fields: {', '.join(ROW_FIELDS)}",
            )
    case_id = obj.get("id")
    id_problem = check_case_id(case_id)
    if id_problem:
        row.err(id_problem, fld="id")
    messages, prompt, from_template = _prompt(obj, row, rules)
    row_vars = _vars(obj, row)
    row_request = _request(obj, row, rules.base_request)
    expect = _expect(obj, row, rules)
    must_not = _strings(obj, "must_not", row)
    if "" in must_not:
        row.err("must not contain an empty string (it occurs in every answer)", fld="must_not")
    tags = _tags(obj, row, rules.reserved_tags)
    metadata = _object(obj, "metadata", row)
    if not id_problem and isinstance(case_id, str):
        if case_id in first_line:
            row.err(
                f"duplicate id {case_id!r} (first defined at line {first_line[case_id]})",
                fld="id",
                hint="ids are the stable identity of a case; make them unique",
            )
        else:
            first_line[case_id] = row.lineno
    if row.errors:
        return None
    assert isinstance(case_id, str) and isinstance(prompt, str)  # checked above
    templates = rules.templates
    if from_template and templates is not None:
        probe = GoldenCase(id=case_id, prompt="", expect={}, vars=row_vars)
        if not templates.missing(probe):
            try:
                prompt = templates.render("user", probe)
            except TemplateProblem as exc:
                row.err(exc.message, fld=exc.field)
                return None
    case = GoldenCase(
        id=case_id,
        prompt=prompt,
        # A copy only when there are nulls to drop: 10,000 copies were a visible
        # part of a collection's memory.
        expect=expect
        if None not in expect.values()
        else {k: v for k, v in expect.items() if v is not None},
        must_not=tuple(must_not),
        tags=tuple(dict.fromkeys(tags)),
        metadata=metadata,
        line=row.lineno,
        profile=rules.profile,
        vars=row_vars,
        messages=messages,
        request=row_request,
    )
    _check_template_variables(case, rules, row)
    return case


def _check_template_variables(case: GoldenCase, rules: _Rules, row: _Row) -> None:
    """Every variable the manifest's templates, and each variant's own, use must be the
    row's."""
    templates = rules.templates
    if templates is not None:
        for fld, name in templates.missing(case):
            row.err(
                f"the template uses {{{{ {name} }}}} but the row defines no {name!r}",
                fld=fld,
                hint=f'add "vars": {{"{name}": ...}} to the row, or change the '
                "template in the manifest",
            )
    for variant, own in rules.variant_templates:
        for fld, name in own.missing(case):
            row.err(
                f"variant {variant!r}'s template uses {{{{ {name} }}}} but the row defines "
                f"no {name!r}",
                fld=fld,
                hint=f'add "vars": {{"{name}": ...}} to the row, or change the variant\'s '
                "template in the manifest",
            )


def _variant_templates(manifest: Manifest | None) -> tuple[tuple[str, CompiledTemplates], ...]:
    """Templates of the variants that bring their own prompt (the others send the manifest's,
    which every row is already checked against)."""
    if manifest is None:
        return ()
    found = []
    for variant in manifest.variants or []:
        if variant.prompt is None:
            continue
        own = variant.templates(manifest.prompt)
        if own is not None:
            found.append((variant.name, own))
    return tuple(found)


def _decode(line: str, row: _Row) -> dict[str, Any] | None:
    """The row's JSON object, or None (the problem recorded)."""
    try:
        obj = (_ROW_DECODER if int_parser(line) is None else _ROW_DECODER_CHECKED).decode(line)
    except _DuplicateKey as dup:
        row.err("duplicate key in the same object", fld=dup.key)
        return None
    except json.JSONDecodeError as exc:
        row.err(f"invalid JSON: {exc.msg} (column {exc.colno})", hint="one JSON object per line")
        return None
    except RecursionError:
        row.err("invalid JSON: nested too deeply")
        return None
    except ValueError as exc:  # e.g. an integer beyond Python's digit limit
        row.err(f"invalid JSON: {str(exc)[:120]}")
        return None
    if "\\u" in line:
        try:  # JSON escapes can produce lone surrogates, which are not text
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            row.err(
                "contains a lone surrogate escape (\\ud800-\\udfff): not valid Unicode",
                hint="escape the whole character pair, or write the character itself",
            )
            return None
    if not isinstance(obj, dict):
        row.err(f"a row must be a JSON object, got {type(obj).__name__}")
        return None
    return obj


def _prompt(
    obj: dict[str, Any], row: _Row, rules: _Rules
) -> tuple[list[dict[str, Any]] | None, Any, bool]:
    """(messages, prompt, whether the prompt is rendered from the manifest's template)."""
    messages = None
    if "messages" in obj:
        messages, problems = check_messages(obj["messages"], rules.path.parent)
        for fld, message in problems:
            row.err(message, fld=fld)
        if "prompt" in obj:
            row.err(
                "a row has either prompt or messages, not both",
                fld="prompt",
                hint="put the question in the last user turn",
            )
    prompt = obj.get("prompt")
    if messages is not None and prompt is None:
        return messages, _last_user_text(messages), False
    if prompt is None and rules.templates is not None and rules.templates.has("user"):
        return messages, "", True  # the rendered prompt.user, once the row's vars are read
    if not isinstance(prompt, str):
        row.err(
            "missing" if prompt is None else f"must be a string, got {type(prompt).__name__}",
            fld="prompt",
            hint="a row needs prompt (text) or messages (a conversation)"
            if prompt is None
            else None,
        )
    return messages, prompt, False


def _object(obj: dict[str, Any], key: str, row: _Row) -> dict[str, Any]:
    """An optional object field ({} when absent or not an object)."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        row.err(f"must be an object, got {type(value).__name__}", fld=key)
        return {}
    return value


def _strings(obj: dict[str, Any], key: str, row: _Row) -> list[str]:
    """An optional list of strings ([] when absent or not one)."""
    value = obj.get(key)
    if value is None:
        return []
    if not (isinstance(value, list) and all(isinstance(s, str) for s in value)):
        row.err("must be a list of strings", fld=key)
        return []
    return value


def _vars(obj: dict[str, Any], row: _Row) -> dict[str, Any]:
    """The row's template variables: each name must be usable as ``{{ name }}``."""
    row_vars = _object(obj, "vars", row)
    for name in row_vars:
        if not name.isidentifier() or keyword.iskeyword(name):
            row.err(
                f"{name[:40]!r} cannot be a template variable",
                fld=f"vars.{name[:40]}",
                hint="letters, digits and '_', not starting with a digit",
            )
    return row_vars


def _request(obj: dict[str, Any], row: _Row, base_request: dict[str, Any]) -> dict[str, Any]:
    """The row's request options, checked alone and merged over the manifest's."""
    if obj.get("request") is None:
        return {}
    row_request, problems = parse_request(obj["request"])
    if not problems:
        _, problems = parse_request({**base_request, **row_request})
    for fld, message in problems:
        row.err(message, fld="request" + (f".{fld}" if fld else ""))
    return row_request


def _expect(obj: dict[str, Any], row: _Row, rules: _Rules) -> dict[str, Any]:
    """The expect object: every key read by a grader, every value of its type, and what
    each grader checks across keys."""
    expect = _object(obj, "expect", row)
    for key, value in expect.items():
        spec = rules.expect_keys.get(key)
        if spec is None:
            row.err(
                "unknown expect key",
                fld=f"expect.{key}",
                hint=suggest(key, rules.expect_keys) or "no registered grader reads this key",
            )
            continue
        if value is None:
            continue
        problem = spec.check(value)
        if problem:
            row.err(problem, fld=f"expect.{key}")
    for grader in rules.graders:
        for fld, message in grader.validate_expect(expect):
            row.err(message, fld=fld)
    return expect


def _tags(obj: dict[str, Any], row: _Row, reserved_tags: Collection[str]) -> list[str]:
    """The row's tags: each becomes a pytest mark, so it must be one, without behaviour."""
    tags = _strings(obj, "tags", row)
    for tag in tags:
        if not TAG.match(tag) or keyword.iskeyword(tag):
            row.err(
                f"tag {tag[:40]!r} cannot be a pytest marker",
                fld="tags",
                hint="start with a letter, then letters, digits and '_' (e.g. smoke_test)",
            )
        elif tag in reserved_tags:
            row.err(
                f"tag {tag!r} is a pytest mark with its own behaviour (it would "
                "skip, xfail, retry or reconfigure the row instead of labelling it)",
                fld="tags",
                hint="rename the tag (e.g. "
                f"{tag}_rows); 'red' comes from expect.red, a known failure stays "
                "graded and is deselected with -m 'not red'",
            )
    return tags


def _last_user_text(messages: Sequence[dict[str, Any]]) -> str:
    """A conversation's question, as text: its last user turn (for reports and retrieval)."""
    for turn in reversed(messages):
        if turn.get("role") == "user":
            content = turn.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "\n".join(p["text"] for p in content if p.get("type") == "text")
    return ""
