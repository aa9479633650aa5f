"""The RAG pack under test: rules, skill, context, ADR and front-matter chunks."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from goldeval.core.errors import DatasetError
from goldeval.core.safe_files import contained_file, read_regular_file
from goldeval.dataset.manifest import Manifest, find_manifest, read_manifest

_ID_LINE = re.compile(r"^id:\s*(\S+)", re.MULTILINE)

# Files the live system prompt is assembled from (reference section 3.8), relative to the pack.
PROMPT_PARTS = ("rules.md", "qa-write-test.md")
CONTEXT_PARTS = ("context/login-po.md", "adr/009-login-401-is-api.md")


@dataclass(frozen=True)
class Chunk:
    id: str
    tags: tuple[str, ...]
    related: tuple[str, ...]
    index: tuple[str, ...]
    heading: str
    text: str
    path: Path


@dataclass
class Pack:
    root: Path
    manifest: Manifest | None
    chunks: list[Chunk]
    hash: str
    files: dict[str, str] = field(default_factory=dict)

    @property
    def version(self) -> str | None:
        return self.manifest.version if self.manifest else None

    @property
    def chunk_ids(self) -> list[str]:
        return [c.id for c in self.chunks]

    def chunk(self, chunk_id: str) -> Chunk | None:
        for c in self.chunks:
            if c.id == chunk_id:
                return c
        return None

    def text(self, relpath: str) -> str | None:
        return self.files.get(relpath)


def _front_matter(text: str) -> str:
    if not text.startswith("---\n"):
        return ""
    end = text.find("\n---", 4)
    return text[4:end] if end >= 0 else ""


def _list_field(front: str, key: str) -> tuple[str, ...]:
    match = re.search(rf"^{re.escape(key)}:\s*\[(.*)\]\s*$", front, re.MULTILINE)
    if not match:
        return ()
    items = []
    for raw in match.group(1).split(","):
        item = raw.strip()
        if item[:1] in ("'", '"'):
            item = item[1:]
        if item[-1:] in ("'", '"'):
            item = item[:-1]
        if item.strip():
            items.append(item)
    return tuple(items)


def parse_chunk(path: Path, text: str) -> Chunk:
    match = _ID_LINE.search(text)
    if match is None:
        raise DatasetError(
            "RAG chunk has no `id:` line", path=path, field="id", hint="add `id: <chunk-id>`"
        )
    chunk_id = match.group(1) or path.stem
    front = _front_matter(text)
    heading = ""
    for line in text.split("\n"):
        if line.startswith("# "):
            heading = line[2:]
            break
    return Chunk(
        id=chunk_id,
        tags=_list_field(front, "tags"),
        related=_list_field(front, "related"),
        index=_list_field(front, "index"),
        heading=heading,
        text=text,
        path=path,
    )


def pack_hash(files: dict[str, bytes]) -> str:
    """SHA-256 over ``relpath\\n content \\n`` of every file, sorted by path (reference 3.7)."""
    digest = hashlib.sha256()
    for rel in sorted(files, key=lambda p: p.encode("utf-8")):
        digest.update(rel.encode("utf-8") + b"\n")
        digest.update(files[rel])
        digest.update(b"\n")
    return digest.hexdigest()


def _pack_files(root: Path, project: Path) -> dict[str, bytes]:
    """Every file of the pack, by relative path.

    A file link is followed only when it stays inside the project (a chunk linked to
    /proc/self/environ would put the environment in prompts and reports); a directory link
    out of the project is an error, one inside is not descended into (it could loop); anything
    that is not a regular file (a FIFO would hang the read) is an error naming it.
    """

    raw: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        dirnames.sort()
        for name in dirnames:
            link = base / name
            if link.is_symlink() and not link.resolve().is_relative_to(project):
                raise DatasetError(
                    f"pack folder {link} links to {link.resolve()}, outside the project",
                    path=link,
                    hint="keep the pack's files inside the project",
                )
        for name in sorted(filenames):
            path = base / name
            real = contained_file(path, project, what="pack file") if path.is_symlink() else path
            raw[path.relative_to(root).as_posix()] = read_regular_file(real)
    return raw


def load_pack(root: Path, project: Path | None = None) -> Pack:
    """Load the pack at ``root``; its files must stay inside ``project`` (default: the pack)."""
    if not root.is_dir():
        raise DatasetError(
            "pack folder not found",
            path=root,
            hint="set `pack:` in the dataset manifest or create pack/ at the project root",
        )
    raw = _pack_files(root, (project or root).resolve())
    texts: dict[str, str] = {}
    for rel, data in raw.items():
        if rel.endswith((".md", ".txt", ".yaml", ".yml", ".json")):
            try:
                texts[rel] = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DatasetError(f"not valid UTF-8 ({exc.reason})", path=root / rel) from None
    chunks = [
        parse_chunk(root / rel, texts[rel])
        for rel in sorted(r for r in texts if r.startswith("rag/") and r.endswith(".md"))
    ]
    seen: dict[str, Path] = {}
    for c in chunks:
        if c.id in seen:
            raise DatasetError(
                f"duplicate chunk id {c.id!r} (also in {seen[c.id]})", path=c.path, field="id"
            )
        seen[c.id] = c.path
    manifest_path = find_manifest(root)
    manifest = read_manifest(manifest_path) if manifest_path else None
    return Pack(root=root, manifest=manifest, chunks=chunks, hash=pack_hash(raw), files=texts)
