"""Whether a path the session will write can be written, asked before the run.

The runs folder, the run store file, ``--golden-save-baseline``, ``--golden-junit`` and the
response cache were found unusable only when written: after every model call (a folder that
is a file, ``/proc``, a directory named as the file: "retry it", exit 75, for a mistake no
retry fixes), or through a link (``baselines/sub`` -> a folder outside the project: the
baseline was written there). :func:`write_target_problem` answers for every such path, the
same way, before anything runs; the writers keep their own checks for what changes later.

Links: inside the project (a path under ``project``), every existing component must be a
real folder or file: goldeval writes nothing through a link. A path the user names outside
the project is the user's to choose; only its last component may not be a link.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Literal

Kind = Literal["file", "folder"]


def write_target_problem(path: Path, *, project: Path, kind: Kind) -> str | None:
    """What stops ``path`` (absolute) from being written as a ``kind``, or None."""
    link = _link_on_the_way(path, project)
    if link is not None:
        return (
            f"{link} is a symbolic link: goldeval writes nothing through links "
            "(remove the link, or name the real path)"
        )
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return _parent_problem(path)
    except OSError as exc:
        return f"cannot be used ({exc.strerror or exc})"
    if kind == "file" and stat.S_ISDIR(st.st_mode):
        return "is a folder: name a file"
    if kind == "folder" and not stat.S_ISDIR(st.st_mode):
        return "is a file, not a folder: name a folder"
    if kind == "file" and not stat.S_ISREG(st.st_mode):
        return "is not a regular file (a FIFO, a device or a socket): name a file"
    target = path if kind == "folder" else path.parent
    if not os.access(target, os.W_OK | os.X_OK):
        return f"{target} is not writable"
    return None


def _link_on_the_way(path: Path, project: Path) -> Path | None:
    """The first link on ``path`` that lies inside ``project``, else ``path`` itself when it
    is a link. Walked on real paths, component by component: a path spelled ``//tmp/...``
    or through a link to the project (``/tmp/alias/lnk`` with ``alias -> project``) is the
    same place as its plain spelling (both went around a lexical check)."""
    inside = os.path.realpath(project)
    parts = Path(path).parts
    if not parts:
        return None
    real = os.path.realpath(os.sep if parts[0].startswith("//") else parts[0])
    for number, part in enumerate(parts[1:], start=2):
        candidate = os.path.join(real, part)
        try:
            mode = os.lstat(candidate).st_mode
        except OSError:
            return None  # not there yet: created as a real folder or file
        if stat.S_ISLNK(mode):
            last = number == len(parts)
            if last or _within(real, inside):
                return Path(candidate)
            real = os.path.realpath(candidate)
        else:
            real = os.path.normpath(candidate)
    return None


def _within(place: str, root: str) -> bool:
    return place == root or place.startswith(root.rstrip(os.sep) + os.sep)


def _parent_problem(path: Path) -> str | None:
    """``path`` does not exist: its nearest existing folder must be a writable folder."""
    for ancestor in path.parents:
        try:
            st = os.stat(ancestor)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            return f"{ancestor} cannot be used ({exc.strerror or exc})"
        if not stat.S_ISDIR(st.st_mode):
            return f"{ancestor} is a file, not a folder"
        if not os.access(ancestor, os.W_OK | os.X_OK):
            return f"{ancestor} is not writable"
        return None
    return None
