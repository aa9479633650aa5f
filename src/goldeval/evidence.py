"""Evidence: ``manifest.json`` lists every artifact of a run folder with sha256, size and time.

``goldeval verify RUN_DIR`` recomputes the checksums and reports any file that is missing,
changed or not listed, so a downloaded CI artifact can be trusted (or not).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def inventory(run_dir: Path) -> list[dict[str, Any]]:
    entries = []
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file() and p.name != MANIFEST):
        stat = path.stat()
        entries.append(
            {
                "path": path.relative_to(run_dir).as_posix(),
                "sha256": sha256_file(path),
                "size": stat.st_size,
                "modified": datetime.fromtimestamp(stat.st_mtime, timezone.utc)
                .isoformat()
                .replace("+00:00", "Z"),
            }
        )
    return entries


def write_manifest(run_dir: Path, run_id: str) -> list[dict[str, Any]]:
    from goldeval.artifacts import atomic_write

    entries = inventory(run_dir)
    doc = {"runId": run_id, "algorithm": "sha256", "artifacts": entries}
    atomic_write(run_dir / MANIFEST, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    return entries


def verify_run_dir(run_dir: Path) -> list[str]:
    """Problems found, one line each; empty when every listed file is present and unchanged."""
    manifest_path = run_dir / MANIFEST
    try:
        doc = json.loads(manifest_path.read_text(encoding="utf-8"))
        listed = {e["path"]: e for e in doc["artifacts"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [f"{manifest_path}: unreadable manifest ({type(exc).__name__})"]
    problems = []
    for rel, entry in sorted(listed.items()):
        path = run_dir / rel
        if not path.is_file():
            problems.append(f"missing: {rel}")
        elif path.stat().st_size != entry.get("size") or sha256_file(path) != entry.get("sha256"):
            problems.append(f"changed: {rel}")
    for path in sorted(run_dir.rglob("*")):
        rel = path.relative_to(run_dir).as_posix()
        if path.is_file() and path.name != MANIFEST and rel not in listed:
            problems.append(f"not in manifest: {rel}")
    return problems
