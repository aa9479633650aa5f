"""Where datasets are: every dataset id under a golden root, ``--golden=ID`` resolved to its
folder, and the rows file of a dataset folder."""

from __future__ import annotations

from pathlib import Path

from goldeval.core.errors import ConfigError, DatasetError
from goldeval.core.safe_files import contained_file, link_on_the_way
from goldeval.dataset.manifest import Manifest, find_manifest, read_manifest
from goldeval.dataset.row_fields import RESERVED_FILES


def rows_file(folder: Path, manifest: Manifest, manifest_path: Path) -> Path:
    """The dataset's rows file: the manifest's ``rows:``, else the one ``*.jsonl`` next to it."""
    if manifest.rows:
        return contained_file(
            folder / manifest.rows, folder, what="rows file", source=manifest_path, fld="rows"
        )
    # is_file() follows links and is False for a FIFO: both are checked just below instead of
    # being silently skipped (a rows file that is a link out must be an error, not "no rows").
    candidates = sorted(
        p
        for p in folder.glob("*.jsonl")
        if p.name not in RESERVED_FILES and (p.is_symlink() or not p.is_dir())
    )
    if not candidates:
        raise DatasetError(
            "no rows file (*.jsonl) next to the manifest",
            path=manifest_path,
            hint="add one JSONL file of rows; calibration.jsonl is reserved for the judge",
        )
    if len(candidates) > 1:
        names = ", ".join(p.name for p in candidates)
        raise DatasetError(
            f"more than one rows file ({names})",
            path=manifest_path,
            field="rows",
            hint="keep one, or name it with `rows:` in the manifest",
        )
    return contained_file(candidates[0], folder, what="rows file", source=manifest_path)


def discover(
    golden_root: Path,
    problems: list[str] | None = None,
    duplicates: dict[str, list[Path]] | None = None,
) -> dict[str, Path]:
    """Map dataset id → folder for every manifest under ``golden_root`` (sorted walk).

    Manifests that cannot be read are left out; their errors go to ``problems`` if given.
    An id found in more than one folder maps to the first; ``duplicates`` (if given) receives
    every folder of each such id.
    """
    found: dict[str, Path] = {}
    every: dict[str, list[Path]] = {}
    if not golden_root.is_dir():
        return found
    stack = [golden_root]
    while stack:
        folder = stack.pop()
        manifest_path = find_manifest(folder)
        if manifest_path is not None and folder != golden_root:
            try:
                manifest = read_manifest(manifest_path)
            except DatasetError as exc:
                manifest = None
                if problems is not None:
                    problems.append(str(exc))
            if manifest is not None:
                found.setdefault(manifest.version, folder)
                every.setdefault(manifest.version, []).append(folder)
        for child in sorted(folder.iterdir(), reverse=True):
            if child.name in ("fixtures", "__pycache__") or child.name.startswith("."):
                continue
            if child.is_symlink():  # a link could loop, or lead out of the project
                if child.is_dir() and problems is not None:
                    problems.append(
                        f"not followed: {child} is a link to a folder (copy the dataset in, "
                        "or pass the folder itself as --golden=PATH)"
                    )
                continue
            if child.is_dir():
                stack.append(child)
    if duplicates is not None:
        duplicates.update({k: v for k, v in sorted(every.items()) if len(v) > 1})
    return dict(sorted(found.items()))


def check_golden_root(golden_root: Path, project_root: Path) -> None:
    """ConfigError when the golden root is reached through a link inside the project
    (``golden -> /elsewhere``): the links below it are refused, and record mode writes the
    fixtures there. A golden root set to a real folder outside the project is the user's."""
    link = link_on_the_way(golden_root, project_root)
    if link is not None:
        raise ConfigError(
            f"golden_root: {link} is a symbolic link: goldeval reads and writes datasets only "
            "through real folders",
            hint="copy the datasets in, or set golden_root to the real folder",
        )


def resolve_dataset(spec: str, golden_root: Path, invocation_dir: Path) -> Path:
    """``--golden=ID`` (a manifest version under the golden root) or a folder path.

    Two folders under the golden root with the same ``version`` are a usage error, whichever
    one is asked for: the id names baselines, history and the store, so runs of the two would
    be compared with each other's baselines.
    """
    problems: list[str] = []
    duplicates: dict[str, list[Path]] = {}
    known = discover(golden_root, problems, duplicates)
    if duplicates:
        clashes = "; ".join(
            f"{version!r} in " + " and ".join(str(f) for f in folders)
            for version, folders in duplicates.items()
        )
        raise ConfigError(
            f"two datasets share a version: {clashes}",
            hint="a dataset's `version` is its identity (baselines, history, store): give "
            "each folder its own, e.g. bump one to a new version",
        )
    for base in (invocation_dir, golden_root):
        candidate = base / spec
        if candidate.is_dir() and find_manifest(candidate) is not None:
            return candidate.resolve()
    if spec in known:
        return known[spec].resolve()
    listing = ", ".join(known) if known else f"none found under {golden_root}"
    broken = "".join(
        f"\n  {p}" if p.startswith("not followed:") else f"\n  unreadable manifest: {p}"
        for p in problems
    )
    raise ConfigError(
        f"unknown dataset {spec!r}; datasets: {listing}{broken}",
        hint="pass a dataset id from a manifest's `version`, or a folder with a dataset.yaml",
    )
