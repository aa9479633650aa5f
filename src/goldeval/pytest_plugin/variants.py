"""The session's variants (issue 35): which of the manifest's ``variants:`` run, and the
label each carries in item ids.

A variant is run as one of ``--golden-models``' models (the same parametrisation, one run per
variant): its model is what the provider is asked for and what its run records; its name is
what its items' ids carry (``case-attempt1-<name>``) and what the comparison names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from goldeval.core.errors import GoldevalError
from goldeval.dataset.manifest import find_manifest, read_manifest
from goldeval.dataset.variants import CompareGate, Variant, select_variants
from goldeval.results.sampling import detectable_floor


@dataclass(frozen=True)
class SessionVariants:
    """The selected variants, in order, and the manifest's comparison gate (if any)."""

    selected: tuple[Variant, ...]
    compare: CompareGate | None

    @property
    def models(self) -> list[str]:
        return [v.model or "" for v in self.selected]

    def name_of(self, model: str | None) -> str | None:
        """The variant that runs ``model`` (None: not a variant's model)."""
        return next((v.name for v in self.selected if v.model == model), None)

    def model_of(self, label: str | None) -> str | None:
        """The model of the variant named ``label``; any other label is returned as it is."""
        return next((v.model for v in self.selected if v.name == label), label)

    def compared(self) -> CompareGate | None:
        """The comparison gate when both of its variants were selected, else None."""
        names = {v.name for v in self.selected}
        gate = self.compare
        if gate is None or gate.control not in names or gate.candidate not in names:
            return None
        return gate


def session_variants(config: pytest.Config, dataset_dir: Path) -> SessionVariants | None:
    """The variants this session runs, or None (no ``variants:`` block, or not a live run).

    Usage errors (exit 4) before any call: ``--golden-variants`` on a dataset that declares
    none or in fixture/record mode, an unknown name, and ``--golden-model(s)`` next to the
    variants (which model answers would be ambiguous). A manifest that does not read is left
    to the collection, which reports it with the file and field.
    """
    wanted = config.getoption("golden_variants", default=None)
    manifest_path = find_manifest(dataset_dir)
    declared: list[Variant] = []
    compare = None
    if manifest_path is not None:
        try:
            manifest = read_manifest(manifest_path)
        except GoldevalError:
            return None
        declared = list(manifest.variants or [])
        compare = manifest.gate.compare if manifest.gate is not None else None
    mode = config.getoption("golden_mode", default=None) or "fixture"
    if not declared:
        if wanted:
            raise pytest.UsageError(
                f"--golden-variants: the dataset's manifest ({manifest_path}) declares no "
                "variants (add a `variants:` block, see docs/variants.md)"
            )
        return None
    if mode != "live":
        if wanted:
            raise pytest.UsageError(
                "--golden-variants needs --golden-mode=live: per-variant recorded answers "
                "(fixture and record mode) are not supported yet (docs/variants.md)"
            )
        # Fixture and record mode replay or record one answer per row: the variants are
        # not run (docs/variants.md), the run is what it was before variants existed.
        return None
    for option in ("golden_models", "golden_model"):
        if config.getoption(option, default=None):
            flag = "--" + option.replace("_", "-")
            raise pytest.UsageError(
                f"{flag} cannot be combined with the manifest's variants: each variant names "
                "its model; pick variants with --golden-variants=A,B"
            )
    try:
        selected = select_variants(declared, wanted)
    except GoldevalError as exc:
        raise pytest.UsageError(str(exc)) from None
    return SessionVariants(tuple(selected), compare)


def power_line(variants: SessionVariants | None, cases: int) -> str | None:
    """What the selected cases can show before the comparison runs (issue 35): the smallest
    difference ``cases`` paired cases detect at 80% power whatever the discordance
    (sampling.detectable_floor), next to the margin. None without a compared pair."""
    gate = variants.compared() if variants is not None else None
    if gate is None:
        return None
    head = f"variants: {gate.candidate} vs {gate.control} on {cases} selected cases"
    floor = detectable_floor(cases)
    if floor is None:
        return f"{head}: too few to detect any difference (exact McNemar, α 0.05, 80% power)"
    return (
        f"{head}: no difference under {floor * 100:.1f} pts can be detected (exact McNemar, "
        f"α 0.05, 80% power, even if every differing case went one way); "
        f"margin {gate.non_inferiority * 100:.1f} pts"
    )
