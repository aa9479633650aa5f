"""Where a ``goldeval`` command looks: the project root, the run store, and the project (gate
policy and baselines) a saved run belongs to."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from goldeval.cli.scaffold import find_project_root
from goldeval.core.errors import ConfigError, GoldevalError
from goldeval.dataset.discovery import check_golden_root, discover
from goldeval.dataset.rows import Dataset, load_dataset
from goldeval.graders.contract import ContractGrader
from goldeval.graders.registry import builtin_graders
from goldeval.results.documents import RunDocument
from goldeval.results.write_targets import Kind as WriteKind
from goldeval.results.write_targets import write_target_problem
from goldeval.verdict.decide import run_dataset_id

#: The run store, the runs folder and the datasets under the project root (as in pytest).
DEFAULT_STORE = ".goldeval/goldeval.sqlite3"
DEFAULT_RUNS = ".goldeval/runs"


def project_root(explicit: str | None = None) -> Path:
    """The project root of every ``goldeval`` command: ``--root``, else the nearest folder at or
    above the working directory with a pytest configuration file (pytest's rootdir for the
    plugin), else the working directory. Defaults (store, runs, golden/, baselines/) live
    under it, so a command started in any subfolder sees what pytest wrote.
    """
    if explicit:
        root = Path(explicit).resolve()
        if not root.is_dir():
            raise GoldevalError("--root: not a folder", path=explicit)
        return root
    cwd = Path.cwd().resolve()
    return find_project_root(cwd) or cwd


def store_location(args: argparse.Namespace) -> str:
    """The store a command reads: ``--store`` (relative to the working directory, like any
    path given on the command line), else ``GOLDEVAL_STORE`` (relative to the project root, as
    the plugin reads it), else ``<project root>/.goldeval/goldeval.sqlite3``."""
    explicit = getattr(args, "store", None)
    if explicit:
        return str(explicit)
    url = os.environ.get("GOLDEVAL_STORE") or DEFAULT_STORE
    if "://" in url or Path(url).is_absolute():
        return url
    return str(project_root(getattr(args, "root", None)) / url)


class Project:
    """Where a saved run's gate policy and baselines live (see :func:`find_project`)."""

    def __init__(self, root: Path | None, golden_root: Path | None, dataset_dir: Path | None):
        self.root = root
        self.golden_root = golden_root
        self.dataset_dir = dataset_dir
        self.looked_in: list[str] = []
        #: Manifests that could not be read on the way (one of them may be the run's dataset).
        self.problems: list[str] = []


def _relative_golden(run: RunDocument) -> Path:
    """The golden root's path inside the project, as the run recorded it (default golden).

    pytest records ``goldenRoot`` relative to the project root (``projectRoot`` is "."); a
    run.json written before that holds both as absolute paths."""
    root, golden = run.project_root, run.golden_root
    if golden is not None and not Path(golden).is_absolute():
        return Path(golden)
    if root is not None and golden is not None and Path(root).is_absolute():
        try:
            return Path(golden).relative_to(root)
        except ValueError:
            pass
    return Path("golden")


def find_project(run: RunDocument, args: argparse.Namespace, *anchors: Path | None) -> Project:
    """Find the project a saved run belongs to: never the working directory by accident.

    Order: ``--golden-root`` (the datasets folder itself, relative to the working directory);
    ``--root``; the absolute ``projectRoot`` an older run.json recorded; the folders above each
    anchor (the run file, the baseline file, the store) nearest first; the working directory.
    A candidate counts only if its golden root holds the run's dataset id, so a project
    without that dataset is never used for its policy.
    """
    dataset_id = run_dataset_id(run)
    golden_rel = _relative_golden(run)
    explicit_golden = getattr(args, "golden_root", None)
    explicit_root = getattr(args, "root", None)
    candidates: list[tuple[Path, Path]] = []  # (project root, golden root)
    if explicit_golden:
        golden = Path(explicit_golden).resolve()
        root = Path(explicit_root).resolve() if explicit_root else golden.parent
        candidates.append((root, golden))
    elif explicit_root:
        root = Path(explicit_root).resolve()
        if not root.is_dir():
            raise GoldevalError("--root: not a folder", path=explicit_root)
        candidates.append((root, root / golden_rel))
    else:
        # An older run.json names its project by absolute path; a newer one records paths
        # relative to the project root, which the folders above the run file then find.
        recorded_root, recorded_golden = run.project_root, run.golden_root
        if (
            recorded_root is not None
            and recorded_golden is not None
            and Path(recorded_root).is_absolute()
            and Path(recorded_golden).is_absolute()
        ):
            candidates.append((Path(recorded_root), Path(recorded_golden)))
        for anchor in anchors:
            if anchor is None:
                continue
            start = anchor.resolve()
            for folder in [start, *start.parents] if start.is_dir() else start.parents:
                candidates.append((folder, folder / golden_rel))
        cwd = Path.cwd().resolve()
        root = project_root()
        candidates.append((root, root / golden_rel))
        candidates.append((cwd, cwd / golden_rel))
    project = Project(None, None, None)
    seen: set[Path] = set()
    for cand_root, cand_golden in candidates:
        if cand_golden in seen:
            continue
        seen.add(cand_golden)
        if not cand_golden.is_dir():
            continue
        # Its gate policy and baselines are read from there: never through a link out of the
        # project, which the plugin refuses (the gate decided on a policy pytest never used).
        check_golden_root(cand_golden, cand_root)
        project.looked_in.append(str(cand_golden))
        if dataset_id is None:
            continue
        dataset_dir = discover(cand_golden, project.problems).get(dataset_id)
        if dataset_dir is not None:
            project.root, project.golden_root = cand_root, cand_golden
            project.dataset_dir = dataset_dir
            return project
    if explicit_root or explicit_golden:
        # An explicit place: its baselines are used even when its datasets are not.
        project.root, project.golden_root = candidates[0]
    return project


def load_builtin_dataset(folder: Path, root: Path) -> Dataset:
    """A dataset read by the loader pytest uses, with the built-in graders only (outside
    pytest a project's own registered graders are not known): ``goldeval calibrate`` and
    ``gate``'s check of a run's rows."""
    graders = [ContractGrader(), *builtin_graders()]
    return load_dataset(folder, project_root=root, graders=graders, require_fixtures=False)


def refuse_write_target(path: Path, root: Path, kind: WriteKind, option: str) -> Path:
    """``path`` (absolute) when a command may write it as a ``kind``; a usage error naming
    ``option`` otherwise: a link on the way inside the project ``root`` (nothing is written
    through one), a file where a folder goes, a folder that is not there to write in. The
    check every write of the plugin passes (goldeval.results.write_targets)."""
    target = path.absolute()
    problem = write_target_problem(target, project=root, kind=kind)
    if problem is not None:
        raise ConfigError(f"{option} {path}: {problem}", path=path)
    return target
