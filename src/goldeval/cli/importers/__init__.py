"""``goldeval import``: another tool's test set as a golden dataset folder.

Sources: a CSV file, a Hugging Face ``datasets`` folder saved on disk (``save_to_disk`` or
``to_json``), a promptfoo test file (YAML) and DeepEval goldens (JSON). Each becomes
``golden/<name>/`` with ``dataset.yaml``, ``<name>.jsonl`` and, where the source holds an
answer, ``fixtures/<id>.out.md`` (plus the ``.out.json`` sidecar for recorded tool calls).

Every source row is mapped field by field; what has no place in a golden row is kept in the
row's ``metadata`` or dropped, and ids that had to change are listed; the report printed at
the end says which. Nothing is written when any row is bad: the folder is built in a temporary
folder next to the target, loaded with the plugin's own dataset loader, and only then renamed
into place (:mod:`.place`). Errors name the file, the line (or row) and the field, and say what
to do; every input is read within the bounds of :mod:`.bounded` (issue 32), so no file can
hang the import, exhaust memory or end it with a traceback.

A Hugging Face folder is read without the ``datasets`` package: its JSON lines files always,
its ``.arrow`` and ``.parquet`` files through ``pyarrow`` when that is installed.

The modules: :mod:`.model` (rows, report), :mod:`.bounded` (limits on what is read),
:mod:`.mapping` (records to rows, ids), :mod:`.sources` (CSV, Hugging Face, DeepEval),
:mod:`.promptfoo`, :mod:`.place` (writing, moving into place, cleaning up).
"""

from __future__ import annotations

import re
from pathlib import Path

from goldeval.cli.importers.mapping import ANSWER_NAMES, PROMPT_NAMES, assign_ids, map_record
from goldeval.cli.importers.model import ImportReport, Rename, Row
from goldeval.cli.importers.place import (
    clear_stale,
    exists_already,
    exit_on_terminate,
    place,
    staging,
    write_dataset,
)
from goldeval.cli.importers.promptfoo import read_promptfoo
from goldeval.cli.importers.sources import read_csv, read_deepeval, read_hf
from goldeval.core.errors import DatasetError, GoldevalError
from goldeval.core.limits import LimitExceeded
from goldeval.dataset.rows import load_dataset
from goldeval.graders.registry import builtin_graders

__all__ = [
    "ANSWER_NAMES",
    "FORMATS",
    "PROMPT_NAMES",
    "ImportReport",
    "Rename",
    "Row",
    "detect_format",
    "import_dataset",
    "map_record",
]

FORMATS = ("csv", "hf", "promptfoo", "deepeval")
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")


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
    *,
    strict_ids: bool = False,
) -> ImportReport:
    """Build ``golden_root/name`` from ``source``; nothing is written on any error.

    ``strict_ids``: refuse the import when any source id would be renamed (not a case id, or
    repeated) instead of renaming it and listing the rename in the report.
    """
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
        raise exists_already(target)
    report = ImportReport(source=str(source), fmt=fmt)
    with exit_on_terminate() as terminate:
        rows = _read_rows(source, fmt, split, report)
        assign_ids(rows, report)
        if strict_ids and report.renamed:
            raise _renames_refused(report)
        if any(r.sidecar for r in rows):
            report.notes.append("recorded tool calls are replayed from fixtures/<id>.out.json")
        if golden_root.is_dir():
            clear_stale(golden_root, name, report)
        with staging(golden_root, name, terminate) as tmp:
            write_dataset(tmp, name, source, fmt, rows, report)
            # Only where each row came from is needed from here: the rows are let go before
            # the loader reads the written dataset back (holding both doubled the peak, 1 GB
            # for a 212 MB CSV).
            wheres = [row.where for row in rows]
            del rows
            # The plugin's own loader: an imported row the plugin would refuse is refused here.
            try:
                load_dataset(
                    tmp,
                    project_root=golden_root.parent,
                    graders=builtin_graders(),
                    require_fixtures=False,
                )
            except GoldevalError as exc:
                raise _at_source(exc, wheres) from None
            place(tmp, target)
    report.folder = target
    report.rows = len(wheres)
    return report


def _read_rows(source: Path, fmt: str, split: str | None, report: ImportReport) -> list[Row]:
    readers = {
        "csv": lambda: read_csv(source, report),
        "hf": lambda: read_hf(source, report, split),
        "promptfoo": lambda: read_promptfoo(source, report),
        "deepeval": lambda: read_deepeval(source, report),
    }
    if fmt not in readers:
        raise GoldevalError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    try:
        rows = readers[fmt]()
    except RecursionError:  # a nesting the bounded readers did not see: still not a traceback
        raise LimitExceeded("json_depth", "nested too deep to import", path=source) from None
    if not rows:
        raise GoldevalError(f"{source}: no rows to import")
    return rows


def _renames_refused(report: ImportReport) -> DatasetError:
    shown = [f"  {r.line()}" for r in report.renamed]
    return DatasetError(
        f"--strict-ids: {len(report.renamed)} id(s) would be renamed:\n" + "\n".join(shown),
        hint="give every row a unique id of letters, digits, '.', '_' or '-' "
        "(or import without --strict-ids and review the renames)",
    )


def _at_source(exc: GoldevalError, wheres: list[str]) -> GoldevalError:
    """The loader's errors about the rows that would have been written, told at the source
    row each came from (its file and line), with the loader's field and hint."""
    errors = getattr(exc, "errors", None) or [exc]
    lines = []
    for err in errors:
        line = getattr(err, "line", None)
        if isinstance(err, GoldevalError) and isinstance(line, int) and 0 < line <= len(wheres):
            fld = f"{err.field}: " if err.field else ""
            hint = f" ({err.hint})" if err.hint else ""
            lines.append(f"{wheres[line - 1]}: {fld}{err.message}{hint}")
        else:
            lines.append(str(err))
    return DatasetError("\n".join(lines))
