"""The bounds of ``goldeval import``: every input it reads goes through these helpers.

- files are size-checked with ``fstat`` on the open descriptor (limit ``file_bytes``) and read
  at most one byte past the limit (a pipe has no size to check);
- JSON is parsed with :func:`goldeval.core.limits.loads_json` (depth-bounded);
- promptfoo YAML is composed by goldeval.core.bounded_yaml.BoundedYamlLoader, which counts
  aliases, nesting and the nodes an alias expands to while it composes (an alias bomb stops
  there, fast);
- CSV fields are capped with ``csv.field_size_limit`` (limit ``import_csv_field``);
- values from Arrow/parquet, YAML and JSON become plain JSON data (:func:`json_data`) or a
  clear error naming the field: NaN is a missing value, ±inf and bytes are refused, Decimal
  becomes a number when one says the same value, dates and times become ISO strings.
"""

from __future__ import annotations

import csv
import datetime
import math
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any, BinaryIO

from goldeval.cli.importers.model import import_error
from goldeval.core.limits import LimitExceeded, check_size, default

_REDUCE_HINT = "split the file or trim it; the limits are listed in docs/reliability.md"


# --------------------------------------------------------------------------- files


def open_input(path: Path) -> BinaryIO:
    """``path`` opened for reading after ``fstat`` on the open descriptor says it is a regular
    file within ``file_bytes``. Opened non-blocking: a FIFO would otherwise wait for a writer
    forever before any check could run."""
    limit = int(default("file_bytes"))
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise _unreadable(path, exc) from None
    fh = os.fdopen(fd, "rb")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise import_error(
                str(path),
                None,
                "not a regular file",
                "import a file (or a Hugging Face folder), not a pipe or device",
            )
        check_size(
            info.st_size, limit, what="the file", name="file_bytes", path=path, hint=_REDUCE_HINT
        )
    except BaseException:
        fh.close()
        raise
    return fh


def read_input(path: Path) -> bytes:
    """The bytes of ``path``, refused before reading when over ``file_bytes``."""
    limit = int(default("file_bytes"))
    with open_input(path) as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise _unreadable(path, exc) from None
    # the file may have grown since fstat: what was read counts too
    check_size(len(data), limit, what="the file", name="file_bytes", path=path, hint=_REDUCE_HINT)
    return data


def _unreadable(path: Path, exc: OSError) -> Exception:
    return import_error(
        str(path),
        None,
        f"cannot read it ({exc.strerror or exc})",
        "check the path and its permissions",
    )


def read_text(path: Path, *, encoding: str = "utf-8") -> str:
    """:func:`read_input` decoded; bad bytes are an error naming the line."""
    data = read_input(path)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise import_error(
            f"{path}:{line}",
            None,
            f"not UTF-8 text ({exc.reason} at byte {exc.start})",
            "save the file as UTF-8",
        ) from None


def input_lines(path: Path, *, encoding: str = "utf-8") -> Iterator[tuple[int, str]]:
    """The lines of ``path`` (split at ``\\n``, endings kept), numbered from 1 and decoded one
    at a time: an import holds one line of the file, not the file and a list of its lines
    (a 212 MB CSV took 1.3 GB that way). What is read counts against ``file_bytes`` as it is
    read; bad bytes name their line. ``utf-8-sig`` drops a byte order mark on the first line."""
    limit = int(default("file_bytes"))
    read = 0
    with open_input(path) as fh:
        number = 0
        while True:
            try:
                raw = fh.readline(limit - read + 1)
            except OSError as exc:
                raise _unreadable(path, exc) from None
            if not raw:
                return
            number += 1
            check_size(
                read + len(raw),
                limit,
                what="the file",
                name="file_bytes",
                path=path,
                hint=_REDUCE_HINT,
            )
            try:
                text = raw.decode(encoding if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                raise import_error(
                    f"{path}:{number}",
                    None,
                    f"not UTF-8 text ({exc.reason} at byte {read + exc.start})",
                    "save the file as UTF-8",
                ) from None
            read += len(raw)
            yield number, text


# --------------------------------------------------------------------------- table rows


def check_rows(rows: int, path: Path) -> None:
    most = int(default("import_rows"))
    if rows > most:
        raise import_error(
            str(path),
            None,
            f"{rows:,} rows, more than {most:,} (the import_rows limit)",
            "split the source into several datasets",
        )


def bounded_records(batches: Iterable[Any], path: Path, limit: int) -> list[dict[str, Any]]:
    """The rows of ``batches`` as Python data, stopped as soon as their decoded size passes
    ``file_bytes`` or their count ``import_rows`` (5,000,000 tiny rows took 1.25 GB and 17 s
    before the row limit looked; 12,000,000 a MemoryError)."""
    records: list[dict[str, Any]] = []
    decoded = 0
    for batch in batches:
        check_rows(len(records) + batch.num_rows, path)
        rows = batch.to_pylist()
        # counted as Python data: a dictionary-encoded batch's nbytes is its one dictionary
        decoded += sum(value_size(value) for row in rows for value in row.values())
        check_size(decoded, limit, what="the table (decoded)", name="file_bytes", path=path)
        records += rows
    return records


def value_size(value: Any) -> int:
    """About how many bytes ``value`` takes once written (texts by their length)."""
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, dict):
        return sum(value_size(k) + value_size(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return sum(value_size(v) for v in value) + 1
    return 8


# --------------------------------------------------------------------------- JSON data


def json_data(value: Any, *, where: str, field: str, depth: int = 1) -> Any:
    """``value`` as JSON data (what ``json.dumps(..., allow_nan=False)`` can write).

    NaN (pandas' missing value) becomes null; ±inf, bytes and other types are refused naming
    ``field``; Decimal becomes a number when a JSON number says the same value, else its
    text; date, time and datetime become ISO 8601 strings; tuples become lists.
    """
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return _float(value, where, field)
    if isinstance(value, Decimal):
        return _decimal(value, where, field)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, dict | list | tuple):
        limit = int(default("json_depth"))
        if depth > limit:
            raise LimitExceeded(
                "json_depth",
                f"{field or 'the value'} is nested deeper than {limit} levels",
                path=where,
                hint=_REDUCE_HINT,
            )
        if isinstance(value, dict):
            return {
                _key(k, where, field): json_data(
                    v, where=where, field=_join(field, k), depth=depth + 1
                )
                for k, v in value.items()
            }
        return [
            json_data(v, where=where, field=f"{field}[{i}]", depth=depth + 1)
            for i, v in enumerate(value)
        ]
    raise import_error(
        where,
        field or None,
        f"holds a {type(value).__name__} value, which JSON cannot hold",
        "convert the column to text or numbers, or drop it before importing",
    )


def _join(field: str, key: Any) -> str:
    return f"{field}.{key}" if field else str(key)


def _key(key: Any, where: str, field: str) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, int | float | bool) or key is None:
        return str(key)  # what json.dumps would write for it
    raise import_error(where, field or None, f"has a {type(key).__name__} key", "use text keys")


def _float(value: float, where: str, field: str) -> float | None:
    if math.isnan(value):
        return None
    if math.isinf(value):
        raise import_error(
            where,
            field or None,
            f"is {value}, which JSON cannot hold",
            "write a finite number, or leave the value empty",
        )
    return value


def _decimal(value: Decimal, where: str, field: str) -> int | float | str | None:
    if value.is_nan():
        return None
    if value.is_infinite():
        raise import_error(
            where,
            field or None,
            f"is {value}, which JSON cannot hold",
            "write a finite number, or leave the value empty",
        )
    if value == value.to_integral_value() and value.adjusted() < 300:
        return int(value)
    as_float = float(value)
    if math.isfinite(as_float) and Decimal(repr(as_float)) == value:
        return as_float
    return str(value)  # e.g. 0.1000000000000000000001: a float would change it


# --------------------------------------------------------------------------- CSV


@contextmanager
def csv_field_limit() -> Iterator[int]:
    """``csv.field_size_limit`` set to ``import_csv_field`` for the block, then restored."""
    limit = int(default("import_csv_field"))
    previous = csv.field_size_limit(limit)
    try:
        yield limit
    finally:
        csv.field_size_limit(previous)
