"""Readers of CSV files, Hugging Face folders and DeepEval goldens: rows with their position.

Every input goes through :mod:`goldeval.cli.importers.bounded` (sizes, JSON depth, CSV field
limit, plain JSON values); every failure is a usage error naming the file, line and field.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from goldeval.cli.importers.bounded import (
    bounded_records,
    check_rows,
    csv_field_limit,
    input_lines,
    json_data,
    read_input,
    read_text,
)
from goldeval.cli.importers.mapping import map_record, slug, tags_of
from goldeval.cli.importers.model import ImportReport, Row, import_error
from goldeval.core.limits import (
    LimitExceeded,
    default,
    describe_bytes,
    json_depth_exceeds,
    loads_json,
)
from goldeval.core.textsafe import one_line

# --------------------------------------------------------------------------- CSV


def read_csv(path: Path, report: ImportReport) -> list[Row]:
    # The file is read a line at a time; ``pending`` keeps the lines of the record being read
    # (the csv module counts them in line_num), to find a long field's line and column.
    pending: list[str] = []

    def lines() -> Iterator[str]:
        for _, text in input_lines(path, encoding="utf-8-sig"):
            # a lone \r ends a line too, as in the csv module's own reading (newline="")
            pieces = io.StringIO(text, newline="").readlines() if "\r" in text else [text]
            for piece in pieces:
                pending.append(piece)
                yield piece

    with csv_field_limit() as limit:
        reader = csv.DictReader(lines())
        try:
            fieldnames = reader.fieldnames
        except csv.Error as exc:
            raise _csv_error(path, pending, 0, None, exc, limit) from None
        if not fieldnames:
            raise import_error(
                str(path), None, "no header line", "the first line must name the columns"
            )
        rows = []
        start = reader.line_num  # lines read so far: the next record starts after them
        pending.clear()
        while True:
            try:
                record = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                raise _csv_error(path, pending, start, list(fieldnames), exc, limit) from None
            where = f"{path}:{start + 1}"
            start = reader.line_num
            pending.clear()
            if None in record:
                raise import_error(
                    where,
                    None,
                    "more values than header columns",
                    "quote values that contain commas, or add the missing column names",
                )
            rows.append(map_record(dict(record), where, report))
    return rows


def _csv_error(
    path: Path,
    record_lines: list[str],
    start: int,
    fieldnames: list[str] | None,
    exc: csv.Error,
    limit: int,
) -> Exception:
    """The csv module's error at the record starting after line ``start`` (its lines read so
    far: ``record_lines``), told as file:line and, for a field over the limit, its column."""
    if "field larger than field limit" not in str(exc):
        return import_error(
            f"{path}:{start + 1}", None, f"not valid CSV ({exc})", "check the quoting of this line"
        )
    line, index, size = _long_field(record_lines, start, limit)
    if fieldnames is None:
        column = "header"
    elif index < len(fieldnames):
        column = f"column {fieldnames[index]!r}"
    else:
        column = f"column {index + 1}"
    return LimitExceeded(
        "import_csv_field",
        f"{column}: a field of {size} characters, over the limit of {describe_bytes(limit)} "
        "(import_csv_field)",
        path=f"{path}:{line}",
        hint="shorten the value or keep long texts out of the CSV (e.g. in the fixture files)",
    )


def _long_field(rest: list[str], start: int, limit: int) -> tuple[int, int, int]:
    """(line, index, size) of the first field over ``limit`` in the record after line
    ``start``, whose lines read so far are ``rest``; re-read with the limit lifted to their
    size (already in memory, file_bytes-bound)."""
    csv.field_size_limit(max(limit, sum(len(x) for x in rest)) + 1)
    reader = csv.reader(iter(rest))
    record: list[str] = []
    first = 0
    while record == []:
        first = reader.line_num
        record = next(reader, [])
        if reader.line_num == first:
            break  # end of input
    for index, value in enumerate(record):
        if len(value) > limit:
            return start + first + 1, index, len(value)
    return start + first + 1, 0, 0


# --------------------------------------------------------------------------- Hugging Face

#: Hugging Face split names (datasets.splits: ``\w+(\.\w+)*``): never ``.``, ``..`` or a path.
_SPLIT_NAME = re.compile(r"\w+(\.\w+)*", re.ASCII)
_DATA_SUFFIXES = (".jsonl", ".json", ".arrow", ".parquet")
_NOT_DATA = ("dataset_info.json", "state.json", "dataset_dict.json")


def _hf_files(folder: Path, split: str | None) -> list[tuple[Path, str | None]]:
    """The data files of a saved Hugging Face dataset (one split or a DatasetDict)."""
    info = folder / "dataset_dict.json"
    if not info.is_file():
        return [(p, None) for p in _data_files(folder)]
    splits = _split_names(info)
    if split is not None:
        if split not in splits:
            raise import_error(
                str(info),
                "splits",
                f"no split {split!r} (have {', '.join(splits)})",
                "pass --split with one of those names",
            )
        splits = [split]
    found: list[tuple[Path, str | None]] = []
    for name in splits:
        found += [(p, name) for p in _data_files(_split_folder(folder, name, info))]
    return found


def _split_names(info: Path) -> list[str]:
    try:
        data = loads_json(read_text(info), what="dataset_dict.json", path=info)
    except ValueError as exc:
        raise import_error(
            str(info), None, f"not valid JSON ({exc})", "re-save the dataset"
        ) from None
    splits = data.get("splits") if isinstance(data, dict) else None
    if not isinstance(splits, list) or not all(isinstance(s, str) for s in splits):
        raise import_error(
            str(info),
            "splits",
            "must be a list of split names",
            'write {"splits": ["train", "test"]}, or re-save the dataset',
        )
    for name in splits:
        if not _SPLIT_NAME.fullmatch(name):
            raise import_error(
                str(info),
                "splits",
                f"{name!r} is not a split name",
                "split names are letters, digits and _ (dots between them); "
                "never '.', '..' or a path",
            )
    if len(set(splits)) != len(splits):
        raise import_error(str(info), "splits", "a split is listed twice", "list each split once")
    return splits


def _split_folder(folder: Path, name: str, info: Path) -> Path:
    """The folder of split ``name``: a real folder inside ``folder``, not a link out."""
    split_dir = folder / name
    inside = split_dir.resolve().parent == folder.resolve()
    if split_dir.is_symlink() or not split_dir.is_dir() or not inside:
        raise import_error(
            str(info),
            "splits",
            f"split {name!r} has no folder {name}/ inside {folder}",
            "each split is a folder next to dataset_dict.json (not a link)",
        )
    return split_dir


def _data_files(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.iterdir()
        if p.is_file() and p.suffix in _DATA_SUFFIXES and p.name not in _NOT_DATA
    )


def _arrow_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """The rows of an ``.arrow``/``.parquet`` file as plain JSON data, with their position."""
    for n, record in enumerate(_arrow_table(path), 1):
        where = f"{path} row {n}"
        yield where, {str(k): json_data(v, where=where, field=str(k)) for k, v in record.items()}


def _arrow_table(path: Path) -> list[dict[str, Any]]:
    try:  # optional: pyarrow reads .arrow/.parquet; JSON lines need nothing
        import pyarrow as pa  # type: ignore[import-not-found, import-untyped, unused-ignore]
        import pyarrow.parquet as pq  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        raise import_error(
            str(path),
            None,
            f"reading {path.suffix} files needs pyarrow, which is not installed",
            "pip install pyarrow, or export the dataset as JSON lines "
            "(dataset.to_json('rows.jsonl')) and import that folder or file",
        ) from None
    limit = int(default("file_bytes"))
    # Read into memory first (bounded by file_bytes) and decoded from a pyarrow buffer: reading
    # through a Python file object lets pyarrow's IO threads call back into Python, and one still
    # alive at interpreter exit aborted the process ("terminate called without an active
    # exception", exit -6), about once in 60 imports of a corrupt file and after good imports.
    data = read_input(path)
    try:
        source = pa.BufferReader(data)
        if path.suffix == ".parquet":
            parquet = pq.ParquetFile(source, pre_buffer=False)
            check_rows(parquet.metadata.num_rows, path)
            # 64 rows at a time: a dictionary-encoded column of 848 bytes held 2,500 copies
            # of a 1 MiB string, decoded whole into 1.8 GB (its metadata said 1 MB)
            batches: Iterator[Any] = parquet.iter_batches(batch_size=64, use_threads=False)
        else:
            try:
                batches = iter(pa.ipc.open_stream(source))
            except pa.ArrowInvalid:
                whole = pa.ipc.open_file(pa.BufferReader(data))
                batches = (whole.get_batch(i) for i in range(whole.num_record_batches))
        records = bounded_records(batches, path, limit)
    except (pa.ArrowException, OSError) as exc:
        raise import_error(
            str(path),
            None,
            f"not a readable {path.suffix} file ({one_line(exc)[:300]})",
            "re-export the dataset (or export it as JSON lines)",
        ) from None
    return records


def _json_lines(path: Path) -> Iterator[tuple[str, Any]]:
    for n, line in input_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        try:
            value = loads_json(line, what="the line", path=where)
        except ValueError as exc:
            msg = getattr(exc, "msg", str(exc))
            raise import_error(
                where,
                None,
                f"not valid JSON ({msg})",
                "Hugging Face JSON exports hold one object per line",
            ) from None
        yield where, json_data(value, where=where, field="")


def read_hf(path: Path, report: ImportReport, split: str | None) -> list[Row]:
    files = [(path, None)] if path.is_file() else _hf_files(path, split)
    if not files:
        raise import_error(
            str(path),
            None,
            "no data files (*.jsonl, *.json, *.arrow, *.parquet)",
            "point at the folder of dataset.save_to_disk() or dataset.to_json()",
        )
    rows = []
    for file, split_name in files:
        records = (
            _arrow_records(file) if file.suffix in (".arrow", ".parquet") else _json_lines(file)
        )
        for where, record in records:
            if not isinstance(record, dict):
                raise import_error(where, None, "not an object", "each row must be a JSON object")
            row = map_record(record, where, report)
            if split_name:
                row.tags.append(tags_of(split_name, where)[0])
                report.mapped["split -> tags"] += 1
            rows.append(row)
    return rows


# --------------------------------------------------------------------------- DeepEval


def _decode_at(
    decoder: json.JSONDecoder, text: str, pos: int, path: Path, line: int
) -> tuple[Any, int]:
    """One JSON value at ``pos``: depth-bounded, plain JSON data, errors at their line."""
    limit = int(default("json_depth"))
    deep = LimitExceeded(
        "json_depth", f"the golden is nested deeper than {limit} levels", path=f"{path}:{line}"
    )
    try:
        item, end = decoder.raw_decode(text, pos)
    except RecursionError:
        raise deep from None
    except json.JSONDecodeError as exc:
        raise import_error(
            f"{path}:{exc.lineno}", None, f"not valid JSON ({exc.msg})", "fix the JSON syntax"
        ) from None
    except ValueError as exc:  # e.g. an integer longer than Python converts (4300 digits)
        raise import_error(
            f"{path}:{line}", None, f"not valid JSON ({exc})", "fix the value"
        ) from None
    if json_depth_exceeds(item, limit):
        raise deep
    return json_data(item, where=f"{path}:{line}", field=""), end


def _json_array_items(text: str, path: Path) -> list[tuple[int, Any]]:
    """The items of a top-level JSON array, each with the line it starts on."""
    decoder = json.JSONDecoder()
    pos = len(text) - len(text.lstrip())
    if not text[pos : pos + 1] == "[":
        data, _ = _decode_at(decoder, text, pos, path, 1)
        goldens = data.get("goldens") if isinstance(data, dict) else None
        if isinstance(goldens, list):
            return [(1, g) for g in goldens]
        raise import_error(
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
            raise import_error(
                f"{path}:{text.count(chr(10)) + 1}",
                None,
                "unterminated list",
                "fix the JSON syntax",
            )
        if text[pos] == "]":
            return items
        line = text.count("\n", 0, pos) + 1
        item, pos = _decode_at(decoder, text, pos, path, line)
        items.append((line, item))


def read_deepeval(path: Path, report: ImportReport) -> list[Row]:
    return [
        _golden_row(golden, f"{path}:{line}", report)
        for line, golden in _json_array_items(read_text(path), path)
    ]


_DE_KNOWN = {
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


def _golden_row(golden: Any, where: str, report: ImportReport) -> Row:
    report.admit(where)
    if not isinstance(golden, dict):
        raise import_error(where, None, "a golden must be an object", 'write {"input": ...}')
    if not isinstance(golden.get("input"), str) or not golden["input"].strip():
        raise import_error(where, "input", "missing or not text", "every golden needs an input")
    row = Row(where=where, prompt=golden["input"])
    report.mapped["input -> prompt"] += 1
    if golden.get("name"):  # a title: its slug is the id (documented, not a rename)
        row.id = slug(str(golden["name"]))
        report.mapped["name -> id"] += 1
    elif golden.get("id") not in (None, ""):  # an id: kept, or renamed and reported
        row.id = str(golden["id"])
        report.mapped["id -> id"] += 1
    expected = golden.get("expected_output")
    actual = golden.get("actual_output")
    if expected is not None:
        if not isinstance(expected, str):
            raise import_error(where, "expected_output", "must be text", "write it as a string")
        row.expect = {"equals": expected, "normalize": "all"}
        report.mapped["expected_output -> expect.equals (normalize: all)"] += 1
    if isinstance(actual, str):
        row.fixture = actual
        report.mapped["actual_output -> fixtures/<id>.out.md"] += 1
    elif isinstance(expected, str):
        row.fixture = expected
        report.mapped["expected_output -> fixtures/<id>.out.md"] += 1
    _golden_tools(golden, row, where, report)
    for key in ("context", "retrieval_context", "additional_metadata", "comments", "source_file"):
        if golden.get(key) not in (None, "", [], {}):
            row.metadata[key] = golden[key]
            report.mapped[f"{key} -> metadata.{key}"] += 1
    for key in golden:
        if key not in _DE_KNOWN and golden[key] not in (None, "", [], {}):
            report.dropped[f"{key} (not a golden field)"] += 1
    if not row.expect:
        raise import_error(
            where,
            "expected_output",
            "no expected output or expected tools",
            "add expected_output (or expected_tools), or write expect by hand",
        )
    return row


def _golden_tools(golden: dict[str, Any], row: Row, where: str, report: ImportReport) -> None:
    expected_tools = golden.get("expected_tools")
    if expected_tools:
        if not isinstance(expected_tools, list):
            raise import_error(where, "expected_tools", "must be a list", "write [{...}]")
        row.expect["tool_calls"] = [_de_tool(t, where, "expected_tools") for t in expected_tools]
        report.mapped["expected_tools -> expect.tool_calls"] += 1
    tools_called = golden.get("tools_called")
    if tools_called:
        if not isinstance(tools_called, list):
            raise import_error(where, "tools_called", "must be a list", "write [{...}]")
        row.sidecar = {"toolCalls": [_de_tool(t, where, "tools_called") for t in tools_called]}
        row.fixture = row.fixture or ""
        report.mapped["tools_called -> fixtures/<id>.out.json toolCalls"] += 1


def _de_tool(tool: Any, where: str, fld: str) -> dict[str, Any]:
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        raise import_error(where, fld, "each tool call needs a name", 'write {"name": ...}')
    args = tool.get("input_parameters") or tool.get("arguments") or {}
    if not isinstance(args, dict):
        raise import_error(
            where,
            f"{fld}.input_parameters",
            "must be an object",
            "write the arguments as a JSON object",
        )
    return {"name": tool["name"], "arguments": args}
