"""``goldeval prune``: retention for run folders and the run store.

    goldeval prune --keep-last N | --older-than DAYS [--dry-run]

Selects, among the run folders under ``.goldeval/runs`` and the runs in the store, those
beyond the ``N`` most recent ones, or started more than ``DAYS`` days ago, and deletes
them — except, always:

* the run ``LATEST`` points at;
* a run a committed baseline refers to (``baselines/*.json``: its ``runId``, or ``runKey``);
* a run in progress: a folder another process holds locked (a session writing it), and a
  store run whose status is RUNNING or QUEUED.

Deleting from the store removes the run's pages and artifact inventory, then every content
(case text, graded record) no remaining run refers to, then compacts SQLite.

Nothing is read or deleted through a symbolic link: a linked runs folder, ``LATEST`` or
baseline is refused, a linked entry in the runs folder is left alone, and folders are
deleted with :func:`shutil.rmtree`, which removes links inside them without following them.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from goldeval.core.errors import GoldevalError
from goldeval.core.limits import loads_json
from goldeval.core.safe_files import check_file_size, link_on_the_way, read_fd
from goldeval.results.run_folder import lock_fd
from goldeval.store import Store, StoreError, open_store

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks
    fcntl = None  # type: ignore[assignment]

#: Store statuses of a run that is (or may still be) written by a session.
IN_PROGRESS = frozenset({"RUNNING", "QUEUED"})


@dataclass(frozen=True)
class Policy:
    """What to keep: the ``keep_last`` most recent runs, or those younger than ``older_than``
    days (exactly one of the two)."""

    keep_last: int | None = None
    older_than: float | None = None

    def __post_init__(self) -> None:
        if (self.keep_last is None) == (self.older_than is None):
            raise GoldevalError("prune: give exactly one of --keep-last N and --older-than DAYS")
        if self.keep_last is not None and self.keep_last < 0:
            raise GoldevalError(f"prune: --keep-last must be 0 or more, not {self.keep_last}")
        if self.older_than is not None and not 0 <= self.older_than <= 1_000_000:
            raise GoldevalError(
                f"prune: --older-than must be a number of days from 0 to 1000000, "
                f"not {self.older_than}"
            )

    def candidates(self, started: list[tuple[str, datetime]], now: datetime) -> set[str]:
        """Names beyond the policy among ``(name, started)`` pairs (protection not applied)."""
        if self.keep_last is not None:
            newest_first = sorted(started, key=lambda item: (item[1], item[0]), reverse=True)
            return {name for name, _ in newest_first[self.keep_last :]}
        assert self.older_than is not None
        limit = now - timedelta(days=self.older_than)
        return {name for name, when in started if when < limit}


@dataclass
class Protected:
    """Runs that are never pruned, and why."""

    run_ids: dict[str, str] = field(default_factory=dict)
    run_keys: dict[str, str] = field(default_factory=dict)
    latest_dir: Path | None = None

    def reason(self, run_id: str, run_key: str | None = None) -> str | None:
        if run_id in self.run_ids:
            return self.run_ids[run_id]
        if run_key is not None and run_key in self.run_keys:
            return self.run_keys[run_key]
        return None


@dataclass
class Outcome:
    """What prune did (or, with ``dry_run``, would do)."""

    dry_run: bool
    folders_deleted: list[str] = field(default_factory=list)
    folders_kept: dict[str, str] = field(default_factory=dict)
    """Folders beyond the policy that were kept, with the reason."""
    folders_total: int = 0
    runs_deleted: list[str] = field(default_factory=list)
    runs_kept: dict[str, str] = field(default_factory=dict)
    runs_total: int = 0
    store: str | None = None
    store_bytes: tuple[int, int] | None = None
    skipped: list[str] = field(default_factory=list)
    """Entries of the runs folder left alone (links, files)."""

    def lines(self) -> list[str]:
        verb = "would delete" if self.dry_run else "deleted"
        out = [
            f"run folders: {verb} {len(self.folders_deleted)} of {self.folders_total}"
            + _kept_note(self.folders_kept)
        ]
        out += [f"  {verb} {name}" for name in self.folders_deleted]
        out += [f"  kept {name}: {why}" for name, why in sorted(self.folders_kept.items())]
        out += [f"  left alone {what}" for what in self.skipped]
        if self.store is None:
            out.append("store: none")
            return out
        out.append(
            f"store {self.store}: {verb} {len(self.runs_deleted)} of {self.runs_total} runs"
            + _kept_note(self.runs_kept)
        )
        out += [f"  {verb} {run}" for run in self.runs_deleted]
        out += [f"  kept {run}: {why}" for run, why in sorted(self.runs_kept.items())]
        if self.store_bytes is not None:
            before, after = self.store_bytes
            out.append(f"  size {_mb(before)} -> {_mb(after)}")
        return out


def _kept_note(kept: dict[str, str]) -> str:
    return f" ({len(kept)} beyond the policy kept)" if kept else ""


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


# --------------------------------------------------------------------------- reading safely


def _no_link(path: Path, what: str, project: Path | None) -> None:
    """GoldevalError when ``path`` is a link, or is reached through one inside ``project``
    (``.goldeval -> /elsewhere`` made ``.goldeval/runs`` look like a real folder)."""
    link = link_on_the_way(path.absolute(), project) if project is not None else None
    if link is not None or path.is_symlink():
        shown = link if link is not None and link != path.absolute() else None
        raise GoldevalError(
            f"{what} is {'reached through ' + str(shown) + ', ' if shown else ''}a symbolic "
            "link; prune reads and deletes nothing through links",
            path=path,
            hint="replace the link with the folder or file itself",
        )


def _read_small(path: Path, what: str) -> str:
    """A regular file's text, opened without following a link."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise GoldevalError(
                f"{what} is a symbolic link; prune reads nothing through links", path=path
            ) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise GoldevalError(f"{what} is not a regular file", path=path)
        check_file_size(st.st_size, path)
        return read_fd(fd, st, path=path).decode("utf-8")
    finally:
        os.close(fd)


def protected_runs(runs_dir: Path, baselines_dir: Path, project: Path | None = None) -> Protected:
    """LATEST's run and every committed baseline's run id / run key.

    An unreadable baseline stops the prune (exit 4): deleting the run it may refer to is
    not a risk worth taking.
    """
    out = Protected()
    latest = runs_dir / "LATEST"
    _no_link(latest, "LATEST", project)
    if latest.exists():
        text = _read_small(latest, "LATEST").strip()
        if text:
            target = Path(text)
            out.latest_dir = target
            out.run_ids[target.name] = "LATEST points at it"
            summary = target / "summary.json"
            if target.parent.resolve() == runs_dir.resolve() and summary.is_file():
                run_id = _run_id_of(summary)
                if run_id:
                    out.run_ids.setdefault(run_id, "LATEST points at it")
    _no_link(baselines_dir, "baselines folder", project)
    if baselines_dir.is_dir():
        for path in sorted(baselines_dir.glob("*.json")):
            _no_link(path, "baseline", project)
            try:
                doc = loads_json(_read_small(path, "baseline"), what="the baseline")
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise GoldevalError(
                    f"cannot read baseline to protect its run: {exc}",
                    path=path,
                    hint="fix or remove the file, or pass --baselines DIR",
                ) from None
            if not isinstance(doc, dict):
                continue
            why = f"baseline {path.name} refers to it"
            if isinstance(doc.get("runId"), str) and doc["runId"]:
                out.run_ids.setdefault(doc["runId"], why)
            if isinstance(doc.get("runKey"), str) and doc["runKey"]:
                out.run_keys.setdefault(doc["runKey"], why)
    return out


def _run_id_of(summary: Path) -> str | None:
    try:
        doc = loads_json(_read_small(summary, "summary.json"), what="summary.json")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, GoldevalError):
        return None
    value = doc.get("runId") if isinstance(doc, dict) else None
    return value if isinstance(value, str) else None


def _started(folder: Path) -> datetime:
    """When the folder's run started: summary.json's timestamp, else the folder's mtime."""
    summary = folder / "summary.json"
    try:
        doc = loads_json(_read_small(summary, "summary.json"), what="summary.json")
        stamp = doc.get("timestamp") if isinstance(doc, dict) else None
        if isinstance(stamp, str):
            when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
            return when if when.tzinfo else when.replace(tzinfo=timezone.utc)
    except (OSError, UnicodeDecodeError, ValueError, GoldevalError):
        pass
    return datetime.fromtimestamp(os.lstat(folder).st_mtime, tz=timezone.utc)


@contextmanager
def _unless_locked(folder: Path) -> Iterator[bool]:
    """Hold the folder's lock while deleting it; False if a session holds it (in progress).

    A session writing a run folder holds an exclusive flock on the folder itself
    (:mod:`goldeval.results.finalise`), for as long as it writes.
    """
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(folder, flags)
    except OSError:
        yield False
        return
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
        else:  # pragma: no cover
            lock_fd(fd)
        yield True
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- pruning


def prune_folders(
    runs_dir: Path,
    policy: Policy,
    protected: Protected,
    outcome: Outcome,
    now: datetime,
    project: Path | None = None,
) -> None:
    _no_link(runs_dir, "runs folder", project)
    if not runs_dir.is_dir():
        return
    folders: list[tuple[str, datetime]] = []
    for entry in sorted(os.scandir(runs_dir), key=lambda e: e.name):
        if entry.is_symlink():
            outcome.skipped.append(f"{entry.name} (a symbolic link)")
            continue
        if not entry.is_dir(follow_symlinks=False):
            continue  # LATEST, history.jsonl
        folders.append((entry.name, _started(Path(entry.path))))
    outcome.folders_total = len(folders)
    latest = protected.latest_dir.resolve() if protected.latest_dir is not None else None
    for name in sorted(policy.candidates(folders, now)):
        folder = runs_dir / name
        why = protected.reason(name)
        if why is None and latest is not None and folder.resolve() == latest:
            why = "LATEST points at it"
        if why is not None:
            outcome.folders_kept[name] = why
            continue
        with _unless_locked(folder) as free:
            if not free:
                outcome.folders_kept[name] = "in progress (a session holds it locked)"
                continue
            if not outcome.dry_run:
                shutil.rmtree(folder)
        outcome.folders_deleted.append(name)


def prune_store(store: Store, policy: Policy, protected: Protected, outcome: Outcome) -> None:
    rows = store.runs(limit=2**31 - 1)
    outcome.runs_total = len(rows)
    by_id = {row.run_id: row for row in rows}
    doomed = policy.candidates([(r.run_id, r.started_at) for r in rows], _now())
    chosen: list[str] = []
    for run_id in sorted(doomed):
        row = by_id[run_id]
        why = protected.reason(row.run_id, row.run_key)
        if why is None and row.status in IN_PROGRESS:
            why = f"in progress (status {row.status})"
        if why is not None:
            outcome.runs_kept[run_id] = why
            continue
        chosen.append(run_id)
    outcome.runs_deleted = chosen
    before = store.size_bytes()
    if chosen and not outcome.dry_run:
        store.delete_runs(chosen)
        store.compact()
    outcome.store_bytes = (before, store.size_bytes())


def _now() -> datetime:
    return datetime.now(timezone.utc)


def prune(
    *,
    runs_dir: Path,
    baselines_dir: Path,
    store_url: str | None,
    policy: Policy,
    dry_run: bool,
    project: Path | None = None,
) -> Outcome:
    """Prune run folders under ``runs_dir`` and the store at ``store_url`` (None: no store).
    ``project``: the project root, inside which no link on the way to them is followed."""
    outcome = Outcome(dry_run=dry_run)
    protected = protected_runs(runs_dir, baselines_dir, project)
    prune_folders(runs_dir, policy, protected, outcome, _now(), project)
    if store_url is None:
        return outcome
    if "://" not in store_url and not Path(store_url).exists():
        outcome.store = f"{store_url} (none yet)"
        return outcome
    if "://" not in store_url:
        _no_link(Path(store_url), "store file", project)
    try:
        with open_store(store_url) as store:
            outcome.store = store.url
            prune_store(store, policy, protected, outcome)
    except StoreError as exc:
        raise GoldevalError(str(exc)) from None
    return outcome


def summary_of(outcome: Outcome) -> dict[str, Any]:
    """The outcome as JSON (``--json``)."""
    return {
        "dryRun": outcome.dry_run,
        "folders": {
            "total": outcome.folders_total,
            "deleted": outcome.folders_deleted,
            "kept": outcome.folders_kept,
            "leftAlone": outcome.skipped,
        },
        "store": None
        if outcome.store is None
        else {
            "url": outcome.store,
            "total": outcome.runs_total,
            "deleted": outcome.runs_deleted,
            "kept": outcome.runs_kept,
            "bytesBefore": outcome.store_bytes[0] if outcome.store_bytes else None,
            "bytesAfter": outcome.store_bytes[1] if outcome.store_bytes else None,
        },
    }
