"""Datasets: a dataset folder loaded and checked, with its identity hashes.

A dataset is a folder holding a manifest, one JSONL file of rows, ``fixtures/<id>.out.md``
recorded answers and optional ``rubric.md`` / ``calibration.jsonl``. Every problem is reported
at collection with file, line and field, before anything runs: a broken row must never turn
into a partial run that looks complete.

The row rules are in :mod:`goldeval.dataset.row_fields`, the row parser in
:mod:`goldeval.dataset.row_parser` and dataset discovery in :mod:`goldeval.dataset.discovery`;
their public names are re-exported here for the callers that import them from this module.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from goldeval.core.errors import DatasetError, DatasetErrors, GoldevalError
from goldeval.core.safe_files import contained_file, read_regular_file
from goldeval.dataset.case import GoldenCase, dataset_hash
from goldeval.dataset.discovery import discover, resolve_dataset, rows_file
from goldeval.dataset.domain import DomainConfig
from goldeval.dataset.expect import ExpectKey
from goldeval.dataset.manifest import Manifest, find_manifest, read_manifest
from goldeval.dataset.pack import Pack, load_pack
from goldeval.dataset.profiles import JAVA_AUTOTEST, get_profile
from goldeval.dataset.row_fields import (
    CORE_EXPECT_KEYS,
    RESERVED_TAGS,
    SAFE_ID,
    TAG,
    check_case_id,
    suggest,
)
from goldeval.dataset.row_parser import parse_rows

if TYPE_CHECKING:
    from goldeval.graders.base import Grader

__all__ = [
    "CORE_EXPECT_KEYS",
    "RESERVED_TAGS",
    "SAFE_ID",
    "TAG",
    "Dataset",
    "check_case_id",
    "discover",
    "fixture_problems",
    "load_dataset",
    "parse_rows",
    "raise_all",
    "resolve_dataset",
    "rows_file",
    "ungraded_rows",
]


@dataclass
class Dataset:
    dir: Path
    manifest_path: Path
    manifest: Manifest
    rows_path: Path
    cases: list[GoldenCase]
    pack: Pack | None
    domain: DomainConfig
    rubric: str | None = None
    grader_modes: dict[str, str] = field(default_factory=dict)

    _hash: str | None = None

    @property
    def id(self) -> str:
        return self.manifest.version

    @property
    def hash(self) -> str:
        """datasetHash, computed on first use: collection (on every xdist worker) never needs
        it, only the controller's run document does."""
        if self._hash is None:
            self._hash = dataset_hash(self.cases)
        return self._hash

    def grader_config(self, used: Sequence[str]) -> dict[str, str]:
        """What the protocol's ``graderConfigHash`` covers: every grading input outside the rows.

        The domain constants (``contract:``/``retriever:``), the graders that grade some row,
        their modes and the manifest's ``grader_options`` (a citation pattern changes verdicts
        as surely as a row does). ``options`` enters only when set, so the hash of a dataset
        without options is the one its baselines were captured with.
        """
        config = {
            "domain": self.domain.fingerprint(),
            "graders": ",".join(used),
            "modes": ",".join(f"{k}={v}" for k, v in sorted(self.grader_modes.items())),
        }
        if self.manifest.grader_options:
            config["options"] = json.dumps(
                self.manifest.grader_options, sort_keys=True, ensure_ascii=True, default=repr
            )
        # Each enters only when it is not what a dataset had before it existed: the
        # java-autotest rules were the only ones, so reference baselines keep their hash.
        m = self.manifest
        if m.profile_name != JAVA_AUTOTEST:
            config["profile"] = m.profile_name
        if m.prompt is not None:
            config["prompt"] = json.dumps(
                m.prompt.model_dump(exclude_none=True), sort_keys=True, ensure_ascii=True
            )
        if m.request:
            config["request"] = json.dumps(m.request, sort_keys=True, ensure_ascii=True)
        if m.truncated != "hard":
            config["truncated"] = m.truncated
        return config


def ungraded_rows(
    cases: Sequence[GoldenCase], graders: Sequence[Grader], modes: dict[str, str], path: Path
) -> list[GoldevalError]:
    """Rows no check reads: they would PASS whatever the answer (a silent false green).

    A row is checked when a grader that is not ``off`` applies to it (the manifest's
    ``graders:`` mode, else the grader's default) or its retrieval is graded (``expect.rag``,
    not a refusal). A row read only by soft graders counts as checked: soft is a documented
    choice (a score reported next to the verdict), whereas a row nothing reads is a mistake.
    """
    active = [g for g in graders if modes.get(g.name, "hard" if g.hard else "soft") != "off"]
    errors: list[GoldevalError] = []
    for case in cases:
        if any(g.applies(case) for g in active) or ("rag" in case.expect and not case.refuse):
            continue
        errors.append(
            DatasetError(
                "no grader checks this row (no expect key a grader reads, no must_not): "
                "it would pass whatever the answer",
                path=path,
                line=case.line,
                field="expect",
                hint="add an expect key or must_not, or set `allow_ungraded_rows: true` in "
                "the manifest to run such rows on purpose",
            )
        )
    return errors


def fixture_problems(
    dataset: Dataset, cases: Iterable[GoldenCase], variant: str | None = None
) -> list[GoldevalError]:
    """Why the recorded answers of ``cases`` cannot be replayed (fixture mode), per row;
    with ``variant``, that variant's own (``fixtures/<variant>/``).

    Only the selected rows are checked (a deselected row needs no fixture). One directory
    scan instead of a stat per row: at 100,000 rows the stats were the cost. A fixture must be
    a regular file inside the dataset folder; a link inside the folder is followed.
    """
    folder = dataset.dir
    errors: list[GoldevalError] = []
    shown = "fixtures/" if variant is None else f"fixtures/{variant}/"
    hint = (
        "record it with --golden-mode=record, or write it"
        if variant is None
        else f"record the variant's answers with --golden-mode=record "
        f"--golden-variants={variant}, or write them"
    )
    fixtures_dir = folder / shown
    entries: dict[str, os.DirEntry[str]] = {}
    try:
        contained = fixtures_dir.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):
        contained = False
    if fixtures_dir.exists() and not contained:
        return [
            DatasetError(
                f"{shown} resolves to {fixtures_dir.resolve()}, outside {folder}",
                path=fixtures_dir,
                hint="keep the recorded answers inside the dataset folder",
            )
        ]
    try:
        with os.scandir(fixtures_dir) as scan:
            entries = {e.name: e for e in scan}
    except OSError:
        entries = {}
    for case in cases:
        name = f"{case.id}.out.md"
        entry = entries.get(name)
        if entry is None:
            errors.append(
                DatasetError(
                    f"no recorded answer {shown}{name}",
                    path=dataset.rows_path,
                    line=case.line,
                    field="id",
                    hint=hint,
                )
            )
            continue
        try:
            if entry.is_file(follow_symlinks=False):
                continue  # a plain regular file: the common case needs no further stat
        except OSError:
            pass
        try:
            contained_file(
                fixtures_dir / name,
                folder,
                what=f"recorded answer {shown}{name}",
                source=dataset.rows_path,
                line=case.line,
                fld="id",
            )
        except DatasetError as exc:
            errors.append(exc)
    return errors


def raise_all(errors: list[GoldevalError]) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise DatasetErrors(errors)


def load_dataset(
    folder: Path,
    *,
    project_root: Path,
    graders: Sequence[Grader],
    require_fixtures: bool,
    reserved_tags: Collection[str] = RESERVED_TAGS,
) -> Dataset:
    """Load and validate a dataset folder.

    ``require_fixtures``: check every row's recorded answer now (the plugin checks only the
    selected rows, after deselection, with :func:`fixture_problems`).
    """
    folder = folder.resolve()
    manifest_path = find_manifest(folder)
    if manifest_path is None:
        raise DatasetError("no dataset.yaml or dataset.json", path=folder)
    manifest = read_manifest(manifest_path)
    modes = _grader_modes(manifest, manifest_path, graders)
    expect_keys: dict[str, ExpectKey] = {k.name: k for k in CORE_EXPECT_KEYS}
    for grader in graders:
        for key in grader.expect_keys:
            expect_keys.setdefault(key.name, key)
    path = rows_file(folder, manifest, manifest_path)
    cases = parse_rows(path, expect_keys, graders, reserved_tags, manifest)
    if not manifest.allow_ungraded_rows:
        raise_all(ungraded_rows(cases, graders, modes, path))
    domain = DomainConfig(
        contract=manifest.contract or DomainConfig().contract,
        retriever=manifest.retriever or DomainConfig().retriever,
    )
    dataset = Dataset(
        dir=folder,
        manifest_path=manifest_path,
        manifest=manifest,
        rows_path=path,
        cases=cases,
        pack=_pack(folder, manifest, manifest_path, project_root),
        domain=domain,
        rubric=_rubric(folder),
        grader_modes=modes,
    )
    if require_fixtures:
        raise_all(fixture_problems(dataset, cases))
    return dataset


def _grader_modes(
    manifest: Manifest, manifest_path: Path, graders: Sequence[Grader]
) -> dict[str, str]:
    """The manifest's ``graders:`` modes, each naming a known grader and hard, soft or off."""
    modes = dict(manifest.graders)
    for name, mode in modes.items():
        if mode not in ("hard", "soft", "off"):
            raise DatasetError(
                f"{mode!r} is not hard, soft or off", path=manifest_path, field=f"graders.{name}"
            )
    known_names = {g.name for g in graders}
    for name in modes:
        if name not in known_names:
            raise DatasetError(
                "no such grader",
                path=manifest_path,
                field=f"graders.{name}",
                hint=suggest(name, known_names) or f"graders: {', '.join(sorted(known_names))}",
            )
    return modes


def _pack(folder: Path, manifest: Manifest, manifest_path: Path, project_root: Path) -> Pack | None:
    """The dataset's pack: the one its manifest names (inside the project), else the
    project's pack/ for the java-autotest profile, else none."""
    pack_spec = manifest.pack
    project = project_root.resolve()
    if pack_spec is None:
        # Only the java-autotest profile picks a project pack/ up unnamed: a generic dataset
        # gets a pack (and its prompt parts) only when its manifest names one.
        default = project_root / "pack"
        if get_profile(manifest.profile).default_pack and default.is_dir():
            return load_pack(default, project)
        return None
    if pack_spec.lower() in ("none", "null", ""):
        return None
    real = (folder / pack_spec).resolve()
    if not real.is_relative_to(project):
        raise DatasetError(
            f"pack {pack_spec!r} resolves to {real}, outside the project {project}",
            path=manifest_path,
            field="pack",
            hint="keep the pack inside the project",
        )
    return load_pack(real, project)


def _rubric(folder: Path) -> str | None:
    """The judge's rubric.md of the dataset folder (a regular file inside it), if any."""
    rubric_path = folder / "rubric.md"
    if not (rubric_path.exists() or rubric_path.is_symlink()):
        return None
    real_rubric = contained_file(rubric_path, folder, what="rubric")
    try:
        return read_regular_file(real_rubric).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"not valid UTF-8 ({exc.reason})", path=rubric_path) from None
