"""The service's part of a run's evidence pack: JUnit XML, the HTML report, the log bundle.

The plugin writes the run folder (summary.json, run.json, report.md, comparison.json) and
records them in the store's artifact inventory, then writes ``manifest.json`` as the folder's
commit record. ``goldeval verify`` refuses any file the manifest does not list, so what the
service adds is kept *beside* the folder, in ``<work dir>/evidence/<service run id>/``:

- ``junit.xml``: pytest's own ``--junitxml`` of the run's process;
- ``report.html``: pytest-html's self-contained report, when pytest-html is installed;
- ``logs.zip``: the run's log (every pytest process of it, with the worker's notes).

When the process ends the worker records each of them, and ``manifest.json``, in the same
inventory (``service/<name>`` for the evidence files), so the artifact endpoint serves every
type with the same size and SHA-256 check as the plugin's own files.
"""

from __future__ import annotations

import hashlib
import importlib.util
import zipfile
from collections.abc import Callable
from pathlib import Path

from goldeval.results.evidence import MANIFEST
from goldeval.store import Store

#: Inventory paths of the service's evidence start with this (then the file's name).
PREFIX = "service/"
JUNIT = "junit.xml"
HTML = "report.html"
LOGS = "logs.zip"

#: Artifact types (the seed's names) -> inventory path (relative to the run folder, or
#: ``service/<name>`` for a file of the evidence folder).
SERVICE_ARTIFACTS: dict[str, str] = {
    "MANIFEST": MANIFEST,
    "JUNIT_XML": PREFIX + JUNIT,
    "HTML_REPORT": PREFIX + HTML,
    "LOG_BUNDLE": PREFIX + LOGS,
}


def evidence_dir(work_dir: Path, job_id: str) -> Path:
    return work_dir / "evidence" / job_id


def locate(name: str, run_folder: Path, work_dir: Path, job_id: str) -> tuple[Path, Path]:
    """(the file of inventory path ``name``, the folder it must be directly in)."""
    if name.startswith(PREFIX):
        folder = evidence_dir(work_dir, job_id)
        return folder / name[len(PREFIX) :], folder
    return run_folder / name, run_folder


def has_html_plugin() -> bool:
    return importlib.util.find_spec("pytest_html") is not None


def child_options(folder: Path) -> list[str]:
    """The pytest options that make the run's process write its JUnit XML (and HTML report)."""
    folder.mkdir(parents=True, exist_ok=True)
    options = [f"--junitxml={folder / JUNIT}"]
    if has_html_plugin():
        options += [f"--html={folder / HTML}", "--self-contained-html"]
    return options


def bundle_logs(folder: Path, logs: list[Path], public: Callable[[str], str]) -> Path:
    """``logs.zip`` of the run's log files (those that exist), each line as ``public`` shows
    it: pytest prints the server's paths (the run folder, ``--junitxml``, tracebacks), and a
    download must not reveal where the server keeps its files."""
    target = folder / LOGS
    partial = folder / f".{LOGS}.tmp"
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        for log in logs:
            if not log.is_file():
                continue
            with log.open(encoding="utf-8", errors="replace", newline="") as source:
                with bundle.open(log.name, "w") as out:
                    for line in source:  # line by line: a log may be large
                        out.write(public(line).encode("utf-8"))
    partial.replace(target)
    return target


def _entry(path: Path, name: str) -> tuple[str, str, int] | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return name, hashlib.sha256(data).hexdigest(), len(data)


def record(
    store: Store,
    store_run_id: str,
    run_folder: Path,
    folder: Path,
    logs: list[Path],
    public: Callable[[str], str],
) -> int:
    """Bundle the logs (as ``public`` shows them) and record every evidence file present
    (and manifest.json) in the store run's artifact inventory; how many were recorded."""
    folder.mkdir(parents=True, exist_ok=True)
    bundle_logs(folder, logs, public)
    found = [
        _entry(run_folder / MANIFEST, MANIFEST),
        *(_entry(folder / name, PREFIX + name) for name in (JUNIT, HTML, LOGS)),
    ]
    entries = [e for e in found if e is not None]
    return store.record_artifacts(store_run_id, entries)
