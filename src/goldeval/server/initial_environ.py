"""Wipe a secret from the process's initial environment block, the one the kernel shows.

``os.environ.pop`` removes a variable from what this process and its children see, but not
from the block the kernel was given at ``exec``: ``/proc/<pid>/environ`` still reads it, and
a run's conftest.py (the same user) read every API key of the service, ADMIN included, from
``/proc/<its parent>/environ``. That block lives in the process's own memory (between
``env_start`` and ``env_end`` of ``/proc/self/stat``), so the value is overwritten there.

Linux only (elsewhere there is no such file to read it from). Reading another process's
memory (``/proc/<pid>/mem``) needs ptrace rights over it: run the service as a user the runs
cannot ptrace (see docs/service.md, "Secrets").
"""

from __future__ import annotations

import ctypes
from pathlib import Path

#: Fields of /proc/<pid>/stat after the ``(comm)`` field, counted from field 3 (``state``).
_ENV_START, _ENV_END = 50 - 3, 51 - 3


def wipe(name: str) -> int:
    """Overwrite the value of every ``name=`` entry of the initial environment block with
    NUL bytes; returns how many entries were wiped (0: none, or no such block here)."""
    try:
        stat = Path("/proc/self/stat").read_text(encoding="ascii")
    except OSError:
        return 0
    fields = stat[stat.rindex(")") + 2 :].split()
    try:
        start, end = int(fields[_ENV_START]), int(fields[_ENV_END])
    except (IndexError, ValueError):
        return 0
    if not 0 < start < end:
        return 0
    block = ctypes.string_at(start, end - start)
    prefix = name.encode("utf-8") + b"="
    wiped, offset = 0, 0
    for entry in block.split(b"\0"):
        if entry.startswith(prefix):
            ctypes.memset(start + offset + len(prefix), 0, len(entry) - len(prefix))
            wiped += 1
        offset += len(entry) + 1
    return wiped
