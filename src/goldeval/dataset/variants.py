"""Variants of one dataset (issue 35): named ways of answering the same rows, run side by side
in one session, and the gate on the difference between two of them.

A manifest declares them under ``variants:`` and may gate on a pair under ``gate.compare``::

    variants:
      - {name: control, model: m-one}
      - {name: candidate, model: m-two}
    gate:
      compare: {control: control, candidate: candidate, nonInferiority: 0.05}

What this version runs: variants that differ by **model** (one provider, one base URL, the
dataset's own prompt and request options). A variant naming a provider, a base URL, a prompt
or request options is refused here, with the field named, rather than run as if those were
applied (docs/variants.md says what is not there yet).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat

from goldeval.core.errors import DatasetError, GoldevalError

#: A variant's name is part of item ids and file names: short, no spaces, no brackets.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

#: Variants one manifest may declare: each multiplies the session's items and model calls.
MAX_VARIANTS = 32

#: Fields of a variant that this version parses but does not apply (docs/variants.md).
NOT_YET = {
    "provider": "a per-variant provider",
    "baseUrl": "a per-variant base URL",
    "prompt": "a per-variant prompt template",
    "options": "per-variant request options",
}


class Variant(BaseModel):
    """One way of answering the dataset's rows."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    model: str | None = None
    provider: str | None = None
    base_url: str | None = Field(default=None, alias="baseUrl")
    prompt: dict[str, Any] | str | None = None
    options: dict[str, Any] | None = None


class CompareGate(BaseModel):
    """``gate.compare``: the candidate must not be worse than the control by more than
    ``nonInferiority`` (a pass-rate fraction), at 95%, on the cases both graded."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    control: str
    candidate: str
    non_inferiority: StrictFloat = Field(alias="nonInferiority")
    #: How a case's attempts become one outcome for McNemar (sampling.case_outcome).
    outcome: Literal["majority", "all"] = "majority"


def check_variants(variants: list[Variant] | None, compare: CompareGate | None, path: Path) -> None:
    """Refuse what would run wrongly or never apply, naming the manifest field."""
    names: list[str] = []
    models: dict[str, str] = {}
    if variants is not None and len(variants) > MAX_VARIANTS:
        raise DatasetError(
            f"{len(variants)} variants declared, at most {MAX_VARIANTS}",
            path=path,
            field="variants",
            hint="each variant runs every selected row again",
        )
    for i, variant in enumerate(variants or []):
        where = f"variants[{i}]"
        if not NAME_PATTERN.match(variant.name):
            raise DatasetError(
                f"{variant.name!r} is not a variant name",
                path=path,
                field=f"{where}.name",
                hint="letters, digits, '.', '_' and '-', at most 64, starting with a letter "
                "or digit",
            )
        if variant.name in names:
            raise DatasetError(
                f"variant {variant.name!r} is declared twice", path=path, field=f"{where}.name"
            )
        names.append(variant.name)
        for key, what in NOT_YET.items():
            if getattr(variant, "base_url" if key == "baseUrl" else key) is not None:
                raise DatasetError(
                    f"{what} is not supported yet",
                    path=path,
                    field=f"{where}.{key}",
                    hint="variants differ by model in this version (docs/variants.md)",
                )
        if not variant.model or not variant.model.strip():
            raise DatasetError("missing or blank", path=path, field=f"{where}.model")
        if variant.model in models:
            raise DatasetError(
                f"variants {models[variant.model]!r} and {variant.name!r} both run model "
                f"{variant.model!r}: they would give the same answers",
                path=path,
                field=f"{where}.model",
            )
        models[variant.model] = variant.name
    if compare is None:
        return
    if not names:
        raise DatasetError(
            "compares variants, but the manifest declares none",
            path=path,
            field="gate.compare",
            hint="declare them under `variants:`",
        )
    for key in ("control", "candidate"):
        value = getattr(compare, key)
        if value not in names:
            raise DatasetError(
                f"no variant {value!r} is declared",
                path=path,
                field=f"gate.compare.{key}",
                hint=_suggest(value, names) or f"variants: {', '.join(names)}",
            )
    if compare.control == compare.candidate:
        raise DatasetError(
            "control and candidate are the same variant", path=path, field="gate.compare"
        )
    if not 0.0 <= compare.non_inferiority < 1.0:  # NaN fails too
        raise DatasetError(
            f"{compare.non_inferiority:g} is outside [0, 1)",
            path=path,
            field="gate.compare.nonInferiority",
            hint="a pass-rate fraction: 0.05 allows the candidate 5 points below the control",
        )


def select_variants(declared: list[Variant], wanted: str | None) -> list[Variant]:
    """The variants ``--golden-variants=a,b`` picks (all declared ones when it is not given),
    in the order given. A name the manifest does not declare is a GoldevalError."""
    if not wanted:
        return list(declared)
    by_name = {v.name: v for v in declared}
    picked: list[Variant] = []
    for name in (n.strip() for n in wanted.split(",")):
        if not name:
            continue
        variant = by_name.get(name)
        if variant is None:
            known = list(by_name)
            hint = _suggest(name, known)
            raise GoldevalError(
                f"--golden-variants: no variant {name!r} in the dataset's manifest"
                + (f" ({hint})" if hint else f" (declared: {', '.join(known) or 'none'})")
            )
        if variant not in picked:
            picked.append(variant)
    if not picked:
        raise GoldevalError("--golden-variants names no variant")
    return picked


def _suggest(name: str, known: list[str]) -> str | None:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None
