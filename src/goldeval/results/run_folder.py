"""Writing a run folder: run.json, summary.json, report.md, per-case files, LATEST, history."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from goldeval.core.errors import GoldevalError
from goldeval.results.documents import RunDocument
from goldeval.results.rollup import COUNTER_KEYS

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, writes stay atomic
    fcntl = None  # type: ignore[assignment]


def lock_fd(fd: int) -> None:
    """Block until this process holds the exclusive advisory lock on ``fd`` (POSIX flock;
    released when the fd is closed, also when the process dies)."""
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)


def dumps(doc: Any) -> str:
    """Pretty JSON; a top-level ``cases`` list is written one case per line.

    One line per case keeps run.json and baselines diffable (a changed case is a changed
    line) while using the C encoder for the bulk, which matters at 100,000 cases.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), list):
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    parts = []
    for key, value in doc.items():
        name = json.dumps(key, ensure_ascii=False)
        if key == "cases" and value:
            body = ",\n".join(
                "    " + json.dumps(case, ensure_ascii=False, separators=(", ", ": "))
                for case in value
            )
            parts.append(f"  {name}: [\n{body}\n  ]")
        else:
            text = json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  ")
            parts.append(f"  {name}: {text}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


class ArtifactError(GoldevalError):
    """An artifact path that must not be written (a symlink, or not a regular file).

    Never written through: a link could point anywhere outside the project.
    """


_MODE: list[int] = []


def refresh_file_mode() -> int:
    """Compute the artifact file mode from the process umask (called once per finalisation).

    ``mkstemp`` creates files 0600 while ``open`` honours the umask; every artifact gets the
    mode ``open`` would give (0644 under the usual umask 022), so a run folder is uniformly
    readable by whoever may read the user's other files. Read from /proc where possible: the
    ``os.umask`` round trip briefly changes a process-wide setting.
    """
    umask: int | None = None
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    umask = int(line.split()[1], 8)
                    break
    except (OSError, ValueError, IndexError):
        umask = None
    if umask is None:
        umask = os.umask(0o077)  # stricter while we look, never looser
        os.umask(umask)
    _MODE[:] = [0o666 & ~umask]
    return _MODE[0]


def file_mode() -> int:
    return _MODE[0] if _MODE else refresh_file_mode()


def refuse_link(path: Path, what: str = "artifact") -> None:
    """Raise :class:`ArtifactError` if ``path`` is a symlink or exists as a non-regular file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise ArtifactError(
            f"{what} is a symbolic link; refusing to write through it",
            path=path,
            hint="remove the link (goldeval never follows links when writing)",
        )
    if stat.S_ISDIR(st.st_mode):
        # An OSError like any other failed write (exit 75), but with a message that says it.
        raise IsADirectoryError(errno.EISDIR, f"{what} is a directory, not a file", str(path))


def check_inside(root: Path, path: Path) -> None:
    """Every existing component of ``path`` below ``root`` is a real directory or file.

    ``path`` must lie under ``root``; a symlinked folder in between would move the write
    elsewhere, so it is refused like a symlinked file.
    """
    rel = path.relative_to(root)
    current = root
    for part in rel.parts:
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise ArtifactError(
                "artifact folder is a symbolic link; refusing to write through it",
                path=current,
                hint="remove the link (goldeval never follows links when writing)",
            )


def fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (best effort where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def temp_file(parent: Path, name: str) -> tuple[int, Path]:
    """A new, uniquely named temp file beside ``parent/name`` (never a fixed name: two
    processes finishing the same folder must not share one) with the artifact file mode."""
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{name}.", suffix=".tmp")
    try:
        os.fchmod(fd, file_mode())
    except OSError:
        os.close(fd)
        Path(tmp).unlink(missing_ok=True)
        raise
    return fd, Path(tmp)


def atomic_write(path: Path, text: str, *, durable: bool = True, root: Path | None = None) -> None:
    """Write via a unique temp file + rename, so a crash never leaves a half-written artifact.

    With ``durable`` the data is fsynced before the rename and the rename after it (per-case
    artifacts skip this and are synced in one go before the manifest). A symlink or a
    directory at ``path`` is refused, never replaced or written through; with ``root``, no
    folder between ``root`` and ``path`` may be a symlink either.
    """
    if root is not None:
        check_inside(root, path.parent)  # before mkdir: it would create folders through a link
    path.parent.mkdir(parents=True, exist_ok=True)
    if root is not None:
        check_inside(root, path.parent)
    refuse_link(path)
    fd, tmp = temp_file(path.parent, path.name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        refuse_link(path)  # created meanwhile? still never replaced
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


_atomic_write = atomic_write


def safe_child(root: Path, *parts: str) -> Path:
    """``root/parts`` that is guaranteed to stay inside ``root`` (ids are untrusted)."""
    target = root.joinpath(*parts).resolve()
    if not target.is_relative_to(root.resolve()):
        raise ValueError(f"path {'/'.join(parts)!r} escapes {root}")
    return target


SUMMARY_KEYS = (
    "runId",
    "timestamp",
    "status",
    "model",
    "judgeModel",
    "datasetVersion",
    "datasetHash",
    "packDatasetVersion",
    "packHash",
    "gitCommit",
    "experimentId",
    "configFingerprint",
    *COUNTER_KEYS,
    "durationMs",
    "qualityGate",
    "exitDecision",
)


def summary(run: RunDocument) -> dict[str, Any]:
    """``summary.json``: the run's identity, counters, gate and exit decision, and its rates,
    in the order of :data:`SUMMARY_KEYS` (each value as run.json holds it)."""
    fields = run.model_dump(
        mode="json", by_alias=True, exclude_unset=True, exclude={"cases", "comparison"}
    )
    out = {k: fields[k] for k in SUMMARY_KEYS if k in fields}
    metrics = run.metrics
    rates = metrics.dump() if metrics is not None else {}
    # The rates are the metrics with hits (the nine reference rates, unstableCaseRate), in
    # run.json's order: the Metrics model declares them in the order the writer adds them.
    out["metrics"] = {k: v for k, v in rates.items() if isinstance(v, dict) and "hits" in v}
    out["slices"] = rates.get("slices", {})
    out["graders"] = rates.get("graders", {})
    out["weightedScore"] = metrics.weighted_score if metrics is not None else None
    out["latency"] = metrics.latency if metrics is not None else None
    out["tokens"] = rates.get("tokens")
    return out


def write_case(run_dir: Path, case: Mapping[str, Any], mode: str) -> list[Path]:
    """Per-case artifacts (``--golden-artifacts``): result.json, output.md, judge.md, and
    per-attempt copies when there are several attempts."""
    written: list[Path] = []
    if mode == "never" or (mode == "failure" and case["status"] not in ("FAIL", "ERROR")):
        return written
    check_inside(run_dir, run_dir / "cases")
    try:
        case_dir = safe_child(run_dir, "cases", case["caseId"])
    except ValueError as exc:  # a link inside cases/ that leads out
        raise ArtifactError(str(exc), path=run_dir / "cases") from None
    root = run_dir.resolve()

    def atomic_write(path: Path, text: str) -> None:
        # Synced once for the whole run before the manifest (one fsync per file costs
        # about 0.4 ms: 40 s at 100,000 cases).
        _atomic_write(path, text, durable=False, root=root)

    attempts = case["attempts"]
    atomic_write(case_dir / "result.json", dumps(dict(case)))
    written.append(case_dir / "result.json")
    last = next(
        (a for a in reversed(attempts) if a.get("output") is not None or a["status"] == "ERROR"),
        None,
    )
    if last is not None:
        text = last.get("output")
        if text is None:
            text = f"{last.get('errorKind')}: {last.get('errorMessage')}\n"
        atomic_write(case_dir / "output.md", text)
        written.append(case_dir / "output.md")
        if last.get("judgeOutput"):
            atomic_write(case_dir / "judge.md", last["judgeOutput"])
            written.append(case_dir / "judge.md")
    if len(attempts) > 1:
        for a in attempts:
            adir = case_dir / "attempts" / str(a["index"])
            atomic_write(adir / "result.json", dumps(dict(a)))
            written.append(adir / "result.json")
            if a.get("output") is not None:
                atomic_write(adir / "output.md", a["output"])
                written.append(adir / "output.md")
            if a.get("judgeOutput"):
                atomic_write(adir / "judge.md", a["judgeOutput"])
                written.append(adir / "judge.md")
    return written


def history_line(run: RunDocument) -> dict[str, Any]:
    """One line of ``history.jsonl``: who, what and how the run ended (nulls left out)."""
    metrics = run.metrics
    overall = metrics.overall_pass_rate if metrics is not None else None
    gate, decision = run.quality_gate, run.exit_decision
    extra = run.model_extra or {}
    line = {
        "timestamp": run.timestamp,
        "runId": run.run_id,
        "gitCommit": run.git_commit,
        "experiment": extra.get("experimentId"),
        "model": run.model,
        "judgeModel": extra.get("judgeModel"),
        "datasetVersion": run.dataset_version,
        "datasetHash": run.dataset_hash,
        "configFingerprint": run.config_fingerprint,
        "overallHits": overall.hits if overall is not None else None,
        "overallTotal": overall.total if overall is not None else None,
        "overallPassRate": overall.rate if overall is not None else None,
        "qualityGate": gate.verdict if gate is not None else "NOT_APPLIED",
        "status": run.status,
        "exitCode": decision.code if decision is not None else None,
    }
    return {k: v for k, v in line.items() if v is not None}


def _open_no_follow(path: Path, flags: int, what: str) -> int:
    """Open a regular file without following a symlink at ``path`` (ELOOP → ArtifactError)."""
    refuse_link(path, what)
    try:
        fd = os.open(
            path,
            flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0),
            file_mode(),
        )
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ArtifactError(
                f"{what} is a symbolic link; refusing to write through it",
                path=path,
                hint="remove the link (goldeval never follows links when writing)",
            ) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ArtifactError(f"{what} is not a regular file", path=path, hint="remove or rename it")
    return fd


def append_history(out_dir: Path, run: RunDocument) -> tuple[Path, int, int]:
    """Append the run's line to ``history.jsonl``; return (path, offset before, after).

    One locked O_APPEND write: runs finishing at the same moment never interleave. A line
    cut short by a full disk is truncated away again, so the file only ever holds whole lines.
    """
    data = (json.dumps(history_line(run), ensure_ascii=False) + "\n").encode("utf-8")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "history.jsonl"
    fd = _open_no_follow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, "history.jsonl")
    try:
        lock_fd(fd)
        before = os.fstat(fd).st_size
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(errno.ENOSPC, "short write to history.jsonl", str(path))
            os.fsync(fd)
        except BaseException:
            try:
                os.ftruncate(fd, before)
            except OSError:
                pass
            raise
        return path, before, before + len(data)
    finally:
        os.close(fd)


def append_line(path: Path, line: str, what: str) -> None:
    """Append one line to a log file (``baselines/history.jsonl``) never through a link, in one
    locked O_APPEND write."""
    fd = _open_no_follow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, what)
    try:
        lock_fd(fd)
        os.write(fd, (line.rstrip("\n") + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def retract_history(path: Path, before: int, after: int) -> bool:
    """Take back a line appended by :func:`append_history` if it is still the last one."""
    try:
        fd = _open_no_follow(path, os.O_WRONLY, "history.jsonl")
    except (OSError, ArtifactError):
        return False
    try:
        lock_fd(fd)
        if os.fstat(fd).st_size != after:
            return False  # another run appended since: keep its line, ours is superseded
        os.ftruncate(fd, before)
        os.fsync(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def write_latest(out_dir: Path, run_dir: Path) -> bytes | None:
    """Point LATEST at ``run_dir`` (atomic, never through a link); return its old content."""
    path = out_dir / "LATEST"
    refuse_link(path, "LATEST")
    try:
        fd = _open_no_follow(path, os.O_RDONLY, "LATEST")
    except FileNotFoundError:
        previous = None
    else:
        try:
            previous = os.read(fd, 1 << 16)
        finally:
            os.close(fd)
    atomic_write(path, str(run_dir.resolve()) + "\n")
    return previous
