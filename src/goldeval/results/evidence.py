"""Evidence: ``manifest.json`` lists every artifact of a run folder with sha256, size and time.

``goldeval verify RUN_DIR`` recomputes the checksums and reports any file that is missing,
changed or not listed, so a downloaded CI artifact can be trusted (or not).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from goldeval.core.errors import GoldevalError
from goldeval.core.limits import loads_json
from goldeval.core.safe_files import read_regular_file
from goldeval.results.run_folder import atomic_write

MANIFEST = "manifest.json"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def is_temp(name: str) -> bool:
    """A temp file of an unfinished write (ours are ``.<name>.<random>.tmp``)."""
    return name.endswith(".tmp")


def walk(run_dir: Path) -> Iterator[tuple[str, Path, os.stat_result]]:
    """Every entry below ``run_dir`` as (relative posix path, path, lstat), sorted, without
    following symlinks (a link could lead anywhere outside the project)."""
    for top, dirs, files in os.walk(run_dir, followlinks=False):
        dirs.sort()
        base = Path(top)
        for name in sorted(files) + [d for d in dirs if (base / d).is_symlink()]:
            path = base / name
            yield path.relative_to(run_dir).as_posix(), path, os.lstat(path)


def inventory(run_dir: Path) -> list[dict[str, Any]]:
    """Regular files of the folder (links and temp files are never listed: verify flags them)."""
    entries = []
    for rel, path, st in sorted(walk(run_dir)):
        if rel == MANIFEST or not stat.S_ISREG(st.st_mode) or is_temp(path.name):
            continue
        entries.append(
            {
                "path": rel,
                "sha256": sha256_file(path),
                "size": st.st_size,
                "modified": datetime.fromtimestamp(st.st_mtime, timezone.utc)
                .isoformat()
                .replace("+00:00", "Z"),
            }
        )
    return entries


def write_manifest(
    run_dir: Path, run_id: str, entries: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Write manifest.json (durably: it is the folder's commit record, written last)."""

    if entries is None:
        entries = inventory(run_dir)
    doc = {"runId": run_id, "algorithm": "sha256", "artifacts": entries}
    atomic_write(run_dir / MANIFEST, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return entries


_RUN_ID = re.compile(r'"runId":\s*"([^"]*)"')


def verify_run_dir(run_dir: Path) -> list[str]:
    """Problems found, one line each; empty only for a complete, unchanged run folder.

    Complete means: manifest.json present (it is written last, so a folder without one is a
    run that did not finish writing), run.json listed in it with the manifest's run id, every
    listed file present and unchanged, nothing else there (no unlisted file, no temp file of
    an unfinished write, no symlink).
    """
    if not run_dir.is_dir():
        return [f"{run_dir}: not a run folder (no such directory)"]
    manifest_path = run_dir / MANIFEST
    if manifest_path.is_symlink():
        return [f"{manifest_path}: is a symbolic link (not followed)"]
    if not manifest_path.exists():
        return [
            f"{manifest_path}: missing: the run did not finish writing this folder "
            "(a partial or failed run; rerun it)"
        ]
    try:
        doc = loads_json(read_regular_file(manifest_path).decode("utf-8"), what="the manifest")
        listed = {e["path"]: e for e in doc["artifacts"]}
        manifest_id = doc.get("runId")
    except (OSError, ValueError, KeyError, TypeError, AttributeError, GoldevalError) as exc:
        return [f"{manifest_path}: unreadable manifest ({type(exc).__name__})"]
    problems = []
    root = run_dir.resolve()
    for rel, entry in sorted(listed.items()):
        if not isinstance(rel, str) or not (run_dir / rel).resolve().is_relative_to(root):
            problems.append(f"outside the folder: {rel}")
            continue
        path = run_dir / rel
        if path.is_symlink():
            problems.append(f"symlink (not followed): {rel}")
        elif not path.is_file():
            problems.append(f"missing: {rel}")
        elif path.stat().st_size != entry.get("size") or sha256_file(path) != entry.get("sha256"):
            problems.append(f"changed: {rel}")
    if "run.json" not in listed:
        problems.append("run.json is not listed in the manifest (no run record)")
    elif (run_dir / "run.json").is_file() and not (run_dir / "run.json").is_symlink():
        with open(run_dir / "run.json", encoding="utf-8", errors="replace") as fh:
            match = _RUN_ID.search(fh.read(4096))
        if match is None or match[1] != manifest_id:
            problems.append(f"run.json: runId does not match the manifest's ({manifest_id})")
    for rel, path, st in walk(run_dir):
        if stat.S_ISLNK(st.st_mode):
            if rel not in listed:
                problems.append(f"symlink (not followed): {rel}")
        elif is_temp(path.name):
            problems.append(f"leftover temp file (an unfinished write): {rel}")
        elif rel != MANIFEST and rel not in listed:
            problems.append(f"not in manifest: {rel}")
    return problems
