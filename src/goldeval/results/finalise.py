"""Finalising a run: the run folder, LATEST, history.jsonl and the store as one transaction.

A run either ends with a complete, verified record (every artifact durable, then the store's
final status, then ``manifest.json`` as the folder's commit record, then LATEST, then one
history line) or, when any step fails, it is marked FAILED (INTERRUPTED for an interrupted
run) everywhere it was recorded: the folder's manifest is removed and its run.json says so,
LATEST is put back, the history line is taken back and a FAILED line written, the store run
is marked, and no temp file is left. The controller then exits 75 (4 for a symlink or other
non-file in the way, which a retry would not fix).

Pure module (no pytest): :mod:`goldeval.pytest_plugin.finishing` drives it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from goldeval.core.errors import GoldevalError
from goldeval.core.limits import loads_json
from goldeval.results import run_folder as artifacts
from goldeval.results.documents import typed_run
from goldeval.results.evidence import MANIFEST, is_temp
from goldeval.results.run_document import RUN_DOCUMENT
from goldeval.results.run_json import RunJson

#: The run document's record of a failed finalisation: ``{"reason", "pathRefused"}``.
FAULT_KEY = "finalisationFault"


class FinalisationError(GoldevalError):
    """A step of finalisation that is not a file write failed (the store, say)."""


class Finalisation:
    """What this process has done to the file system while finishing its run(s)."""

    def __init__(self) -> None:
        self.locks: dict[Path, int] = {}
        self.dirs: list[Path] = []
        self.temps: set[Path] = set()
        self.cases_files: dict[Path, Path] = {}
        self.runs: dict[Path, RunJson] = {}
        #: LATEST path, its previous content (None: there was none), the content we wrote
        self.latest: list[tuple[Path, bytes | None, bytes]] = []
        self.history: list[tuple[Path, int, int]] = []
        self.manifests: dict[Path, int] = {}
        self.shared: set[Path] = set()
        self.unsynced = 0

    # ------------------------------------------------------------------ folder and lock

    def open_run_dir(
        self, out_dir: Path, run_id: str, *, shared: bool, new_id: Any
    ) -> tuple[str, Path]:
        """Create (exclusively unless ``shared``) and lock ``out_dir/run_id``.

        A folder of its own is created with ``os.mkdir`` and no ``exist_ok``: if the name is
        taken (another process, same id), a fresh id is drawn. A run key's folder is shared
        by every session of the key on purpose (a resumed run keeps its folder); the lock
        makes those sessions write it one at a time.
        """
        artifacts.refresh_file_mode()
        out_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(100):
            run_dir = out_dir / run_id
            try:
                os.mkdir(run_dir)
            except FileExistsError:
                if not shared:
                    run_id = new_id()
                    continue
            break
        else:  # pragma: no cover - 100 clashes of a 24-bit random suffix
            raise FinalisationError("could not create a run folder of its own", path=out_dir)
        artifacts.check_inside(out_dir, run_dir)
        self.dirs.append(run_dir)
        if shared:
            self.shared.add(run_dir)
        self.lock(run_dir)
        artifacts.check_inside(run_dir, run_dir / "cases")
        (run_dir / "cases").mkdir(exist_ok=True)
        artifacts.check_inside(run_dir, run_dir / "cases")
        fd, tmp = artifacts.temp_file(run_dir, "cases.jsonl")
        os.close(fd)
        self.temps.add(tmp)
        self.cases_files[run_dir] = tmp
        return run_id, run_dir

    def lock(self, run_dir: Path) -> None:
        """Hold an flock on the folder itself (no lock file to leave behind)."""
        if run_dir in self.locks:
            return
        flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(run_dir, flags)
        except OSError:
            return  # a platform that cannot open folders: no lock, writes stay atomic
        artifacts.lock_fd(fd)
        self.locks[run_dir] = fd

    def release(self, run_dir: Path) -> None:
        fd = self.locks.pop(run_dir, None)
        if fd is not None:
            os.close(fd)

    def release_all(self) -> None:
        for run_dir in list(self.locks):
            self.release(run_dir)

    # ------------------------------------------------------------------ commit steps

    def sync(self) -> None:
        """Per-case artifacts are written without one fsync each: sync them in one go."""
        if self.unsynced:
            os.sync()
            self.unsynced = 0

    def drop_temp(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        self.temps.discard(path)

    def clear_stale_temps(self, run_dir: Path) -> None:
        """Temp files of an earlier session of this folder that died mid-write (we hold the
        folder's lock, so none is in flight). Only a shared (run key) folder can have any:
        a folder of its own was created empty by this process."""
        if run_dir not in self.shared:
            return
        for top, _dirs, files in os.walk(run_dir, followlinks=False):
            for name in files:
                if is_temp(name):
                    (Path(top) / name).unlink(missing_ok=True)

    def committed(self, run_dir: Path) -> None:
        """Remember our manifest (by inode) once written: the folder's commit record."""
        try:
            self.manifests[run_dir] = os.lstat(run_dir / MANIFEST).st_ino
        except OSError:
            pass

    def _still_ours(self, run_dir: Path) -> bool:
        ours = self.manifests.get(run_dir)
        if ours is None:
            return True  # not committed: we held the lock since the folder was opened
        try:
            return os.lstat(run_dir / MANIFEST).st_ino == ours
        except OSError:
            return True

    # ------------------------------------------------------------------ rollback

    def rollback(
        self,
        out_dir: Path,
        run_id: str,
        status: str,
        code: int,
        reason: str,
        recorder: Any,
        *,
        path_refused: bool = False,
    ) -> list[str]:
        """Mark everything this process recorded as ``status``; best effort, step by step.

        The fault itself is recorded too (``finalisationFault``: the reason, and whether an
        artifact path was refused), so a saved run gated again (``goldeval gate``, the
        service) gets the code the session exited with, not a verdict on its attempts alone.

        Returns what could not be undone (for the error message): a full disk may refuse
        even the marker, which then leaves a folder without run.json or manifest.
        """
        left: list[str] = []
        for tmp in list(self.temps):
            try:
                self.drop_temp(tmp)
            except OSError:
                left.append(f"temp file {tmp}")
        decision = {"code": code, "reason": reason}
        marks = {
            "status": status,
            "exitDecision": decision,
            FAULT_KEY: {"reason": reason, "pathRefused": path_refused},
        }
        for run_dir in self.dirs:
            self.lock(run_dir)  # a run key's folder: wait for a session writing it now
            if not self._still_ours(run_dir):
                continue  # another session of the key committed it after us: its record stands
            try:
                self.clear_stale_temps(run_dir)
            except OSError:
                pass
            left += _mark_folder(run_dir, self.runs.get(run_dir), marks)
        self.release_all()
        for path, previous, ours in reversed(self.latest):
            try:
                current = path.read_bytes() if not path.is_symlink() else None
                if current == ours:
                    if previous is None:
                        path.unlink()
                    else:
                        artifacts.atomic_write(path, previous.decode("utf-8", "replace"))
            except (OSError, GoldevalError):
                left.append(f"{path} (could not be put back)")
        self.latest.clear()
        for path, before, after in reversed(self.history):
            artifacts.retract_history(path, before, after)
        self.history.clear()
        runs = [self.runs[d] for d in self.dirs if d in self.runs] or [{"runId": run_id}]
        for run in runs:
            try:  # one FAILED line per run: history never shows a failed run as finished
                artifacts.append_history(out_dir, typed_run({**run, **marks}))
            except (OSError, GoldevalError):
                pass  # the history file may be what failed
        if recorder is not None and getattr(recorder, "began", False):
            marked = {**runs[0], **marks}
            try:
                summary = artifacts.summary(typed_run(marked))
            except GoldevalError:  # a field of the wrong type: the marks alone still say it
                summary = artifacts.summary(typed_run(marks))
            # The store's copy of the run document (what the service shows and compares):
            # the fault recorded as in run.json, so its verdict is the session's.
            summary[RUN_DOCUMENT] = {k: v for k, v in marked.items() if k != "cases"}
            recorder.mark_failed(status, summary)
        return left


def _mark_folder(run_dir: Path, run: RunJson | None, marks: dict[str, Any]) -> list[str]:
    """No manifest (the folder never verifies), run.json and summary.json carrying ``marks``
    (the status, the exit decision, the fault), report.md (which states a verdict) removed."""
    left: list[str] = []
    if not run_dir.is_dir() or run_dir.is_symlink():
        return left
    for name in (MANIFEST, "report.md"):
        path = run_dir / name
        try:
            path.unlink(missing_ok=True)
        except OSError:
            left.append(str(path))
    note = f"finalisation failed: {marks['exitDecision']['reason']}"
    for name in ("summary.json", "run.json"):
        path = run_dir / name
        if path.is_symlink():
            continue
        try:
            if path.is_file():
                doc = loads_json(path.read_text(encoding="utf-8"), what=name)
                if not isinstance(doc, dict):
                    raise ValueError(name)
            elif name == "run.json":
                doc = {k: v for k, v in (run or {}).items() if k != "cases"}
            else:
                continue
            doc.update(marks)
            if name == "run.json":
                notes = doc.get("notes")
                doc["notes"] = [*(notes if isinstance(notes, list) else []), note]
            artifacts.atomic_write(path, artifacts.dumps(doc))
        except (OSError, ValueError, GoldevalError):
            # No room even for the marker: a run.json that says COMPLETED must not survive.
            try:
                path.unlink(missing_ok=True)
            except OSError:
                left.append(str(path))
    return left
