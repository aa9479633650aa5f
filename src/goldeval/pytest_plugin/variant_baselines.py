"""Baselines of a variant session (issue 35): each variant's run is compared with a baseline
of its own variant, and ``--golden-save-baseline`` saves one per variant.

A variant's protocol carries its name (``variant``), so a committed baseline compares only
with runs of the same variant; the default lookup (``baselines/<id>-*.json``) finds each
variant's own. A path typed on the command line names one file, so with several variants it
must say where each goes: ``{variant}`` is replaced by the variant's name
(``--golden-save-baseline=baselines/faq-{variant}.json``). ``--golden-models`` runs take no
baseline at all (a usage error rather than an option silently ignored).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

#: The placeholder a typed baseline path uses for the variant's name.
VARIANT_FIELD = "{variant}"

if TYPE_CHECKING:
    from goldeval.core.settings import RunSettings
    from goldeval.pytest_plugin.state import GoldenSession
    from goldeval.pytest_plugin.variants import SessionVariants


def variant_path(typed: str, variant: str | None) -> str:
    """``typed`` with ``{variant}`` replaced by the variant's name (no other field: a path
    is not a format string)."""
    return typed.replace(VARIANT_FIELD, variant) if variant is not None else typed


def baseline_variants(state: GoldenSession) -> list[str | None]:
    """The variants whose runs take a baseline: every selected one, or [None] outside
    variant sessions."""
    return list(state.variants.names) if state.variants is not None else [None]


def check_baseline_options(settings: RunSettings, variants: SessionVariants | None) -> None:
    """Usage errors (exit 4, before any call) for baseline options a side-by-side session
    could not honour: any with ``--golden-models``; with several variants, a typed path
    without ``{variant}`` (every variant's run would read or overwrite one file)."""
    typed = [
        (option, value)
        for option, value in (
            ("--golden-baseline", settings.baseline),
            ("--golden-save-baseline", settings.save_baseline),
        )
        if value
    ]
    if not typed:
        return
    if variants is None and len(settings.models) > 1:
        raise pytest.UsageError(
            f"{typed[0][0]} cannot be combined with --golden-models: the models' runs are "
            "reported side by side and take no baseline; run one model at a time to compare "
            "or save its baseline, or declare the models as `variants:` (docs/variants.md)"
        )
    if variants is None or len(variants.names) < 2:
        return
    for option, value in typed:
        if VARIANT_FIELD not in value:
            raise pytest.UsageError(
                f"{option}={value}: {len(variants.names)} variants run, each with its own "
                f"baseline: put {VARIANT_FIELD} in the path where the variant's name goes "
                f"({option}=baselines/<name>-{VARIANT_FIELD}.json)"
            )
