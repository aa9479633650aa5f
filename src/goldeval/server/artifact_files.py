"""A run's artifact read from disk for the API: found where the run wrote it, inside this
server's folders, a regular file, and only served when its size and SHA-256 match the
inventory the run recorded (409 otherwise)."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from goldeval.core.safe_files import read_fd
from goldeval.server import run_artifacts
from goldeval.server.problems import Problem
from goldeval.server.settings import ServiceSettings
from goldeval.store import ArtifactRow
from goldeval.store.queue import ServiceRun

#: Artifact types (the seed's names) → their path in the run's artifact inventory: a file of
#: the run folder the plugin writes, or one the worker adds (:mod:`run_artifacts`).
ARTIFACT_TYPES: dict[str, str] = {
    "JSON_SUMMARY": "summary.json",
    "RUN_JSON": "run.json",
    "REPORT_MD": "report.md",
    "COMPARISON": "comparison.json",
    **run_artifacts.SERVICE_ARTIFACTS,
}
MEDIA_TYPES = {
    ".json": "application/json",
    ".md": "text/markdown; charset=utf-8",
    ".xml": "application/xml",
    ".html": "text/html; charset=utf-8",
    ".zip": "application/zip",
}
#: Artifacts larger than this are refused rather than read into memory to be checked.
MAX_ARTIFACT_BYTES = 256 * 1024 * 1024


def unknown_type(kind: str) -> Problem:
    """The 404 for an artifact type that does not exist."""
    return Problem(
        404,
        "unknown-artifact-type",
        "Unknown artifact type",
        f"{kind[:40]!r} is not an artifact type; types: {', '.join(ARTIFACT_TYPES)}",
    )


def served(
    settings: ServiceSettings, job: ServiceRun, store_run_id: str, entry: ArtifactRow, kind: str
) -> tuple[bytes, str, str]:
    """(content, media type, file name) of ``entry``, the inventory row of artifact ``kind``
    of ``job``, after checking where it is, its size and its SHA-256."""
    name = ARTIFACT_TYPES[kind]
    runs_root = settings.runs_dir.resolve()
    run_folder = Path(job.run_dir) if job.run_dir else runs_root / store_run_id
    file, folder = run_artifacts.locate(name, run_folder, settings.work_dir, job.id)
    root = runs_root if folder == run_folder else settings.work_dir.resolve()
    path = file.resolve()
    if not path.is_relative_to(root) or path.parent != folder.resolve():
        raise Problem(
            409,
            "artifact-outside-runs",
            "Artifact is not in this server's runs folder",
            f"{kind} of run {job.id} is not under {root}; serve it from the machine "
            "that ran it, or point --runs at the shared runs folder",
        )
    data = _read_regular(path, job.id, kind, entry.size)
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry.sha256 or len(data) != entry.size:
        raise Problem(
            409,
            "artifact-checksum-mismatch",
            "Artifact does not match its checksum",
            f"{name} of run {job.id} was changed after the run recorded it: inventory "
            f"sha256 {entry.sha256[:16]}… ({entry.size} bytes), on disk {digest[:16]}… "
            f"({len(data)} bytes). It is not served; `goldeval verify` checks the whole "
            "folder",
            expectedSha256=entry.sha256,
            actualSha256=digest,
        )
    media = MEDIA_TYPES.get(Path(name).suffix, "application/octet-stream")
    return data, media, f"{store_run_id}-{Path(name).name}"


def _read_regular(path: Path, run_id: str, kind: str, expected: int) -> bytes:
    """The bytes of a regular file, never following a final symlink."""
    try:
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise Problem(
            409,
            "artifact-missing",
            "Artifact file is missing",
            f"{path.name} of run {run_id} is in the inventory but not on disk",
        ) from None
    except OSError as exc:
        raise Problem(
            409,
            "artifact-unreadable",
            "Artifact cannot be read",
            f"{path.name} of run {run_id}: {exc.strerror}",
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Problem(
                409,
                "artifact-unreadable",
                "Artifact is not a regular file",
                f"{path.name} of run {run_id} is not a regular file",
            )
        if info.st_size > MAX_ARTIFACT_BYTES or info.st_size > expected + 1024 * 1024:
            raise Problem(
                409,
                "artifact-checksum-mismatch",
                "Artifact does not match its checksum",
                f"{path.name} of run {run_id} is {info.st_size} bytes, the inventory says "
                f"{expected}: it was changed after the run; it is not served",
            )
        return read_fd(fd)
    finally:
        os.close(fd)
