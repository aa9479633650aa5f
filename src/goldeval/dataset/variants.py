"""Variants of one dataset (issue 35): named ways of answering the same rows, run side by side
in one session, and the gate on the difference between two of them.

A manifest declares them under ``variants:`` and may gate on a pair under ``gate.compare``::

    variants:
      - {name: control, model: m-one}
      - {name: candidate, model: m-two}
    gate:
      compare: {control: control, candidate: candidate, nonInferiority: 0.05}

What this version runs: variants that differ by **provider / base URL**, **model**, **prompt
templates** and/or **request options**. A variant's ``prompt.system`` or ``prompt.user``
replaces that part of the manifest's ``prompt:`` block (the part it leaves out is the
manifest's); its ``options`` go over the manifest's ``request:`` (a row's own still win). In
fixture mode each variant replays its own recorded answers (``fixtures/<name>/<id>.out.md``),
which ``--golden-mode=record`` writes. A per-variant judge is not parsed (docs/variants.md
says what is not there yet).
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat

from goldeval.core.errors import DatasetError, GoldevalError
from goldeval.dataset.request import parse_request
from goldeval.dataset.templates import CompiledTemplates, PromptTemplates, TemplateProblem

#: A variant's name is part of item ids and file names: short, no spaces, no brackets.
# \Z, not $: "$" also matches before a final newline ("a\n" would be a name).
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")

#: Variants one manifest may declare: each multiplies the session's items and model calls.
MAX_VARIANTS = 32


class VariantJudge(BaseModel):
    """``variants[i].judge``: the judge that scores this variant's answers: its model, and
    its own provider or server when it names one (else the session's judge provider and
    server). Soft signal only, as the session's judge."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    model: str | None = None
    provider: str | None = None
    base_url: str | None = Field(default=None, alias="baseUrl")

    @property
    def own_server(self) -> bool:
        """Whether it names a provider or server of its own (then it has its own client)."""
        return self.provider is not None or self.base_url is not None


class Variant(BaseModel):
    """One way of answering the dataset's rows."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    model: str | None = None
    provider: str | None = None
    base_url: str | None = Field(default=None, alias="baseUrl")
    #: The parts of the manifest's ``prompt:`` block this variant replaces.
    prompt: PromptTemplates | None = None
    #: Request options over the manifest's ``request:`` (a row's own still win).
    options: dict[str, Any] | None = None
    #: Its own judge model (used when the session runs the judge, --golden-judge).
    judge: VariantJudge | None = None

    def prompt_spec(self, manifest_prompt: PromptTemplates | None) -> PromptTemplates | None:
        """The templates this variant sends: its own parts over the manifest's."""
        if self.prompt is None:
            return manifest_prompt
        base = manifest_prompt or PromptTemplates()
        return PromptTemplates(
            system=self.prompt.system if self.prompt.system is not None else base.system,
            user=self.prompt.user if self.prompt.user is not None else base.user,
        )

    def templates(self, manifest_prompt: PromptTemplates | None) -> CompiledTemplates | None:
        """The variant's templates parsed (None: neither it nor the manifest has one)."""
        spec = self.prompt_spec(manifest_prompt)
        if spec is None or (spec.system is None and spec.user is None):
            return None
        return CompiledTemplates(spec)

    def identity(self) -> tuple[str | None, ...]:
        """What makes the variant answer differently: provider, server, model, its own
        prompt parts and request options."""
        prompt = self.prompt or PromptTemplates()
        options = json.dumps(self.options, sort_keys=True) if self.options else None
        return (self.provider, self.base_url, self.model, prompt.system, prompt.user, options)


class CompareGate(BaseModel):
    """``gate.compare``: the candidate must not be worse than the control by more than
    ``nonInferiority`` (a pass-rate fraction), at 95%, on the cases both graded."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    control: str
    candidate: str
    non_inferiority: StrictFloat = Field(alias="nonInferiority")
    #: How a case's attempts become one outcome for McNemar (sampling.case_outcome).
    outcome: Literal["majority", "all"] = "majority"
    #: Which pairs ``variantComparison.pairs`` reports (goldeval.results.variant_pairs):
    #: each selected variant against the control, or every pair. Only control vs candidate
    #: gates.
    pairs: Literal["control", "all"] = "control"


def check_variants(variants: list[Variant] | None, compare: CompareGate | None, path: Path) -> None:
    """Refuse what would run wrongly or never apply, naming the manifest field."""
    declared = variants or []
    if len(declared) > MAX_VARIANTS:
        raise DatasetError(
            f"{len(declared)} variants declared, at most {MAX_VARIANTS}",
            path=path,
            field="variants",
            hint="each variant runs every selected row again",
        )
    names: list[str] = []
    identities: dict[tuple[str | None, ...], str] = {}
    for i, variant in enumerate(declared):
        _check_variant(variant, f"variants[{i}]", path, names, identities)
        names.append(variant.name)
        identities[variant.identity()] = variant.name
    named = [v.name for v in declared if v.model]
    if named and len(named) != len(declared):
        bare = next(i for i, v in enumerate(declared) if not v.model)
        raise DatasetError(
            f"variants {', '.join(repr(n) for n in named)} name a model and this one does not",
            path=path,
            field=f"variants[{bare}].model",
            hint="name a model on every variant, or on none (they then all run the session's "
            "--golden-model)",
        )
    _check_compare(compare, names, path)


def _check_judge(judge: VariantJudge, path: Any, where: str) -> None:
    """A variant's judge names something, and nothing blank."""
    for key, shown in (("model", "model"), ("provider", "provider"), ("base_url", "baseUrl")):
        value = getattr(judge, key)
        if value is not None and not value.strip():
            raise DatasetError(
                "blank",
                path=path,
                field=f"{where}.judge.{shown}",
                hint="name it, or leave it out (the session judge's is used)",
            )
    if judge.model is None and not judge.own_server:
        raise DatasetError(
            "names no judge model, provider or baseUrl",
            path=path,
            field=f"{where}.judge",
            hint="name one, or leave `judge:` out (the session's judge scores it)",
        )


def _check_variant(
    variant: Variant,
    where: str,
    path: Path,
    names: list[str],
    identities: dict[tuple[str | None, ...], str],
) -> None:
    """One variant against the rules and the variants declared before it."""
    if not NAME_PATTERN.match(variant.name):
        raise DatasetError(
            f"{variant.name!r} is not a variant name",
            path=path,
            field=f"{where}.name",
            hint="letters, digits, '.', '_' and '-', at most 64, starting with a letter or digit",
        )
    if variant.name in names:
        raise DatasetError(
            f"variant {variant.name!r} is declared twice", path=path, field=f"{where}.name"
        )
    if variant.options is not None:
        plain, problems = parse_request(variant.options)
        if problems:
            where_in, message = problems[0]
            raise DatasetError(
                message,
                path=path,
                field=f"{where}.options" + (f".{where_in}" if where_in else ""),
                hint="request options: temperature, top_p, max_tokens, seed, stop, tools, "
                "tool_choice, response_format",
            )
        variant.options = plain
    if variant.judge is not None:
        _check_judge(variant.judge, path, where)
    for key in ("model", "provider", "base_url"):
        value = getattr(variant, key)
        if value is not None and not value.strip():
            shown = "baseUrl" if key == "base_url" else key
            raise DatasetError(
                "blank", path=path, field=f"{where}.{shown}", hint=f"name a {shown} or leave it out"
            )
    _check_prompt(variant, path, where)
    twin = identities.get(variant.identity())
    if twin is not None:
        raise DatasetError(
            f"variants {twin!r} and {variant.name!r} name the same provider, model and "
            "prompt (and options): they would give the same answers",
            path=path,
            field=f"{where}.model" if variant.prompt is None else f"{where}.prompt",
            hint="a variant differs from the others by its provider, model, prompt or options",
        )


def _check_compare(compare: CompareGate | None, names: list[str], path: Path) -> None:
    """`gate.compare` names two distinct declared variants and a margin in [0, 1)."""
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


def _check_prompt(variant: Variant, path: Path, where: str) -> None:
    prompt = variant.prompt
    if prompt is None:
        return
    if prompt.system is None and prompt.user is None:
        raise DatasetError(
            "names neither system nor user",
            path=path,
            field=f"{where}.prompt",
            hint="give `system:`, `user:` or both, or leave `prompt:` out",
        )
    try:
        CompiledTemplates(prompt)
    except TemplateProblem as exc:
        raise DatasetError(exc.message, path=path, field=f"{where}.{exc.field}") from None


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
