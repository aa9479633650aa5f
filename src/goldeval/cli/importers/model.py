"""What an import builds: golden rows with their source position, and the mapping report."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from goldeval.core import limits
from goldeval.core.errors import DatasetError


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


@dataclass(frozen=True)
class Rename:
    """A source id the import could not keep as it was."""

    where: str
    original: str
    new: str
    why: str

    def line(self) -> str:
        return f"{self.where}: {self.original!r} -> {self.new!r} ({self.why})"


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
    #: ids changed on the way in (``--strict-ids`` refuses any)
    renamed: list[Rename] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Rows read so far (:meth:`admit`).
    read: int = 0

    def admit(self, where: str) -> None:
        """Count one more row read from the source: past ``import_rows`` the import stops
        there, before anything is staged (a 73 MB JSONL of 2,000,000 rows wrote 2,000,000
        fixture files, 7.9 GB, with 3.4 GB of memory)."""
        self.read += 1
        most = int(limits.default("import_rows"))
        if self.read > most:
            raise import_error(
                where,
                None,
                f"more than {most:,} rows (the import_rows limit)",
                "split the source into several datasets",
            )

    def lines(self) -> list[str]:
        out = [
            f"imported {self.rows} row(s) from {self.source} ({self.fmt}) into {self.folder}",
            f"  fixtures written: {self.fixtures}",
            "  mapped:",
        ]
        out += [f"    {k}: {n} row(s)" for k, n in sorted(self.mapped.items())] or ["    -"]
        out.append("  dropped:")
        out += [f"    {k}: {n} row(s)" for k, n in sorted(self.dropped.items())] or ["    -"]
        out.append("  renamed ids:")
        out += [f"    {r.line()}" for r in self.renamed] or ["    -"]
        out += [f"  note: {n}" for n in self.notes]
        return out


def import_error(where: str, fld: str | None, message: str, hint: str) -> DatasetError:
    """A usage error at ``where`` (``file:line`` or ``file row N``), field ``fld``."""
    at = f"{where}: {fld}: " if fld else f"{where}: "
    return DatasetError(f"{at}{message}", hint=hint)
