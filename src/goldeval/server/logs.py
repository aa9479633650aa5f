"""Structured logs: one JSON object per line on stderr, one line per event.

Fields: ``ts``, ``level``, ``event`` and whatever the event carries (``run_id``, ``case_id``,
``dataset_version``, ``idempotency_key``, ``status``...). Callers pass identifiers and counts,
never keys, store URLs with passwords or request bodies; :func:`event` additionally replaces
every registered secret by ``***`` (defence in depth).

A run's own log (pytest's output, ``<work dir>/<id>.log``) is written masked, mode 0600, by
:class:`RunLog` (see below).
"""

from __future__ import annotations

import codecs
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from goldeval.core.settings import MASK, mask_secrets

LOGGER = "goldeval.server"
_secrets: set[str] = set()
_lock = threading.Lock()


def register_secret(secret: str | None) -> None:
    """Never write ``secret`` into a log line."""
    if secret:
        with _lock:
            _secrets.add(secret)


def _scrub(text: str) -> str:
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    return mask_secrets(text, secrets)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            payload.update(fields)
        return _scrub(json.dumps(payload, ensure_ascii=False, default=str))


def configure(level: int = logging.INFO) -> None:
    """Send the service's logs to stderr as JSON lines (idempotent)."""
    logger = logging.getLogger(LOGGER)
    logger.setLevel(level)
    if not any(getattr(h, "_goldeval", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        handler._goldeval = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.propagate = False


def event(name: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log one event with its fields (None values are left out)."""
    logging.getLogger(LOGGER).log(
        level, name, extra={"fields": {k: v for k, v in fields.items() if v is not None}}
    )


# --------------------------------------------------------------------------- a run's own log
#
# ``<work dir>/<service run id>.log`` is the whole output of a run's pytest process, which runs
# the project's code (conftest.py, provider functions): it may print a credential the run
# inherited (the store URL, a provider key). The output goes through a pipe to a small writer
# process that masks it as it is written, with the masker of the log bundle
# (:meth:`ServiceSettings.masked`: the same secret forms, ``mask_secrets``), into a file only
# the service's user may read. A process, not a thread of the worker: a pytest process whose
# worker died goes on to its INTERRUPTED end (its parent-death SIGTERM), and its log must
# still say so. The writer has its own session (a Ctrl-C meant for the service does not stop
# it) and ends when the last holder of the pipe closes it.

#: A run's log file: pytest's whole output, readable by the service's user only.
RUN_LOG_MODE = 0o600
#: Characters of one line kept before it is written in pieces (a line with no end).
RUN_LOG_LINE = 64 * 1024
_READ = 64 * 1024
_WRITER = (
    "import sys\n"
    "if sys.path and sys.path[0] == '':\n"  # not the work folder's files: only goldeval's
    "    del sys.path[0]\n"
    "from goldeval.server.logs import run_log_main\n"
    "sys.exit(run_log_main(sys.argv[1:]))\n"
)


def open_run_log(path: Path) -> int:
    """An append-only descriptor of ``path``, created with :data:`RUN_LOG_MODE` (a file an
    older version created 0644 is set to it too); never through a symbolic link."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, RUN_LOG_MODE)
    try:
        os.fchmod(fd, RUN_LOG_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def spanning(text: str, cut: int, secrets: Sequence[str]) -> tuple[int, int] | None:
    """(start, end) of a secret that lies whole in ``text`` across ``cut`` (None: none)."""
    for secret in secrets:
        at = text.find(secret, max(0, cut - len(secret) + 1), cut + len(secret) - 1)
        if 0 <= at < cut:
            return at, at + len(secret)
    return None


class LineMasker:
    """A byte stream masked as it comes: whole lines, and a line longer than ``limit``
    characters in pieces, cut ``reach - 1`` characters before the end at least (a secret
    beginning after that may still be completed by what comes next). A secret across the cut
    is masked with the piece before it, so no secret is left half on each side. Bytes that
    are not UTF-8 pass unchanged (``surrogateescape``)."""

    def __init__(self, secrets: Sequence[str], limit: int = RUN_LOG_LINE) -> None:
        self._secrets = tuple(s for s in secrets if s)
        self._reach = max((len(s) for s in self._secrets), default=1)
        self._limit = limit + self._reach
        #: A secret holding a line break could span a line's end before its rest arrives.
        self._multiline = any("\n" in s for s in self._secrets)
        self._decode = codecs.getincrementaldecoder("utf-8")("surrogateescape").decode
        self._pending = ""

    def feed(self, data: bytes, *, final: bool = False) -> bytes:
        """The masked bytes that can be written after ``data``; ``final``: the stream ended."""
        text = self._pending + self._decode(data, final)
        cut = len(text)
        if not final:
            cut = text.rfind("\n") + 1
            settled = len(text) - (self._reach - 1)  # no secret not yet whole begins before
            if len(text) - cut > self._limit:
                cut = settled
            elif self._multiline:
                cut = max(0, min(cut, settled))
        across = spanning(text, cut, self._secrets)
        if across is None:
            done, self._pending = mask_secrets(text[:cut], self._secrets), text[cut:]
        else:
            done = mask_secrets(text[: across[0]], self._secrets) + MASK
            self._pending = text[across[1] :]
        return done.encode("utf-8", "surrogateescape")


def _write_all(fd: int | None, data: bytes) -> int | None:
    """Write ``data`` whole; a failed write (a full disk) loses it and the later ones (None)."""
    view = memoryview(data)
    while fd is not None and view:
        try:
            view = view[os.write(fd, view) :]
        except OSError:
            return None
    return fd


def copy_masked(source: int, path: Path, secrets: Sequence[str]) -> None:
    """Copy ``source`` (the run's output pipe) to ``path`` masked, until its last writer
    closes it. A file that cannot be written loses the output but never stops the copy: the
    run's pytest must never meet a broken pipe."""
    masker = LineMasker(secrets)
    try:
        fd: int | None = open_run_log(path)
    except OSError:
        fd = None
    try:
        while True:
            data = os.read(source, _READ)
            fd = _write_all(fd, masker.feed(data, final=not data))
            if not data:
                return
    finally:
        if fd is not None:
            os.close(fd)


def run_log_main(argv: Sequence[str]) -> int:
    """The writer process: ``argv`` is the log's path and the descriptor the secret forms
    arrive on (JSON, never the command line); the output comes on standard input."""
    path, secrets_fd = argv
    with os.fdopen(int(secrets_fd), "rb") as pipe:
        secrets = [str(s) for s in json.loads(pipe.read() or b"[]")]
    copy_masked(0, Path(path), secrets)
    return 0


class RunLog:
    """The worker's side of a run's log: :attr:`stdout`, the pipe the run's pytest writes
    to; the writer process at its other end; the worker's own notes through the same pipe."""

    def __init__(
        self, path: Path, secrets: Sequence[str], python: str, env: Mapping[str, str]
    ) -> None:
        read, self.stdout = os.pipe()
        forms_read, forms = os.pipe()
        try:
            self._writer = subprocess.Popen(
                [python, "-c", _WRITER, str(path), str(forms_read)],
                cwd=path.parent,
                env=dict(env),
                stdin=read,
                stdout=subprocess.DEVNULL,
                pass_fds=(forms_read,),
                start_new_session=True,
            )
        except BaseException:
            os.close(self.stdout)
            os.close(forms)
            raise
        finally:
            os.close(read)
            os.close(forms_read)
        # A writer that died at once loses the run's output, never the run (EPIPE ignored).
        _write_all(forms, json.dumps(list(secrets)).encode("utf-8"))
        os.close(forms)

    def note(self, text: str) -> None:
        """A line of the worker's own in the log (masked as the rest)."""
        _write_all(self.stdout, text.encode("utf-8"))

    def close(self, timeout: float = 5.0) -> None:
        """Close the worker's end and wait (at most ``timeout``) for the writer to write the
        rest: the log is whole before it is read. A process the run left holding the pipe
        keeps the writer going after that."""
        if self.stdout >= 0:
            os.close(self.stdout)
            self.stdout = -1
        try:
            self._writer.wait(timeout)
        except subprocess.TimeoutExpired:
            event("run log still open", logging.WARNING, writer=self._writer.pid)
