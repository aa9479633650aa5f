"""Flat records (a CSV line, a Hugging Face row) as golden rows, and the ids they get."""

from __future__ import annotations

import re
from typing import Any

from goldeval.cli.importers.bounded import json_data
from goldeval.cli.importers.model import ImportReport, Rename, Row, import_error
from goldeval.core.limits import loads_json
from goldeval.dataset.row_fields import SAFE_ID, TAG

PROMPT_NAMES = ("prompt", "input", "question", "query", "instruction")
ANSWER_NAMES = ("expected_output", "expected", "answer", "ideal", "output", "target", "reference")


def text_of(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int | float | bool):
        return str(value)
    return None


def first_of(record: dict[str, Any], names: tuple[str, ...]) -> str | None:
    for name in names:
        if name in record and record[name] not in (None, ""):
            return name
    return None


def _json_or_text(value: str, where: str, fld: str) -> Any:
    """A cell holding JSON (depth-bounded) as its value, any other text as itself."""
    try:
        parsed = loads_json(value, what=f"the JSON in {fld}", path=where)
    except ValueError:
        return value
    return json_data(parsed, where=where, field=fld)


def map_record(record: dict[str, Any], where: str, report: ImportReport) -> Row:
    """A flat record (a CSV line, a Hugging Face row) as a golden row.

    ``id``; the prompt from the first of :data:`PROMPT_NAMES`; an answer from the first of
    :data:`ANSWER_NAMES` becomes the fixture and, unless ``expect.*`` columns say otherwise,
    ``expect.equals`` (normalize: all); ``expect.KEY`` columns (JSON or text) become expect
    keys; ``tags`` (comma or space separated, or a list); the rest goes to ``metadata``.
    """
    report.admit(where)
    row = Row(where=where)
    used: set[str] = set()
    if record.get("id") not in (None, ""):
        row.id = text_of(record["id"])
        used.add("id")
        report.mapped["id -> id"] += 1
    prompt_key = first_of(record, PROMPT_NAMES)
    if prompt_key is None:
        raise import_error(
            where,
            None,
            f"no prompt: none of the columns {', '.join(PROMPT_NAMES)} has a value",
            "add a prompt column (or rename yours to `prompt`)",
        )
    row.prompt = text_of(record[prompt_key])
    if row.prompt is None:
        raise import_error(where, prompt_key, "must be text", "write the prompt as a string")
    used.add(prompt_key)
    report.mapped[f"{prompt_key} -> prompt"] += 1
    for key, value in record.items():
        if key.startswith("expect.") and value not in (None, ""):
            name = key[len("expect.") :]
            row.expect[name] = _json_or_text(value, where, key) if isinstance(value, str) else value
            used.add(key)
            report.mapped[f"{key} -> expect.{name}"] += 1
    answer_key = first_of(record, ANSWER_NAMES)
    if answer_key is not None:
        answer = text_of(record[answer_key])
        if answer is None:
            raise import_error(
                where, answer_key, "must be text", "write the expected answer as a string"
            )
        used.add(answer_key)
        row.fixture = answer
        report.mapped[f"{answer_key} -> fixtures/<id>.out.md"] += 1
        if not row.expect:
            row.expect = {"equals": answer, "normalize": "all"}
            report.mapped[f"{answer_key} -> expect.equals (normalize: all)"] += 1
    if record.get("tags") not in (None, ""):
        row.tags = tags_of(record["tags"], where)
        used.add("tags")
        report.mapped["tags -> tags"] += 1
    for key, value in record.items():
        if key in used or value in (None, ""):
            continue
        if isinstance(value, str | int | float | bool | list | dict):
            row.metadata[key] = value
            report.mapped[f"{key} -> metadata.{key}"] += 1
        else:
            report.dropped[f"{key} (not JSON data)"] += 1
    return row


def tags_of(value: Any, where: str) -> list[str]:
    items = value if isinstance(value, list) else re.split(r"[,\s]+", str(value))
    tags = []
    for item in items:
        tag = str(item).strip()
        if not tag:
            continue
        tag = re.sub(r"[^A-Za-z0-9_]", "_", tag)
        if not tag[0].isalpha():
            tag = "t_" + tag
        if not TAG.match(tag):
            raise import_error(
                where,
                "tags",
                f"tag {item!r} cannot be a pytest marker name",
                "use letters, digits and _ (starting with a letter), 64 at most",
            )
        tags.append(tag)
    return tags


def slug(text: str) -> str:
    """``text`` as a case id: runs of other characters become ``-``, lower case, 60 at most."""
    slugged = re.sub(r"[^A-Za-z0-9._-]+", "-", text.strip()).strip("-._").lower()
    return slugged[:60] or "row"


def assign_ids(rows: list[Row], report: ImportReport) -> None:
    """Give every row a unique case id; each id changed from the source's is reported.

    A row without an id gets ``row-NNNN`` (not a rename); an id that is not a case id is
    slugged; a repeated id gets ``-2``, ``-3``... Every change lands in ``report.renamed``.
    """
    seen: set[str] = set()
    for n, row in enumerate(rows, 1):
        original = row.id
        base = row.id if row.id else f"row-{n:04d}"
        why = []
        if not SAFE_ID.match(base):
            slugged = slug(base)
            if not SAFE_ID.match(slugged):
                raise import_error(
                    row.where,
                    "id",
                    f"{base!r} cannot be a case id",
                    "use letters, digits, '.', '_' or '-' (128 at most)",
                )
            base = slugged
            why.append("not a case id: letters, digits, '.', '_' or '-' only")
        case_id, k = base, 2
        while case_id in seen:
            case_id, k = f"{base}-{k}", k + 1
        if case_id != base:
            why.append(f"{base!r} is taken by an earlier row")
        seen.add(case_id)
        row.id = case_id
        if why:
            report.renamed.append(Rename(row.where, original or base, case_id, "; ".join(why)))
