"""Dataset checks shared by the API (before anything is queued) and the worker."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from goldeval.core.errors import GoldevalError
from goldeval.dataset.rows import (
    Dataset,
    fixture_problems,
    load_dataset,
    raise_all,
    resolve_dataset,
)
from goldeval.graders.contract import ContractGrader
from goldeval.graders.registry import builtin_graders
from goldeval.server.settings import DATASET_SPEC, ServiceSettings, check_datasets_folder


@dataclass(frozen=True)
class ResolvedDataset:
    id: str
    folder: Path
    rows_path: Path
    cases: int
    #: The manifest's declared variant names, in order (empty: no ``variants:`` block).
    variants: tuple[str, ...] = ()
    #: The loaded dataset (for :func:`check_fixtures`; None: not kept).
    dataset: Dataset | None = field(default=None, compare=False, repr=False)


def check_fixtures(resolved: ResolvedDataset, variants: Sequence[str]) -> None:
    """A fixture-mode run's recorded answers exist for every row (each variant's own when
    ``variants`` run): the plugin refuses the run at collection otherwise (exit 2), after
    the request was accepted. Raises :class:`GoldevalError` naming file, line and fixture."""
    if resolved.dataset is None:
        return
    wanted: list[str | None] = list(variants) if variants else [None]
    for variant in wanted:
        raise_all(fixture_problems(resolved.dataset, resolved.dataset.cases, variant))


def check_spec(spec: str) -> str | None:
    """Why ``spec`` cannot name a dataset (None: it can). No request path reaches the
    filesystem unless it matches :data:`DATASET_SPEC` (no separators, no ``..``)."""
    if not DATASET_SPEC.match(spec) or ".." in spec:
        return (
            f"{spec!r} is not a dataset id or folder name: use letters, digits, '.', '_' "
            "and '-' (no path separators)"
        )
    return None


def resolve(settings: ServiceSettings, spec: str, version: str | None = None) -> ResolvedDataset:
    """The dataset ``spec`` names under the service's golden root, loaded and validated as
    ``goldeval calibrate`` does (built-in graders). Raises :class:`GoldevalError` with the
    CLI's message."""
    problem = check_spec(spec)
    if problem:
        raise GoldevalError(problem, field="dataset")
    # Checked at start too (ServiceSettings.build): a folder replaced by a link since then.
    check_datasets_folder(settings.datasets, settings.root)
    # Relative folders are looked up under the golden root only, never the server's cwd.
    folder = resolve_dataset(spec, settings.datasets, settings.datasets)
    if not folder.is_relative_to(settings.datasets):
        raise GoldevalError(
            f"dataset {spec!r} resolves outside the datasets folder {settings.datasets}",
            field="dataset",
        )
    graders = [ContractGrader(), *builtin_graders()]
    dataset = load_dataset(
        folder, project_root=settings.root, graders=graders, require_fixtures=False
    )
    if version is not None and version != dataset.id:
        raise GoldevalError(
            f"dataset {spec!r} is version {dataset.id!r}, not {version!r}",
            path=dataset.manifest_path,
            field="version",
        )
    declared = tuple(v.name for v in dataset.manifest.variants or ())
    return ResolvedDataset(
        dataset.id, folder, dataset.rows_path, len(dataset.cases), declared, dataset
    )
