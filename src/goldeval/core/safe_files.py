"""Reading files of an untrusted dataset: regular files inside their folder, never blocking.

A dataset (rows, fixtures, manifest, rubric, calibration) and the pack are files anyone can
commit to a repository, and their contents end up in every report. So a link may point only
inside the dataset's folder (the project, for the pack), the target must be a regular file
(a FIFO would hang the run for ever on open, a device would be read without end), and errors
name the file and what to do, never the target's contents.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from goldeval.core.errors import DatasetError
from goldeval.core.limits import LimitExceeded, check_size, default


class InputFileTooLarge(LimitExceeded, DatasetError):
    """An input file over its size limit: a :class:`LimitExceeded` (``limit`` names the
    :class:`~goldeval.core.limits.LimitSpec`) that callers handling a bad dataset file as a
    :class:`DatasetError` report as one, naming the file."""


def check_file_size(
    size: int, path: Path | str, *, limit: str = "file_bytes", max_bytes: int | None = None
) -> None:
    """Raise :class:`InputFileTooLarge` when a file of ``size`` bytes is over ``max_bytes``
    (default: the limit ``limit``)."""
    bound = int(default(limit)) if max_bytes is None else max_bytes
    if size > bound:
        try:
            check_size(size, bound, what="the file", name=limit, path=path)
        except LimitExceeded as exc:
            raise InputFileTooLarge(limit, exc.message, path=path, hint=exc.hint) from None


_KIND_NAMES = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
)


def _kind(mode: int) -> str:
    for test, name in _KIND_NAMES:
        if test(mode):
            return name
    return "not a regular file"


def contained_file(
    path: Path,
    root: Path,
    *,
    what: str,
    source: Path | None = None,
    fld: str | None = None,
    line: int | None = None,
) -> Path:
    """``path`` resolved, after checking it is a regular file inside ``root``.

    A dataset is untrusted input that ends up in every report: a fixture linked to
    ``/proc/self/environ`` would copy the environment (and its secrets) into run.json, a
    ``rows:`` naming ``/etc/shadow`` would echo lines of it in errors, and a FIFO would hang the
    run for ever on open. So links may point anywhere *inside* ``root`` only, and the target
    must be a regular file. Only ``stat`` is used: nothing is opened here. The error is
    reported at ``source`` (the manifest or rows file that names the file) when given.
    """
    where = source if source is not None else path
    try:
        real = path.resolve(strict=True)
    except FileNotFoundError:
        raise DatasetError(f"{what} {path} not found", path=where, line=line, field=fld) from None
    except (OSError, RuntimeError) as exc:  # a symlink loop, a permission problem
        raise DatasetError(
            f"{what} {path} cannot be resolved ({exc})", path=where, line=line, field=fld
        ) from None
    root_real = root.resolve()
    if not real.is_relative_to(root_real):
        raise DatasetError(
            f"{what} {path} resolves to {real}, outside {root_real}",
            path=where,
            line=line,
            field=fld,
            hint=f"keep the file itself inside {root_real} (a copy, not a link out of it)",
        )
    try:
        mode = os.stat(real).st_mode
    except OSError as exc:
        raise DatasetError(
            f"{what} {path} cannot be read: {exc.strerror}", path=where, line=line, field=fld
        ) from None
    if not stat.S_ISREG(mode):
        raise DatasetError(
            f"{what} {path} is {_kind(mode)}, not a regular file",
            path=where,
            line=line,
            field=fld,
            hint="replace it with an ordinary file",
        )
    return real


class ContainedFiles:
    """:func:`contained_file` for many files of one folder (a dataset's fixtures), cheaply.

    Resolving every path (``Path.resolve``: one ``lstat`` per component) dominated fixture
    replay. Here a directory is resolved once and re-checked with one ``lstat`` (still the
    same directory, not a link), and a file that is no link needs only its own ``lstat``;
    links and anything unusual take the full :func:`contained_file` path. Nothing is cached
    beyond this object, which lives as long as one provider.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._root_real = root.resolve()
        self._dirs: dict[Path, tuple[Path, int, int]] = {}

    def _real_dir(self, folder: Path) -> Path | None:
        """``folder`` resolved if it is still the directory resolved before (not a link)."""
        try:
            st = os.lstat(folder)
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return None
        known = self._dirs.get(folder)
        if known is not None and known[1:] == (st.st_dev, st.st_ino):
            return known[0]
        real = folder.resolve()
        if not real.is_relative_to(self._root_real):
            return None
        self._dirs[folder] = (real, st.st_dev, st.st_ino)
        return real

    def file(self, folder: Path, name: str, *, what: str) -> str | None:
        """``folder/name`` resolved and checked as :func:`contained_file` does; ``None`` if
        there is no such file (not even a dangling link). Strings, not paths: building two
        ``Path`` objects per file cost more than the checks."""
        path = f"{folder}{os.sep}{name}"
        if _unusual_name(name):
            mode = 0  # not a plain file name: the full check
        else:
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                return None
            except OSError:
                mode = 0
        if stat.S_ISREG(mode):
            real_dir = self._real_dir(folder)
            if real_dir is not None:
                return f"{real_dir}{os.sep}{name}"
        return str(contained_file(Path(path), self.root, what=what))

    def read(
        self,
        folder: Path,
        name: str,
        *,
        what: str,
        limit: str = "file_bytes",
        max_bytes: int | None = None,
    ) -> bytes | None:
        """The bytes of ``folder/name`` with the checks of :meth:`file` and
        :func:`read_regular_file`; ``None`` if there is no such file (not even a dangling link).

        A plain name in a folder that is still the one resolved before is opened at once,
        without following a link (``O_NOFOLLOW``) and without blocking, and read if the open
        file is a regular one: one ``open`` and one ``fstat`` instead of two ``lstat`` calls
        before them (and no exception raised and caught for a sidecar that is not there). A
        link, a special file or anything unusual is closed unread and takes :meth:`file`.
        The size is checked against ``max_bytes`` (default: the limit ``limit``) with that
        same ``fstat``: :class:`InputFileTooLarge` before anything is read.
        """
        bound = int(default(limit)) if max_bytes is None else max_bytes
        if _NOFOLLOW and not _unusual_name(name):
            real_dir = self._real_dir(folder)
            if real_dir is not None:
                try:
                    fd = os.open(f"{real_dir}{os.sep}{name}", _READ_FLAGS | _NOFOLLOW)
                except FileNotFoundError:
                    return None
                except OSError:
                    fd = -1  # a link (ELOOP), a permission problem: the full check says which
                if fd >= 0:
                    try:
                        st = os.fstat(fd)
                        if stat.S_ISREG(st.st_mode):
                            if st.st_size > bound:
                                check_file_size(
                                    st.st_size,
                                    f"{folder}{os.sep}{name}",
                                    limit=limit,
                                    max_bytes=bound,
                                )
                            return read_fd(fd, st, max_bytes=bound, limit=limit)
                    except OSError as exc:
                        path = f"{folder}{os.sep}{name}"
                        raise DatasetError(f"cannot read: {exc.strerror}", path=path) from None
                    finally:
                        os.close(fd)
        real = self.file(folder, name, what=what)
        if real is None:
            return None
        return read_regular_file(real, limit=limit, max_bytes=bound)


#: Flags of every read here: never block (a FIFO), never become the controlling terminal.
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
#: Not on every platform (Windows): there :meth:`ContainedFiles.read` takes the full check.
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _unusual_name(name: str) -> bool:
    """A name that is not one plain entry of its folder (a separator, ``.`` or ``..``)."""
    return os.sep in name or bool(os.altsep and os.altsep in name) or name in (".", "..", "")


def read_regular_file(
    path: Path | str, *, limit: str = "file_bytes", max_bytes: int | None = None
) -> bytes:
    """The bytes of ``path``, refusing anything but a regular file without ever blocking.

    Opened with ``O_NONBLOCK`` and checked with ``fstat`` on the open descriptor: a FIFO swapped
    in after the collection-time check neither hangs the run nor gets read, and a file over
    ``max_bytes`` (default: the limit ``limit``, ``file_bytes``) raises
    :class:`InputFileTooLarge` before a byte is read.
    """
    bound = int(default(limit)) if max_bytes is None else max_bytes
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        raise DatasetError(f"cannot read: {exc.strerror}", path=path) from None
    try:
        st = os.fstat(fd)
        mode = st.st_mode
        if not stat.S_ISREG(mode):
            raise DatasetError(
                f"is {_kind(mode)}, not a regular file",
                path=path,
                hint="replace it with an ordinary file",
            )
        check_file_size(st.st_size, path, limit=limit, max_bytes=bound)
        return read_fd(fd, st, max_bytes=bound, limit=limit, path=path)
    except OSError as exc:
        raise DatasetError(f"cannot read: {exc.strerror}", path=path) from None
    finally:
        os.close(fd)


def read_fd(
    fd: int,
    known: os.stat_result | None = None,
    *,
    max_bytes: int | None = None,
    limit: str = "file_bytes",
    path: Path | str = "",
) -> bytes:
    """Everything left to read from an open file descriptor (opened without following links).

    The first read asks for the file's size plus one byte; a short read of a regular file is
    its end (POSIX), a short read of anything else (a pipe) is confirmed with a one-byte read,
    and a file that grew meanwhile is read on in 64 KiB pieces. Asking for a large buffer on
    every read made each one allocate (and, in a large process, page in) that buffer: for
    thousands of small fixtures that was most of the reading time (docs/performance.md).
    A file that grows past ``max_bytes`` while being read (or a pipe) raises
    :class:`InputFileTooLarge` once more than that has been read, not at the end.
    """
    try:
        st = known if known is not None else os.fstat(fd)
        want, regular = st.st_size + 1, stat.S_ISREG(st.st_mode)
    except OSError:
        want, regular = _CHUNK, False
    bound = int(default(limit)) if max_bytes is None else max_bytes
    chunks = []
    total = 0
    while True:
        chunk = os.read(fd, want)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if len(chunk) < want and regular:
            break  # a short read of a regular file is its end: no confirming read
        if total > bound:
            check_file_size(total, path, limit=limit, max_bytes=bound)
        want = _CHUNK if len(chunk) == want else 1
    return b"".join(chunks) if len(chunks) != 1 else chunks[0]


#: Read size once a file turns out longer than it was when :func:`read_fd` began.
_CHUNK = 1 << 16


def link_on_the_way(path: Path, project: Path) -> Path | None:
    """The first link on ``path`` that lies inside ``project``, else ``path`` itself when it
    is a link (None: no link goldeval would go through). Used for every place goldeval
    writes (goldeval.results.write_targets) and for the golden root it reads. Walked on real
    paths, component by component: a path spelled ``//tmp/...``
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
