"""Which saved run a command means: one resolver for ``goldeval gate``, ``compare`` and ``show``.

A run is named the way a user has it at hand: the run.json (or a committed baseline file), its
run folder, the ``LATEST`` pointer pytest writes in the runs folder (also inside a path, as in
``.goldeval/runs/LATEST/run.json``), a run id (a folder name under the runs folder, or a run
id in the store), a run key in the store, or nothing at all: the latest run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from goldeval.core.errors import GoldevalError
from goldeval.core.safe_files import link_on_the_way, read_regular_file
from goldeval.results.documents import RunDocument, typed_run
from goldeval.results.last_session import NAME as LAST_SESSION
from goldeval.results.last_session import read_last_session
from goldeval.store import StoreError, open_store
from goldeval.store.views import SIDE_BY_SIDE_VARIANTS, run_document, side_by_side_problem
from goldeval.verdict.baseline import load_run_file

#: The file pytest points at the last complete run with, in the runs folder.
LATEST = "LATEST"
#: A LATEST pointer is one line naming a folder; anything bigger is not one.
_POINTER_MAX_BYTES = 4096

#: What a run reference may be, for the message when nothing matches.
ACCEPTED = (
    "a run.json or baseline file",
    "a run folder",
    "the LATEST pointer (a path to it, or the word LATEST)",
    "a run id: a folder name under the runs folder, or a run id in the store",
    "a run key in the store",
    "nothing: the last session's run (the runs folder's LATEST when that session passed)",
)


@dataclass(frozen=True)
class RunPlaces:
    """Where named runs are looked up: the runs folder and the run store (None: no store)."""

    runs_dir: Path
    store_url: str | None


@dataclass(frozen=True)
class ResolvedRun:
    """A saved run found from a reference."""

    #: The document typed once, where it was read (what the verdict and the reports read).
    typed: RunDocument
    #: How messages name it: the run.json read, or ``store run ID``.
    source: str
    #: A folder to look for the run's project from (the run file's, the store file's).
    anchor: Path | None


def _not_found(reference: str, places: RunPlaces, why: str) -> GoldevalError:
    store = places.store_url or "no run store"
    accepted = "; ".join(ACCEPTED)
    return GoldevalError(
        f"no run {reference!r}: {why} (runs folder {places.runs_dir}, store {store})",
        hint=f"give {accepted}; `goldeval runs` lists the stored runs",
    )


def contained(path: Path, within: Path, what: str) -> Path:
    """``path``, found through the runs folder ``within`` (a run id, LATEST, the last
    session), when it lies inside it and is reached through no link; a usage error otherwise.
    A run folder or pointer linked out of the project was gated as this project's run (exit
    0), while pytest writes nothing and reads no baseline through a link."""
    # ``within`` itself too: a linked ``.goldeval/`` or runs folder resolves "inside" itself.
    above = within.absolute().parents[1] if len(within.absolute().parents) > 1 else within
    link = link_on_the_way(within.absolute(), above) or link_on_the_way(
        path.absolute(), within.absolute()
    )
    if link is not None or not path.resolve().is_relative_to(within.resolve()):
        shown = f"{link} is a symbolic link" if link is not None else "it lies outside it"
        raise GoldevalError(
            f"{what} found through the runs folder {within}: {shown}; goldeval reads runs "
            "of the project only through real folders",
            path=path,
            hint="name the run's file or folder itself to read a run kept elsewhere",
        )
    return path


def read_pointer(pointer: Path) -> Path:
    """The run folder a LATEST file points at: inside the runs folder it lies in.

    pytest writes the folder's absolute path; a project moved or downloaded elsewhere (a CI
    artifact) keeps the folder next to LATEST, so its name is looked up there first (an old
    absolute path may name another checkout's run).
    """
    contained(pointer, pointer.parent, "the LATEST pointer")
    try:
        if pointer.stat().st_size > _POINTER_MAX_BYTES:
            raise GoldevalError("is not a LATEST pointer (too big)", path=pointer)
    except OSError as exc:
        raise GoldevalError(f"cannot read: {exc.strerror}", path=pointer) from None
    try:
        text = read_regular_file(pointer).decode("utf-8").strip()
    except UnicodeDecodeError:
        raise GoldevalError("is not a LATEST pointer (not UTF-8 text)", path=pointer) from None
    if not text or "\n" in text:
        raise GoldevalError("is not a LATEST pointer (one line naming a run folder)", path=pointer)
    named = Path(text)
    if not named.is_absolute():
        named = pointer.parent / named
    for folder in (pointer.parent / named.name, named):
        if folder.is_dir():
            return contained(folder, pointer.parent, "the run LATEST points at")
    raise GoldevalError(
        f"points at {text}, which is not a folder here",
        path=pointer,
        hint="the run folder was moved or pruned; name the run instead",
    )


def _from_file(path: Path) -> ResolvedRun:
    loaded = load_run_file(path)
    return ResolvedRun(loaded.typed, str(path), path.parent)


def _from_folder(folder: Path) -> ResolvedRun:
    run_json = folder / "run.json"
    if run_json.is_symlink():  # pytest never writes one: never read through it
        contained(run_json, folder, "run.json")
    if run_json.is_file():
        return _from_file(run_json)
    if (folder / LATEST).is_file():  # the runs folder itself: its latest run
        return _from_folder(read_pointer(folder / LATEST))
    raise GoldevalError(
        "no run.json in this folder", path=folder, hint="a run folder holds run.json"
    )


def _through_pointer(path: Path) -> Path | None:
    """``…/LATEST/run.json`` (LATEST is a file, not a folder): the same path under the folder
    LATEST points at; None when no part of ``path`` is a LATEST file."""
    for parent in path.parents:
        if parent.name == LATEST and parent.is_file():
            return read_pointer(parent) / path.relative_to(parent)
    return None


def _from_path(path: Path) -> ResolvedRun | None:
    """The run at a path given on the command line, else None (no such path)."""
    if path.is_dir():
        return _from_folder(path)
    if path.is_file() or path.is_symlink():
        if path.name == LATEST:
            return _from_folder(read_pointer(path))
        return _from_file(path)  # load_run_file refuses what is not a readable run document
    target = _through_pointer(path)
    return _from_path(target) if target is not None else None


def _store_exists(url: str) -> bool:
    return "://" in url or Path(url).is_file()


def _from_store(reference: str, url: str) -> ResolvedRun | None:
    try:
        store = open_store(url)
    except StoreError as exc:
        raise GoldevalError(str(exc)) from None
    try:
        if store.get_run(reference) is None:
            return None
        document = run_document(store, reference)
    finally:
        store.close()
    problem = side_by_side_problem(document.get(SIDE_BY_SIDE_VARIANTS), reference)
    if problem is not None:  # never regated as one run: it would not be the session's verdict
        raise GoldevalError(problem)
    anchor = None if "://" in url else Path(url).parent
    source = f"store run {reference}"
    return ResolvedRun(typed_run(document, source), source, anchor)


def stored_run(reference: str, places: RunPlaces) -> ResolvedRun:
    """A run id or run key from the store only (``goldeval gate --run-key``: every shard of
    the key, never a folder that happens to have its name)."""
    url = places.store_url
    if url is None or not _store_exists(url):
        raise GoldevalError(
            "no run store here", path=url, hint="run pytest --golden=ID first, or pass --store"
        )
    found = _from_store(reference, url)
    if found is None:
        raise GoldevalError(
            f"no run {reference!r} in the store", path=url, hint="goldeval runs lists them"
        )
    return found


def latest_run(places: RunPlaces, *, last_session: bool = True) -> ResolvedRun:
    """No run named: the last session's run when that session did not pass (LATEST, the last
    complete run, would be an earlier one); else (and for the word LATEST,
    ``last_session=False``) the run the runs folder's LATEST points at."""
    last = read_last_session(places.runs_dir) if last_session else None
    if last is not None and last.exit_code != 0:
        if last.run_dir is None or not last.run_dir.is_dir():
            ended = (
                f"(began {last.finished_at}) recorded no end"
                if last.exit_code is None
                else f"({last.finished_at}) exited {last.exit_code}"
            )
            raise GoldevalError(
                f"the last session {ended} and wrote no run: {last.reason}",
                path=places.runs_dir / LAST_SESSION,
                hint="the run LATEST names is an earlier one; name a run to use it: "
                + "; ".join(ACCEPTED[:-1]),
            )
        return _from_folder(contained(last.run_dir, places.runs_dir, "the last session's run"))
    pointer = places.runs_dir / LATEST
    if not pointer.is_file():
        raise GoldevalError(
            "no latest run: there is no LATEST pointer",
            path=pointer,
            hint="run pytest --golden=ID first (a run cut short does not move LATEST), or name "
            "the run: " + "; ".join(ACCEPTED[:-1]),
        )
    return _from_folder(read_pointer(pointer))


def resolve_run(reference: str | None, places: RunPlaces) -> ResolvedRun:
    """The saved run ``reference`` names (see :data:`ACCEPTED`); a usage error naming every
    accepted form when nothing matches."""
    if reference is None or reference == LATEST:
        return latest_run(places, last_session=reference is None)
    if not reference.strip():
        raise _not_found(reference, places, "an empty name")
    found = _from_path(Path(reference))
    if found is not None:
        return found
    if os.sep not in reference and "/" not in reference:
        folder = places.runs_dir / reference
        if folder.is_dir() and any((folder / name).is_file() for name in ("run.json", LATEST)):
            return _from_folder(contained(folder, places.runs_dir, f"run {reference}"))
        # A run killed while its folder was being written leaves the folder without run.json:
        # the store's record of it is the run.
        if places.store_url is not None and _store_exists(places.store_url):
            found = _from_store(reference, places.store_url)
            if found is not None:
                return found
        if folder.is_dir():  # says what the folder lacks
            return _from_folder(contained(folder, places.runs_dir, f"run {reference}"))
    raise _not_found(reference, places, "not a file or folder, nor a run id or key")
