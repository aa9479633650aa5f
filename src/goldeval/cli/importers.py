"""``goldeval import``: another tool's test set as a golden dataset folder.

Sources: a CSV file, a Hugging Face ``datasets`` folder saved on disk (``save_to_disk`` or
``to_json``), a promptfoo test file (YAML) and DeepEval goldens (JSON). Each becomes
``golden/<name>/`` with ``dataset.yaml``, ``<name>.jsonl`` and, where the source holds an
answer, ``fixtures/<id>.out.md`` (plus the ``.out.json`` sidecar for recorded tool calls).

Every source row is mapped field by field; what has no place in a golden row is kept in the
row's ``metadata`` or dropped, and the report printed at the end says which. Nothing is written
when any row is bad: the folder is built in a temporary folder next to the target, loaded with
the plugin's own dataset loader, and only then renamed into place. Errors name the file, the
line (or row) and the field, and say what to do.

A Hugging Face folder is read without the ``datasets`` package: its JSON lines files always,
its ``.arrow`` and ``.parquet`` files through ``pyarrow`` when that is installed.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from goldeval.core.errors import DatasetError, GoldevalError
from goldeval.dataset.rows import SAFE_ID, TAG, load_dataset
from goldeval.graders.registry import builtin_graders
from goldeval.providers.fixture import dumps_sidecar

FORMATS = ("csv", "hf", "promptfoo", "deepeval")
PROMPT_NAMES = ("prompt", "input", "question", "query", "instruction")
ANSWER_NAMES = ("expected_output", "expected", "answer", "ideal", "output", "target", "reference")
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")


@dataclass
class Row:
    """One golden row being built, with where it came from (for errors)."""

    where: str
    id: str | None = None
    prompt: str | None = None
    expect: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    fixture: str | None = None
    sidecar: dict[str, Any] | None = None

    def dump(self) -> dict[str, Any]:
        row: dict[str, Any] = {"id": self.id, "prompt": self.prompt, "expect": self.expect}
        if self.tags:
            row["tags"] = self.tags
        if self.metadata:
            row["metadata"] = self.metadata
        return row


@dataclass
class ImportReport:
    source: str
    fmt: str
    folder: Path | None = None
    rows: int = 0
    fixtures: int = 0
    #: "source field -> golden field": rows it applied to
    mapped: Counter[str] = field(default_factory=Counter)
    #: "source field (why)": rows it was dropped from
    dropped: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [
            f"imported {self.rows} row(s) from {self.source} ({self.fmt}) into {self.folder}",
            f"  fixtures written: {self.fixtures}",
            "  mapped:",
        ]
        out += [f"    {k}: {n} row(s)" for k, n in sorted(self.mapped.items())] or ["    -"]
        out.append("  dropped:")
        out += [f"    {k}: {n} row(s)" for k, n in sorted(self.dropped.items())] or ["    -"]
        out += [f"  note: {n}" for n in self.notes]
        return out


def _err(where: str, fld: str | None, message: str, hint: str) -> DatasetError:
    at = f"{where}: {fld}: " if fld else f"{where}: "
    return DatasetError(f"{at}{message}", hint=hint)


# --------------------------------------------------------------------------- shared mapping


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int | float | bool):
        return str(value)
    return None


def _first(record: dict[str, Any], names: tuple[str, ...]) -> str | None:
    for name in names:
        if name in record and record[name] not in (None, ""):
            return name
    return None


def _json_or_text(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value


def map_record(record: dict[str, Any], where: str, report: ImportReport) -> Row:
    """A flat record (a CSV line, a Hugging Face row) as a golden row.

    ``id``; the prompt from the first of :data:`PROMPT_NAMES`; an answer from the first of
    :data:`ANSWER_NAMES` becomes the fixture and, unless ``expect.*`` columns say otherwise,
    ``expect.equals`` (normalize: all); ``expect.KEY`` columns (JSON or text) become expect
    keys; ``tags`` (comma or space separated, or a list); the rest goes to ``metadata``.
    """
    row = Row(where=where)
    used: set[str] = set()
    if record.get("id") not in (None, ""):
        row.id = _text(record["id"])
        used.add("id")
        report.mapped["id -> id"] += 1
    prompt_key = _first(record, PROMPT_NAMES)
    if prompt_key is None:
        raise _err(
            where,
            None,
            f"no prompt: none of the columns {', '.join(PROMPT_NAMES)} has a value",
            "add a prompt column (or rename yours to `prompt`)",
        )
    row.prompt = _text(record[prompt_key])
    if row.prompt is None:
        raise _err(where, prompt_key, "must be text", "write the prompt as a string")
    used.add(prompt_key)
    report.mapped[f"{prompt_key} -> prompt"] += 1
    for key, value in record.items():
        if key.startswith("expect.") and value not in (None, ""):
            name = key[len("expect.") :]
            row.expect[name] = _json_or_text(value) if isinstance(value, str) else value
            used.add(key)
            report.mapped[f"{key} -> expect.{name}"] += 1
    answer_key = _first(record, ANSWER_NAMES)
    if answer_key is not None:
        answer = _text(record[answer_key])
        if answer is None:
            raise _err(where, answer_key, "must be text", "write the expected answer as a string")
        used.add(answer_key)
        row.fixture = answer
        report.mapped[f"{answer_key} -> fixtures/<id>.out.md"] += 1
        if not row.expect:
            row.expect = {"equals": answer, "normalize": "all"}
            report.mapped[f"{answer_key} -> expect.equals (normalize: all)"] += 1
    if record.get("tags") not in (None, ""):
        row.tags = _tags(record["tags"], where)
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


def _tags(value: Any, where: str) -> list[str]:
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
            raise _err(
                where,
                "tags",
                f"tag {item!r} cannot be a pytest marker name",
                "use letters, digits and _ (starting with a letter), 64 at most",
            )
        tags.append(tag)
    return tags


# --------------------------------------------------------------------------- sources


def read_csv(path: Path, report: ImportReport) -> list[Row]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _err(
            str(path),
            None,
            f"not UTF-8 text ({exc.reason} at byte {exc.start})",
            "save the file as UTF-8 CSV",
        ) from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    if not reader.fieldnames:
        raise _err(str(path), None, "no header line", "the first line must name the columns")
    rows = []
    line = 1
    for record in reader:
        where = f"{path}:{line + 1}"
        line = reader.line_num
        if None in record:
            raise _err(
                where,
                None,
                "more values than header columns",
                "quote values that contain commas, or add the missing column names",
            )
        rows.append(map_record(dict(record), where, report))
    return rows


def _hf_files(folder: Path, split: str | None) -> list[tuple[Path, str | None]]:
    """The data files of a saved Hugging Face dataset (one split or a DatasetDict)."""
    info = folder / "dataset_dict.json"
    if info.is_file():
        try:
            splits = json.loads(info.read_text(encoding="utf-8")).get("splits") or []
        except (ValueError, AttributeError):
            raise _err(str(info), None, "not valid JSON", "re-save the dataset") from None
        if split is not None:
            if split not in splits:
                raise _err(
                    str(info),
                    "splits",
                    f"no split {split!r} (have {', '.join(splits)})",
                    "pass --split with one of those names",
                )
            splits = [split]
        found = []
        for name in splits:
            found += [(p, name) for p, _ in _hf_files(folder / name, None)]
        return found
    files = sorted(
        p
        for p in folder.iterdir()
        if p.is_file()
        and p.suffix in (".jsonl", ".json", ".arrow", ".parquet")
        and p.name not in ("dataset_info.json", "state.json", "dataset_dict.json")
    )
    return [(p, None) for p in files]


def _arrow_records(path: Path) -> Iterator[dict[str, Any]]:
    try:  # optional: pyarrow reads .arrow/.parquet; JSON lines need nothing
        import pyarrow as pa  # type: ignore[import-not-found, import-untyped, unused-ignore]
        import pyarrow.parquet as pq  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        raise _err(
            str(path),
            None,
            f"reading {path.suffix} files needs pyarrow, which is not installed",
            "pip install pyarrow, or export the dataset as JSON lines "
            "(dataset.to_json('rows.jsonl')) and import that folder or file",
        ) from None
    if path.suffix == ".parquet":
        table = pq.read_table(path)
    else:
        with pa.memory_map(str(path)) as source:
            try:
                table = pa.ipc.open_stream(source).read_all()
            except pa.ArrowInvalid:
                table = pa.ipc.open_file(source).read_all()
    yield from table.to_pylist()


def _json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as exc:
                raise _err(
                    f"{path}:{n}",
                    None,
                    f"not valid JSON ({exc.msg})",
                    "Hugging Face JSON exports hold one object per line",
                ) from None


def read_hf(path: Path, report: ImportReport, split: str | None) -> list[Row]:
    files = [(path, None)] if path.is_file() else _hf_files(path, split)
    if not files:
        raise _err(
            str(path),
            None,
            "no data files (*.jsonl, *.json, *.arrow, *.parquet)",
            "point at the folder of dataset.save_to_disk() or dataset.to_json()",
        )
    rows = []
    for file, split_name in files:
        if file.suffix in (".arrow", ".parquet"):
            records: Iterator[tuple[str, Any]] = (
                (f"{file} row {n}", r) for n, r in enumerate(_arrow_records(file), 1)
            )
        else:
            records = ((f"{file}:{n}", r) for n, r in _json_lines(file))
        for where, record in records:
            if not isinstance(record, dict):
                raise _err(where, None, "not an object", "each row must be a JSON object")
            row = map_record(record, where, report)
            if split_name:
                row.tags.append(_tags(split_name, where)[0])
                report.mapped["split -> tags"] += 1
            rows.append(row)
    return rows


# promptfoo assertion type -> how it becomes expect keys
_PF_SIMPLE = {
    "contains": "contains",
    "icontains": "contains",
    "contains-any": "contains_any",
    "icontains-any": "contains_any",
    "contains-all": "contains",
    "icontains-all": "contains",
    "equals": "equals",
    "regex": "regex",
    "not-regex": "not_regex",
    "contains-json": "json_schema",
    "is-json": "json_schema",
    "similar": "similar_to",
}


def _yaml_items(text: str, path: Path) -> tuple[Any, list[int]]:
    """The document and the line of each test (when the tests are a list in this file)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise _err(
            f"{path}{line}",
            None,
            f"not valid YAML ({getattr(exc, 'problem', exc)})",
            "fix the YAML syntax",
        ) from None
    lines: list[int] = []
    seq = node
    if isinstance(node, yaml.MappingNode):
        seq = next((v for k, v in node.value if getattr(k, "value", None) == "tests"), None)
    if isinstance(seq, yaml.SequenceNode):
        lines = [item.start_mark.line + 1 for item in seq.value]
    return data, lines


def _render(template: str, variables: dict[str, Any]) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        return str(variables[name]) if name in variables else m.group(0)

    return re.sub(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}", sub, template)


def read_promptfoo(path: Path, report: ImportReport) -> list[Row]:
    data, lines = _yaml_items(path.read_text(encoding="utf-8"), path)
    template = None
    tests = data
    if isinstance(data, dict):
        tests = data.get("tests")
        prompts = data.get("prompts")
        if isinstance(prompts, list) and len(prompts) == 1 and isinstance(prompts[0], str):
            template = prompts[0]
        elif isinstance(prompts, str):
            template = prompts
        elif prompts:
            report.notes.append(
                "several prompts in the config: each row takes its prompt "
                "from its vars (prompt/question/input/query)"
            )
        default = data.get("defaultTest")
        if default:
            report.dropped["defaultTest (apply it to the rows by hand)"] += 1
    if not isinstance(tests, list):
        raise _err(
            str(path),
            "tests",
            "no list of tests",
            "a promptfoo test file is a YAML list of tests, or a config with `tests:`",
        )
    rows = []
    for n, test in enumerate(tests):
        where = f"{path}:{lines[n]}" if n < len(lines) else f"{path} test {n + 1}"
        if not isinstance(test, dict):
            raise _err(where, None, "a test must be a mapping", "write `- vars: {...}`")
        variables = test.get("vars") or {}
        if not isinstance(variables, dict):
            raise _err(
                where,
                "vars",
                "must be a mapping of names to values",
                "write `vars: {question: ...}`",
            )
        row = Row(where=where)
        if template is not None:
            row.prompt = _render(template, variables)
            missing = re.findall(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}", row.prompt)
            if missing:
                raise _err(
                    where,
                    f"vars.{missing[0]}",
                    "the prompt uses it but the test has no such var",
                    f"add `{missing[0]}` to the test's vars",
                )
            report.mapped["prompts[0] + vars -> prompt (rendered)"] += 1
            row.metadata["vars"] = variables
        else:
            key = _first(variables, PROMPT_NAMES)
            if key is None:
                raise _err(
                    where,
                    "vars",
                    f"no prompt: none of {', '.join(PROMPT_NAMES)} is set "
                    "and the file has no single prompt template",
                    "add `prompt:` to vars, or import the promptfooconfig with `prompts:`",
                )
            row.prompt = _text(variables[key])
            report.mapped[f"vars.{key} -> prompt"] += 1
            rest = {k: v for k, v in variables.items() if k != key}
            if rest:
                row.metadata["vars"] = rest
                report.mapped["other vars -> metadata.vars"] += 1
        if test.get("description"):
            row.id = _slug(str(test["description"]))
            row.metadata["description"] = test["description"]
            report.mapped["description -> id, metadata.description"] += 1
        for k in ("options", "metadata", "threshold", "provider"):
            if k in test:
                report.dropped[f"{k} (no golden equivalent)"] += 1
        for m, assertion in enumerate(test.get("assert") or []):
            _pf_assert(row, assertion, f"assert[{m}]", report)
        if not row.expect:
            raise _err(
                where,
                "assert",
                "no assertion that goldeval can grade",
                "add a contains/equals/regex/is-json assertion, or write expect by hand",
            )
        rows.append(row)
    return rows


def _pf_assert(row: Row, assertion: Any, fld: str, report: ImportReport) -> None:
    if not isinstance(assertion, dict) or not isinstance(assertion.get("type"), str):
        raise _err(row.where, fld, "an assertion needs a `type`", "write `- type: contains`")
    kind = assertion["type"]
    value = assertion.get("value")
    negate = kind.startswith("not-") and kind not in ("not-regex",)
    base = kind[4:] if negate else kind
    target = _PF_SIMPLE.get(base)
    if negate and base in ("contains", "icontains"):
        row.expect.setdefault("not_regex", [])
        if not isinstance(row.expect["not_regex"], list):
            row.expect["not_regex"] = [row.expect["not_regex"]]
        row.expect["not_regex"].append(
            ("(?i)" if base == "icontains" else "") + re.escape(str(value))
        )
        report.mapped[f"assert {kind} -> expect.not_regex"] += 1
        return
    if target is None or negate:
        report.dropped[
            f"assert {kind} (no goldeval grader; grade it by hand or with a grader of your own)"
        ] += 1
        return
    if target == "contains":
        # every substring must occur: one escaped pattern each (regex: each must match)
        items = value if isinstance(value, list) else [value]
        row.expect.setdefault("regex", [])
        if not isinstance(row.expect["regex"], list):
            row.expect["regex"] = [row.expect["regex"]]
        flag = "(?i)" if base.startswith("i") else ""
        row.expect["regex"] += [flag + re.escape(str(v)) for v in items]
        how = " (case-insensitive)" if flag else ""
        report.mapped[f"assert {kind} -> expect.regex{how}"] += 1
        return
    elif target == "contains_any":
        items = value if isinstance(value, list) else [value]
        if base.startswith("i"):
            row.expect["regex"] = "(?i)" + "|".join(re.escape(str(v)) for v in items)
            report.mapped[f"assert {kind} -> expect.regex (case-insensitive)"] += 1
            return
        row.expect["contains_any"] = [str(v) for v in items]
    elif target == "json_schema":
        row.expect["json_schema"] = value if isinstance(value, dict) else {}
    elif target == "similar_to":
        row.expect["similar_to"] = str(value)
        if assertion.get("threshold") is not None:
            row.expect["similarity_threshold"] = assertion["threshold"]
    elif target == "equals" and not isinstance(value, str):
        row.expect["json_equals"] = value
        target = "json_equals"
    else:
        row.expect[target] = value
    report.mapped[f"assert {kind} -> expect.{target}"] += 1


def _json_array_items(text: str, path: Path) -> list[tuple[int, Any]]:
    """The items of a top-level JSON array, each with the line it starts on."""
    decoder = json.JSONDecoder()
    pos = len(text) - len(text.lstrip())
    if not text[pos : pos + 1] == "[":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise _err(
                f"{path}:{exc.lineno}", None, f"not valid JSON ({exc.msg})", "fix the JSON syntax"
            ) from None
        goldens = data.get("goldens") if isinstance(data, dict) else None
        if isinstance(goldens, list):
            return [(1, g) for g in goldens]
        raise _err(
            str(path),
            None,
            "expected a JSON list of goldens",
            "save the dataset with EvaluationDataset.save_as(file_type='json')",
        )
    pos += 1
    items: list[tuple[int, Any]] = []
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text):
            raise _err(
                f"{path}:{text.count(chr(10)) + 1}",
                None,
                "unterminated list",
                "fix the JSON syntax",
            )
        if text[pos] == "]":
            return items
        line = text.count("\n", 0, pos) + 1
        try:
            item, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _err(
                f"{path}:{exc.lineno}", None, f"not valid JSON ({exc.msg})", "fix the JSON syntax"
            ) from None
        items.append((line, item))


_DE_DROPPED = {
    "context": "context (no golden equivalent; kept in metadata)",
    "retrieval_context": "retrieval_context (goldeval retrieves from the pack; kept in metadata)",
}


def read_deepeval(path: Path, report: ImportReport) -> list[Row]:
    rows = []
    for line, golden in _json_array_items(path.read_text(encoding="utf-8"), path):
        where = f"{path}:{line}"
        if not isinstance(golden, dict):
            raise _err(where, None, "a golden must be an object", 'write {"input": ...}')
        if not isinstance(golden.get("input"), str) or not golden["input"].strip():
            raise _err(where, "input", "missing or not text", "every golden needs an input")
        row = Row(where=where, prompt=golden["input"])
        report.mapped["input -> prompt"] += 1
        name = golden.get("name") or golden.get("id")
        if name:
            row.id = _slug(str(name))
            report.mapped["name -> id"] += 1
        expected = golden.get("expected_output")
        actual = golden.get("actual_output")
        if expected is not None:
            if not isinstance(expected, str):
                raise _err(where, "expected_output", "must be text", "write it as a string")
            row.expect = {"equals": expected, "normalize": "all"}
            report.mapped["expected_output -> expect.equals (normalize: all)"] += 1
        if isinstance(actual, str):
            row.fixture = actual
            report.mapped["actual_output -> fixtures/<id>.out.md"] += 1
        elif isinstance(expected, str):
            row.fixture = expected
            report.mapped["expected_output -> fixtures/<id>.out.md"] += 1
        expected_tools = golden.get("expected_tools")
        if expected_tools:
            row.expect["tool_calls"] = [
                _de_tool(t, where, "expected_tools") for t in expected_tools
            ]
            report.mapped["expected_tools -> expect.tool_calls"] += 1
        tools_called = golden.get("tools_called")
        if tools_called:
            row.sidecar = {"toolCalls": [_de_tool(t, where, "tools_called") for t in tools_called]}
            row.fixture = row.fixture or ""
            report.mapped["tools_called -> fixtures/<id>.out.json toolCalls"] += 1
        for key in (
            "context",
            "retrieval_context",
            "additional_metadata",
            "comments",
            "source_file",
        ):
            if golden.get(key) not in (None, "", [], {}):
                row.metadata[key] = golden[key]
                report.mapped[f"{key} -> metadata.{key}"] += 1
        known = {
            "input",
            "name",
            "id",
            "expected_output",
            "actual_output",
            "expected_tools",
            "tools_called",
            "context",
            "retrieval_context",
            "additional_metadata",
            "comments",
            "source_file",
        }
        for key in golden:
            if key not in known and golden[key] not in (None, "", [], {}):
                report.dropped[f"{key} (not a golden field)"] += 1
        if not row.expect:
            raise _err(
                where,
                "expected_output",
                "no expected output or expected tools",
                "add expected_output (or expected_tools), or write expect by hand",
            )
        rows.append(row)
    return rows


def _de_tool(tool: Any, where: str, fld: str) -> dict[str, Any]:
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        raise _err(where, fld, "each tool call needs a name", 'write {"name": ...}')
    args = tool.get("input_parameters") or tool.get("arguments") or {}
    if not isinstance(args, dict):
        raise _err(
            where,
            f"{fld}.input_parameters",
            "must be an object",
            "write the arguments as a JSON object",
        )
    return {"name": tool["name"], "arguments": args}


# --------------------------------------------------------------------------- writing


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text.strip()).strip("-._").lower()
    return slug[:60] or "row"


def _assign_ids(rows: list[Row]) -> None:
    seen: set[str] = set()
    for n, row in enumerate(rows, 1):
        base = row.id if row.id else f"row-{n:04d}"
        if not SAFE_ID.match(base):
            slug = _slug(base)
            if not SAFE_ID.match(slug):
                raise _err(
                    row.where,
                    "id",
                    f"{base!r} cannot be a case id",
                    "use letters, digits, '.', '_' or '-' (128 at most)",
                )
            base = slug
        case_id, k = base, 2
        while case_id in seen:
            case_id, k = f"{base}-{k}", k + 1
        seen.add(case_id)
        row.id = case_id


def detect_format(path: Path) -> str:
    if path.is_dir():
        return "hf"
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".yaml", ".yml"):
        return "promptfoo"
    if suffix == ".json":
        return "deepeval"
    if suffix == ".jsonl":
        return "hf"
    raise GoldevalError(
        f"{path}: cannot tell the format from the name; pass --format ({', '.join(FORMATS)})"
    )


def import_dataset(
    source: Path,
    name: str,
    golden_root: Path,
    fmt: str | None = None,
    split: str | None = None,
) -> ImportReport:
    """Build ``golden_root/name`` from ``source``; nothing is written on any error."""
    if not _NAME.match(name):
        raise GoldevalError(
            f"dataset name {name!r}: use lower-case letters, digits, '-' or "
            "'_', starting with a letter (e.g. support-bot)"
        )
    if not source.exists():
        raise GoldevalError(f"{source}: no such file or folder")
    fmt = fmt or detect_format(source)
    target = golden_root / name
    if target.exists() or target.is_symlink():
        raise GoldevalError(f"{target} exists already: choose another --name or remove it")
    report = ImportReport(source=str(source), fmt=fmt)
    try:
        if fmt == "csv":
            rows = read_csv(source, report)
        elif fmt == "hf":
            rows = read_hf(source, report, split)
        elif fmt == "promptfoo":
            rows = read_promptfoo(source, report)
        elif fmt == "deepeval":
            rows = read_deepeval(source, report)
        else:
            raise GoldevalError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    except UnicodeDecodeError as exc:
        raise GoldevalError(f"{source}: not UTF-8 text ({exc.reason})") from None
    if not rows:
        raise GoldevalError(f"{source}: no rows to import")
    _assign_ids(rows)
    if any(r.sidecar for r in rows):
        report.notes.append("recorded tool calls are replayed from fixtures/<id>.out.json")
    created_root = not golden_root.exists()
    golden_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.import-", dir=golden_root))
    done = False
    try:
        _write(tmp, name, source, fmt, rows, report)
        # The plugin's own loader: an imported row the plugin would refuse is refused here.
        try:
            load_dataset(
                tmp,
                project_root=golden_root.parent,
                graders=builtin_graders(),
                require_fixtures=False,
            )
        except GoldevalError as exc:
            raise _at_source(exc, rows) from None
        os.rename(tmp, target)
        done = True
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        if not done and created_root:
            shutil.rmtree(golden_root, ignore_errors=True)  # nothing written on error
    report.folder = target
    report.rows = len(rows)
    return report


def _write(
    folder: Path, name: str, source: Path, fmt: str, rows: list[Row], report: ImportReport
) -> None:
    version = f"{name}-v1"
    manifest = (
        f"# Imported by `goldeval import` from {source.name} ({fmt}); review the rows.\n"
        f"version: {version}\nname: {name}\n"
        f"description: {json.dumps(f'Imported from {source.name} ({fmt}).')}\n"
        f'changelog:\n  - "{version}: imported {len(rows)} rows."\npack: none\n'
    )
    (folder / "dataset.yaml").write_text(manifest, encoding="utf-8")
    with (folder / f"{name}.jsonl").open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row.dump(), ensure_ascii=False) + "\n")
    with_fixture = [r for r in rows if r.fixture is not None]
    if with_fixture:
        (folder / "fixtures").mkdir()
    for row in with_fixture:
        assert row.fixture is not None and row.id is not None
        (folder / "fixtures" / f"{row.id}.out.md").write_text(row.fixture, encoding="utf-8")
        if row.sidecar:
            (folder / "fixtures" / f"{row.id}.out.json").write_text(
                dumps_sidecar(row.sidecar), encoding="utf-8"
            )
    report.fixtures = len(with_fixture)
    missing = len(rows) - len(with_fixture)
    if missing:
        report.notes.append(
            f"{missing} row(s) have no answer in the source: record their "
            f"fixtures with pytest --golden={version} --golden-mode=record"
        )


def _at_source(exc: GoldevalError, rows: list[Row]) -> GoldevalError:
    """The loader's errors about the rows that would have been written, told at the source
    row each came from (its file and line), with the loader's field and hint."""
    errors = getattr(exc, "errors", None) or [exc]
    lines = []
    for err in errors:
        line = getattr(err, "line", None)
        if isinstance(err, GoldevalError) and isinstance(line, int) and 0 < line <= len(rows):
            fld = f"{err.field}: " if err.field else ""
            hint = f" ({err.hint})" if err.hint else ""
            lines.append(f"{rows[line - 1].where}: {fld}{err.message}{hint}")
        else:
            lines.append(str(err))
    return DatasetError("\n".join(lines))
