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

from goldeval.core.safe_files import link_on_the_way

Kind = Literal["file", "folder"]


def write_target_problem(path: Path, *, project: Path, kind: Kind) -> str | None:
    """What stops ``path`` (absolute) from being written as a ``kind``, or None."""
    link = link_on_the_way(path, project)
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
