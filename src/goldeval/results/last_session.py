"""``LAST_SESSION`` in the runs folder: how the last golden session ended, and its run.

``LATEST`` names the last *complete* run, so after a session cut short by ``-x`` or a signal,
or refused before any item ran (a baseline of another protocol: 65), it still names an
earlier run that passed, and ``goldeval gate`` with no run re-gated that one: exit 0 right
after a session that exited 1, 65 or 75. The session's own record says which run it wrote
(if any) and how it ended, so a command given no run takes the last session's run, and
refuses when that session wrote none (:func:`goldeval.cli.runs.latest_run`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from goldeval.core.limits import LimitExceeded, loads_json
from goldeval.results.run_folder import atomic_write, refuse_link

NAME = "LAST_SESSION"
#: A record is a few hundred bytes; anything bigger is not one (never read whole).
_MAX_BYTES = 16 * 1024


#: Why a session that began recorded no end (:func:`write_session_begun`'s record).
NO_END = (
    "the session began and recorded no end: it stopped before its run did (a usage error "
    "such as a bad option or a missing baseline file, a crash or a kill; see its output)"
)


@dataclass(frozen=True)
class LastSession:
    #: When it finished; for a session that recorded no end, when it began.
    finished_at: str
    #: None: the session began and recorded no end.
    exit_code: int | None
    reason: str
    #: The run folder the session's decision is about; None: it wrote none.
    run_dir: Path | None


def write_last_session(out_dir: Path, code: int, reason: str, run_dir: Path | None) -> None:
    """Record the session. A session that wrote no run records itself only where a command
    could take an earlier run for it (a LATEST or a record is there): a session refused
    before anything ran creates no folder and no file in a project that has no run yet."""
    path = out_dir / NAME
    if run_dir is None and not ((out_dir / "LATEST").exists() or path.exists()):
        return
    refuse_link(path, NAME)
    record = {
        "finishedAt": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"),
        "exitCode": int(code),
        "reason": reason,
        "run": str(run_dir.resolve()) if run_dir is not None else None,
    }
    atomic_write(path, json.dumps(record, ensure_ascii=False) + "\n", durable=False)


def write_session_begun(out_dir: Path) -> None:
    """Record that a session began (replaced by its end, :func:`write_last_session`): a
    session that stops before recording its end (a usage error at start-up, a crash, a kill)
    must not leave an earlier session's green record for ``goldeval gate`` to re-gate. Only
    where a command could take an earlier run for it, as :func:`write_last_session`."""
    path = out_dir / NAME
    if not ((out_dir / "LATEST").exists() or path.exists()):
        return
    refuse_link(path, NAME)
    record = {
        "startedAt": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"),
        "exitCode": None,
        "reason": NO_END,
        "run": None,
    }
    atomic_write(path, json.dumps(record, ensure_ascii=False) + "\n", durable=False)


def read_last_session(out_dir: Path) -> LastSession | None:
    """The record, None when there is none or it is not one (a link, too big, not JSON)."""
    path = out_dir / NAME
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > _MAX_BYTES:
            return None
        doc = loads_json(path.read_text(encoding="utf-8"), what=NAME)
    except (OSError, ValueError, LimitExceeded):  # 5,000 "[": RecursionError in json
        return None
    if not isinstance(doc, dict):
        return None
    if doc.get("exitCode") is None and isinstance(doc.get("startedAt"), str):
        return LastSession(doc["startedAt"], None, str(doc.get("reason") or NO_END), None)
    if type(doc.get("exitCode")) is not int:
        return None
    run = doc.get("run")
    named = Path(run) if isinstance(run, str) and run else None
    if named is not None and not named.is_dir():
        named = path.parent / named.name  # a runs folder moved or downloaded elsewhere
    return LastSession(
        str(doc.get("finishedAt") or ""),
        doc["exitCode"],
        str(doc.get("reason") or ""),
        named,
    )
