"""Writing an imported dataset: built in a temporary folder, moved into place in one rename.

``golden/.<name>.import-<pid>-XXXX`` holds the folder while it is written and checked. It is
removed on every exit: errors, Ctrl-C, and SIGTERM/SIGHUP (turned into ``SystemExit`` for the
duration of the import so ``finally`` runs). One left by an import killed with SIGKILL (its
process no longer runs) is removed by the next import of that name and reported. The final
``rename`` is atomic: of several imports of one name, exactly one wins; the others are told
the name exists.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from goldeval.cli.importers.model import ImportReport, Row, import_error
from goldeval.core.errors import GoldevalError
from goldeval.core.limits import default, describe_bytes
from goldeval.providers.fixture import dumps_sidecar

_TERMINATING = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class _Terminate:
    """SIGTERM/SIGHUP as ``SystemExit(128 + signal)``, held back while the temporary folder
    is being removed (so the removal is not cut short) and raised right after it."""

    def __init__(self) -> None:
        self.holding = False
        self.pending: int | None = None
        self.raised = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        # after the first signal has ended the import, a second one must not cut the
        # removal short (it could arrive between ``finally:`` and ``held()``)
        if self.holding or self.raised:
            self.pending = signum
            return
        self.raised = True
        raise SystemExit(128 + signum)

    @contextmanager
    def held(self) -> Iterator[None]:
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
        if self.pending is not None and not self.raised:
            self.raised = True
            raise SystemExit(128 + self.pending)


@contextmanager
def exit_on_terminate() -> Iterator[_Terminate]:
    """Install the handler for the block (main thread only: where Python runs handlers)."""
    terminate = _Terminate()
    if threading.current_thread() is not threading.main_thread():
        yield terminate
        return
    previous = {sig: signal.signal(sig, terminate) for sig in _TERMINATING}
    try:
        yield terminate
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def _running(pid: int) -> bool:
    if pid == os.getpid() or os.name == "nt":  # Windows: signal 0 is CTRL_C_EVENT, not a probe
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. PermissionError: it runs, as someone else
        return True
    return True


def clear_stale(golden_root: Path, name: str, report: ImportReport) -> None:
    """Remove the temporary folders of imports of ``name`` whose process is gone."""
    owner = re.compile(rf"^\.{re.escape(name)}\.import-(\d+)-")
    for folder in sorted(golden_root.glob(f".{name}.import-*")):
        found = owner.match(folder.name)
        if found is not None and _running(int(found.group(1))):
            continue  # an import of this name running now, e.g. in parallel: not ours
        if found is None or folder.is_symlink() or not folder.is_dir():
            report.notes.append(
                f"{folder} is left from an earlier import: remove it if no import is running"
            )
            continue
        shutil.rmtree(folder, ignore_errors=True)
        report.notes.append(
            f"removed {folder.name}, left by an import that was killed (process {found.group(1)})"
        )


@contextmanager
def staging(golden_root: Path, name: str, terminate: _Terminate) -> Iterator[Path]:
    """A temporary folder in ``golden_root``, removed (with ``golden_root`` if this import
    created it and it is empty) on any exit."""
    created_root = not golden_root.exists()
    # not mkdtemp: its 0700 would become the dataset folder's mode; mkdir honours umask
    tmp = golden_root / f".{name}.import-{os.getpid()}-{secrets.token_hex(6)}"
    try:
        # A signal that lands as mkdir returns is held until the ``try`` whose ``finally``
        # removes the folder has begun (raised there, it left the folder behind).
        with terminate.held():
            try:
                golden_root.mkdir(parents=True, exist_ok=True)
                tmp.mkdir()
            except OSError as exc:
                raise _cannot_write(golden_root, exc) from None
        yield tmp
    finally:
        with terminate.held():
            shutil.rmtree(tmp, ignore_errors=True)
            if created_root:
                try:
                    golden_root.rmdir()  # only when empty: another import may have won
                except OSError:
                    pass


def place(tmp: Path, target: Path) -> None:
    """Rename ``tmp`` to ``target`` atomically; a target that appeared meanwhile wins."""
    try:
        os.rename(tmp, target)
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.EISDIR, errno.ENOTDIR):
            raise exists_already(target) from None
        raise _cannot_write(target, exc) from None


def exists_already(target: Path) -> GoldevalError:
    return GoldevalError(f"{target} exists already: choose another --name or remove it")


def _cannot_write(where: Path, exc: OSError) -> GoldevalError:
    return GoldevalError(
        f"{where}: cannot write the dataset ({exc.strerror or exc})",
        hint="check the folder's permissions and free space",
    )


def write_dataset(
    folder: Path, name: str, source: Path, fmt: str, rows: list[Row], report: ImportReport
) -> None:
    try:
        _write(folder, name, source, fmt, rows, report)
    except OSError as exc:
        raise _cannot_write(folder.parent, exc) from None


def _refuse_unreplayable(rows: list[Row]) -> None:
    """An answer (or its sidecar) over ``fixture_bytes`` is refused before anything is written:
    the import said 0 and the dataset it wrote could not run (a 4 KB parquet file held a
    100 MB answer; pytest refuses to replay a fixture that size)."""
    most = int(default("fixture_bytes"))
    calls_most = int(default("answer_tool_calls"))
    for row in rows:
        calls = (row.sidecar or {}).get("toolCalls") or []
        if len(calls) > calls_most:
            raise import_error(
                row.where,
                "tool calls",
                f"{len(calls):,} tool calls, more than one answer may make "
                f"({calls_most}, answer_tool_calls): pytest could not replay them",
                "keep the calls the row is about, or leave them out and record the answer",
            )
        for what, text in (
            ("answer", row.fixture),
            ("tool calls", dumps_sidecar(row.sidecar) if row.sidecar else None),
        ):
            size = len(text.encode("utf-8", errors="surrogatepass")) if text else 0
            if size > most:
                raise import_error(
                    row.where,
                    what,
                    f"{describe_bytes(size)}, more than a recorded answer may hold "
                    f"({describe_bytes(most)}, fixture_bytes): pytest could not replay it",
                    "shorten it in the source, or leave the answer out and record it with "
                    "--golden-mode=record",
                )


def _write(
    folder: Path, name: str, source: Path, fmt: str, rows: list[Row], report: ImportReport
) -> None:
    _refuse_unreplayable(rows)
    version = f"{name}-v1"
    manifest = (
        f"# Imported by `goldeval import` from {source.name} ({fmt}); review the rows.\n"
        f"version: {version}\nname: {name}\n"
        f"description: {json.dumps(f'Imported from {source.name} ({fmt}).')}\n"
        f'changelog:\n  - "{version}: imported {len(rows)} rows."\npack: none\n'
    )
    (folder / "dataset.yaml").write_text(manifest, encoding="utf-8")
    with (folder / f"{name}.jsonl").open("w", encoding="utf-8") as fh:
        for row in rows:
            # allow_nan=False: every value went through json_data; a NaN here is a bug
            fh.write(json.dumps(row.dump(), ensure_ascii=False, allow_nan=False) + "\n")
    with_fixture = [r for r in rows if r.fixture is not None]
    if with_fixture:
        (folder / "fixtures").mkdir()
    for row in with_fixture:
        assert row.fixture is not None and row.id is not None
        (folder / "fixtures" / f"{row.id}.out.md").write_text(row.fixture, encoding="utf-8")
        if row.sidecar:
            (folder / "fixtures" / f"{row.id}.out.json").write_text(
                dumps_sidecar(row.sidecar), encoding="utf-8"
            )
    report.fixtures = len(with_fixture)
    missing = len(rows) - len(with_fixture)
    if missing:
        report.notes.append(
            f"{missing} row(s) have no answer in the source: record their "
            f"fixtures with pytest --golden={version} --golden-mode=record"
        )
