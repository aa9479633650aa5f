"""The session's variants (issue 35): which of the manifest's ``variants:`` run, and the
label each carries in item ids.

A variant is run like one of ``--golden-models``' models (one run per variant), but keyed by
its **name**: its items' ids carry it (``case-attempt1-<name>``), every attempt payload carries
it (``variant``), the run collector folds attempts under it and the comparison names it. Its
model (the session's when it names none) is what the provider is asked for and what its run
records; its prompt is what its pipeline renders; in fixture mode its recorded answers are
``fixtures/<name>/`` (goldeval.providers.fixture).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from goldeval.core.errors import GoldevalError
from goldeval.dataset.manifest import find_manifest, read_manifest
from goldeval.dataset.variants import CompareGate, Variant, select_variants
from goldeval.results.sampling import detectable_floor
from goldeval.results.variant_pairs import pair_names


@dataclass(frozen=True)
class SessionVariants:
    """The selected variants, in order, and the manifest's comparison gate (if any)."""

    selected: tuple[Variant, ...]
    compare: CompareGate | None
    #: (settings, provider) of the variants that name their own provider or base URL, by
    #: name (goldeval.pytest_plugin.variant_providers; live and record mode).
    providers: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    #: (settings, provider) of the variants' judges that name their own provider or base URL,
    #: by variant name (live mode with --golden-judge).
    judge_providers: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    @property
    def own_clients(self) -> list[tuple[Any, Any]]:
        """(settings, provider) of every provider the variants made for themselves: their
        own model servers and their own judges (closed with the session, keys masked)."""
        return [*self.providers.values(), *self.judge_providers.values()]

    @property
    def models(self) -> list[str]:
        """The distinct models the selected variants name (a variant may name none: it runs
        the session's model)."""
        return list(dict.fromkeys(v.model for v in self.selected if v.model))

    @property
    def names(self) -> list[str]:
        return [v.name for v in self.selected]

    def get(self, name: str | None) -> Variant | None:
        """The selected variant of that name, else None."""
        return next((v for v in self.selected if v.name == name), None)

    def model_of(self, label: str | None) -> str | None:
        """The model the variant named ``label`` names (None: the session's); any other
        label is returned as it is."""
        variant = self.get(label)
        return label if variant is None else variant.model

    def compared(self) -> CompareGate | None:
        """The comparison gate when both of its variants were selected, else None."""
        names = {v.name for v in self.selected}
        gate = self.compare
        if gate is None or gate.control not in names or gate.candidate not in names:
            return None
        return gate


def session_variants(config: pytest.Config, dataset_dir: Path) -> SessionVariants | None:
    """The variants this session runs (in every mode), or None (no ``variants:`` block).

    Usage errors (exit 4) before any call: ``--golden-variants`` on a dataset that declares
    none, an unknown name, ``--golden-models`` next to the variants, ``--golden-model`` next
    to variants that name their model (which model answers would be ambiguous). A manifest
    that does not read is left to the collection, which reports it with the file and field.
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
    if not declared:
        if wanted:
            raise pytest.UsageError(
                f"--golden-variants: the dataset's manifest ({manifest_path}) declares no "
                "variants (add a `variants:` block, see docs/variants.md)"
            )
        return None
    if config.getoption("golden_models", default=None):
        raise pytest.UsageError(
            "--golden-models cannot be combined with the manifest's variants: each variant "
            "names its model; pick variants with --golden-variants=A,B"
        )
    try:
        selected = select_variants(declared, wanted)
    except GoldevalError as exc:
        raise pytest.UsageError(str(exc)) from None
    named = [v.name for v in selected if v.model]
    if named and config.getoption("golden_model", default=None):
        raise pytest.UsageError(
            f"--golden-model cannot be combined with variants that name their model "
            f"({', '.join(named)}): it would be ambiguous which model answers"
        )
    chosen = SessionVariants(tuple(selected), compare)
    gate = chosen.compared()
    if gate is not None:
        try:  # each pair is a bootstrap over every case: bounded before the first call
            pair_names(chosen.names, gate.control, gate.pairs)
        except GoldevalError as exc:
            raise pytest.UsageError(str(exc)) from None
    return chosen


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
