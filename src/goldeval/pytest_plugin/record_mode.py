"""Record mode's end of run: the graded answers written as fixtures (controller only), never
silently overwriting one that differs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from goldeval.core.errors import ConfigError, DatasetError
from goldeval.core.models import Mode
from goldeval.core.safe_files import read_regular_file
from goldeval.providers.fixture import (
    dumps_sidecar,
    fixture_path,
    fixtures_folder,
    recordable_attempt,
    sidecar_path,
)
from goldeval.pytest_plugin.state import GoldenSession
from goldeval.results import run_folder as artifacts

#: What a recorded file that cannot be read (over the fixture limit, not a regular file) is
#: compared as: no answer equals it, so re-recording replaces it (with --golden-overwrite-fixtures).
_UNREADABLE_RECORDING = "\x00(unreadable recorded file)"


def _recorded_text(path: Path) -> str | None:
    """The text of a fixture or sidecar about to be re-recorded; None when there is none.
    Read bounded (``fixture_bytes``, fstat before reading): a 3 GiB file is not loaded."""
    if not path.is_file():
        return None
    try:
        return read_regular_file(path, limit="fixture_bytes").decode("utf-8", errors="replace")
    except DatasetError:
        return _UNREADABLE_RECORDING


def record_fixtures(state: GoldenSession) -> dict[str, list[str]]:
    """Record mode: write answers as fixtures (controller only), never silently overwriting.

    A fixture is the text ``<id>.out.md`` plus, when the answer had tool calls, a finish reason
    or usage, the sidecar ``<id>.out.json`` (goldeval.providers.fixture); the two change
    together, and a re-recorded answer without any drops a stale sidecar. A variant's
    answers go to its own ``fixtures/<variant>/`` and are listed as ``<variant>/<id>``.
    """

    changes: dict[str, list[str]] = {"new": [], "changed": [], "unchanged": [], "kept": []}
    if state.variants is None:
        _record(state, None, None, changes)
        return changes
    keys = state.collector.models()
    for key in keys:
        _record(state, key if len(keys) > 1 else None, state.variant_name(key), changes)
    return changes


def _record(
    state: GoldenSession, key: str | None, variant: str | None, changes: dict[str, list[str]]
) -> None:
    ds = state.load()
    for case in state.collector.iter_cases(key):
        first = recordable_attempt(case["attempts"])  # none for a row that echoed a secret
        if first is None:
            continue
        case_id = case["caseId"]
        shown = case_id if variant is None else f"{variant}/{case_id}"
        path = fixture_path(ds.dir, case_id, variant)
        side = sidecar_path(ds.dir, case_id, variant)
        old, old_side = _recorded_text(path), _recorded_text(side)
        sidecar = first.get("recordedAnswer")
        new_side = dumps_sidecar(sidecar) if sidecar else None
        if old == first["output"] and old_side == new_side:
            changes["unchanged"].append(shown)
            continue
        if old is not None and not state.settings.overwrite_fixtures:
            changes["kept"].append(shown)
            continue
        # Checked link by link from the dataset's folder: fixtures/ (or fixtures/<variant>)
        # may not lead out of the project, and no folder is created through a link.
        root = ds.dir
        artifacts.atomic_write(path, first["output"], root=root)
        if new_side is not None:
            artifacts.atomic_write(side, new_side, root=root)
        elif old_side is not None or side.is_symlink():
            side.unlink()
        changes["new" if old is None else "changed"].append(shown)


def preflight_record_targets(state: GoldenSession) -> None:
    """Record mode, before any call: every fixtures folder the run will write (``fixtures/``,
    or each selected variant's ``fixtures/<variant>/``) stays inside the dataset's folder
    and is a folder where it exists. Found only after the calls, the answers were lost."""
    if state.settings.mode is not Mode.RECORD:
        return
    ds = state.load()
    names = [None] if state.variants is None else list(state.variants.names)
    for name in names:
        folder = fixtures_folder(ds.dir, name)
        try:
            artifacts.check_inside(ds.dir, folder)
        except artifacts.ArtifactError as exc:
            raise ConfigError(
                f"record mode would write through a link: {exc.message} ({exc.path})",
                hint="make the fixtures folder a real folder inside the dataset",
            ) from None
        try:
            mode = os.lstat(folder).st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(mode):
            raise ConfigError(
                f"record mode writes answers to {folder}, which is not a folder",
                hint="remove or rename what is there",
            )
