"""Dataset and pack manifests (``dataset.yaml``; the reference's ``dataset.json`` is read too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from goldeval.core.bounded_yaml import load_yaml
from goldeval.core.errors import DatasetError
from goldeval.core.limits import LimitExceeded, loads_json
from goldeval.core.rates import GRADER_PREFIX, RATE_NAMES
from goldeval.core.safe_files import contained_file, read_regular_file
from goldeval.dataset.domain import ContractConfig, RetrieverConfig
from goldeval.dataset.profiles import GENERIC, PROFILES, get_profile
from goldeval.dataset.request import parse_request
from goldeval.dataset.templates import CompiledTemplates, PromptTemplates, TemplateProblem
from goldeval.dataset.variants import CompareGate, Variant, check_variants

MANIFEST_NAMES = ("dataset.yaml", "dataset.yml", "dataset.json")


#: Rate names a gate threshold may name: every rate of a run (the gated ones plus the reported,
#: never gated judgeAcceptRate, which only warns).
GATE_RATE_NAMES: tuple[str, ...] = RATE_NAMES


class FixtureThresholds(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Strict: `true` or "0.8" in a threshold is a mistake, not 1.0 / 0.8.
    thresholds: dict[str, StrictFloat] = Field(default_factory=dict)
    allowed_regression: StrictFloat | None = Field(default=None, alias="allowedRegression")


class GatePolicy(BaseModel):
    """Gate policy per mode (issue "Baselines…"); absent → the built-in defaults."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    fixture: FixtureThresholds | None = None
    live: FixtureThresholds | None = None
    #: Extra metrics that may be gated by name (e.g. ``grader.json_schema``).
    rules: dict[str, bool] = Field(default_factory=dict)
    #: The gate on the difference between two variants of the session (issue 35).
    compare: CompareGate | None = None


class CalibrationPolicy(BaseModel):
    """What ``goldeval calibrate`` must measure to pass (docs/methodology.md, "Judge
    calibration"); absent: these defaults."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    #: Rows where both the human and the judge decided (ACCEPT or REJECT).
    min_n: StrictInt = Field(default=20, alias="minN", ge=1)
    #: The agreement figure whose interval is checked: Cohen's kappa or plain accuracy.
    agreement: Literal["kappa", "accuracy"] = "kappa"
    #: The lower end of the figure's 95% interval must reach this (kappa 0.2: at least "fair"
    #: agreement beyond chance, with the uncertainty of a small corpus counted against it).
    min_lower_bound: StrictFloat = Field(default=0.2, alias="minLowerBound", ge=-1.0, le=1.0)


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    version: str
    schema_: int | None = Field(default=None, alias="schema")
    name: str | None = None
    description: str | None = None
    changelog: list[str] = Field(default_factory=list)
    pack: str | None = None
    gate: GatePolicy | None = None
    calibration: CalibrationPolicy | None = None
    contract: ContractConfig | None = None
    retriever: RetrieverConfig | None = None
    #: grader name → "hard" | "soft" | "off"
    graders: dict[str, str] = Field(default_factory=dict)
    #: options passed to graders by name (e.g. a citation pattern)
    grader_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    rows: str | None = None
    #: Rows that no hard grader checks (no expect key a hard grader reads, no must_not) pass
    #: whatever the answer; they are a row error unless this is true.
    allow_ungraded_rows: bool = False
    #: The domain's rules (``dataset.profiles``); absent: generic.
    profile: str | None = None
    #: System and user prompt templates (Jinja2, sandboxed, undefined variables are errors).
    prompt: PromptTemplates | None = None
    #: Request options for every row (a row's ``request:`` overrides them key by key).
    request: dict[str, Any] | None = None
    #: What a truncated answer (finish_reason length) is: a hard failure, soft, or off.
    truncated: str = "hard"
    #: Variants run side by side over the same rows (goldeval.dataset.variants).
    variants: list[Variant] | None = None

    @property
    def profile_name(self) -> str:
        return self.profile or GENERIC

    def templates(self) -> CompiledTemplates | None:
        """The prompt templates, parsed (checked by read_manifest, so they parse)."""
        if self.prompt is None or (self.prompt.system is None and self.prompt.user is None):
            return None
        return CompiledTemplates(self.prompt)


def find_manifest(folder: Path) -> Path | None:
    for name in MANIFEST_NAMES:
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


def _parse_error(exc: Exception, path: Path) -> DatasetError:
    line = getattr(exc, "lineno", None)
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        line = mark.line + 1
    return DatasetError(f"invalid {path.suffix[1:].upper()}: {exc}", path=path, line=line)


def read_manifest(path: Path) -> Manifest:
    # A manifest linked out of its folder (to /etc/shadow, say) is refused before it is read:
    # a YAML error would quote its lines. A FIFO is refused without blocking.
    contained_file(path, path.parent, what="manifest")
    try:
        # A YAML manifest is read no further than the YAML limit (load_yaml refuses more).
        limit = "file_bytes" if path.suffix == ".json" else "yaml_bytes"
        text = read_regular_file(path, limit=limit).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"not valid UTF-8 ({exc.reason})", path=path) from None
    data: Any
    try:
        if path.suffix == ".json":
            data = loads_json(text, what="the manifest")
        else:
            # Bounded while composed: an alias bomb or a deep nest ends here, fast.
            data = load_yaml(text, path)[1]
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise _parse_error(exc, path) from None
    except LimitExceeded as exc:
        raise DatasetError(
            f"invalid {path.suffix[1:].upper()}: {exc.message}",
            path=path,
            line=exc.line,
            hint=exc.hint,
        ) from None
    except RecursionError:
        raise DatasetError(
            f"invalid {path.suffix[1:].upper()}: nested too deeply", path=path
        ) from None
    except (ValueError, TypeError, OverflowError) as exc:
        # YAML timestamps like 2024-02-30, `!!int zz`, integers beyond the digit limit...
        raise DatasetError(
            f"invalid {path.suffix[1:].upper()}: {str(exc)[:160]}", path=path
        ) from None
    if not isinstance(data, dict):
        raise DatasetError("a manifest must be a mapping with at least `version`", path=path)
    version = data.get("version")
    if not isinstance(version, str) or not version.strip():
        raise DatasetError(
            "missing or blank", path=path, field="version", hint="e.g. version: generation-v1"
        )
    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        hint = None
        if err["type"] == "extra_forbidden" and err["loc"]:
            hint = _suggest(str(err["loc"][-1]), _keys_at(err["loc"][:-1]))
        raise DatasetError(err["msg"], path=path, field=loc, hint=hint) from None
    except (ValueError, TypeError, RecursionError) as exc:
        raise DatasetError(f"invalid value: {str(exc)[:160]}", path=path) from None
    if manifest.contract is not None:
        _check_contract(manifest.contract, path)
    _check_profile_and_request(manifest, path)
    if manifest.gate is not None:
        check_gate_policy(manifest.gate, path)
        _check_gate_rates(manifest, path)
    check_variants(manifest.variants, manifest.gate.compare if manifest.gate else None, path)
    return manifest


def _check_profile_and_request(manifest: Manifest, path: Path) -> None:
    if manifest.profile is not None and manifest.profile not in PROFILES:
        raise DatasetError(
            f"unknown profile {manifest.profile!r}",
            path=path,
            field="profile",
            hint=_suggest(manifest.profile, list(PROFILES))
            or f"profiles: {', '.join(sorted(PROFILES))}; leave it out for generic rules",
        )
    if manifest.truncated not in ("hard", "soft", "off"):
        raise DatasetError(
            f"{manifest.truncated!r} is not hard, soft or off", path=path, field="truncated"
        )
    if manifest.prompt is not None:
        try:
            manifest.templates()
        except TemplateProblem as exc:
            raise DatasetError(exc.message, path=path, field=exc.field) from None
    if manifest.request is not None:
        plain, problems = parse_request(manifest.request)
        if problems:
            where, message = problems[0]
            raise DatasetError(
                message,
                path=path,
                field="request" + (f".{where}" if where else ""),
                hint="request options: temperature, top_p, max_tokens, seed, stop, tools, "
                "tool_choice, response_format",
            )
        manifest.request = plain


def _check_gate_rates(manifest: Manifest, path: Path) -> None:
    """A generic dataset has no reference rates: a threshold on one would never apply."""
    shown = get_profile(manifest.profile).rates
    assert manifest.gate is not None
    for mode in ("fixture", "live"):
        policy: FixtureThresholds | None = getattr(manifest.gate, mode)
        if policy is None:
            continue
        for name in policy.thresholds:
            if name in RATE_NAMES and name not in shown:
                raise DatasetError(
                    f"{name} is a rate of the java-autotest profile; this dataset's profile "
                    f"is {manifest.profile_name}, so this rule would never apply",
                    path=path,
                    field=f"gate.{mode}.thresholds.{name}",
                    hint="gate on overallPassRate or grader.<name>, or set "
                    "`profile: java-autotest`",
                )


def _suggest(name: str, known: list[str]) -> str | None:
    import difflib

    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def _keys_at(loc: tuple[Any, ...]) -> list[str]:
    """The keys the manifest model accepts at ``loc`` (for a did-you-mean on an unknown key)."""
    import typing

    model: Any = Manifest
    for part in loc:
        fields = {(f.alias or n): f for n, f in model.model_fields.items()}
        field = fields.get(str(part)) or model.model_fields.get(str(part))
        if field is None:
            return []
        inner = [a for a in typing.get_args(field.annotation) if a is not type(None)]
        target = inner[0] if inner else field.annotation
        if not (isinstance(target, type) and issubclass(target, BaseModel)):
            return []
        model = target
    return [f.alias or n for n, f in model.model_fields.items()]


def check_gate_policy(gate: GatePolicy, path: Path, grader_names: set[str] | None = None) -> None:
    """Gate thresholds a typo would silently drop, or that crash after the run, fail here.

    A key must be a rate name the gate knows or ``grader.<name>``; with ``grader_names`` (the
    registered graders, known once the plugin's hooks ran) the name must be one of them. Every
    threshold and ``allowedRegression`` is a fraction in [0, 1] (``60`` means 0.6).
    """
    for mode in ("fixture", "live"):
        policy: FixtureThresholds | None = getattr(gate, mode)
        if policy is None:
            continue
        base = f"gate.{mode}"
        for name, value in policy.thresholds.items():
            where = f"{base}.thresholds.{name}"
            if name.startswith(GRADER_PREFIX):
                grader = name[len(GRADER_PREFIX) :]
                if not grader:
                    raise DatasetError(
                        "names no grader", path=path, field=where, hint="write grader.<name>"
                    )
                if grader_names is not None and grader not in grader_names:
                    known = sorted(grader_names)
                    raise DatasetError(
                        f"no grader {grader!r} is registered, so this rule would never apply",
                        path=path,
                        field=where,
                        hint=_suggest(grader, known)
                        or ("graders: " + ", ".join(known) if known else None),
                    )
            elif name not in GATE_RATE_NAMES:
                raise DatasetError(
                    "not a metric the gate knows, so this rule would never apply",
                    path=path,
                    field=where,
                    hint=_suggest(name, list(GATE_RATE_NAMES))
                    or f"use one of {', '.join(GATE_RATE_NAMES)} or grader.<name>",
                )
            _check_fraction(value, path, where)
        if policy.allowed_regression is not None:
            _check_fraction(policy.allowed_regression, path, f"{base}.allowedRegression")


def _check_fraction(value: float, path: Path, where: str) -> None:
    if 0.0 <= value <= 1.0:  # NaN fails both comparisons
        return
    hint = "rates are fractions from 0 to 1"
    if 1.0 < value <= 100.0:
        hint += f": write {value / 100:g} for {value:g}%"
    raise DatasetError(f"{value:g} is outside [0, 1]", path=path, field=where, hint=hint)


def _check_contract(contract: ContractConfig, path: Path) -> None:
    """Domain constants that would only fail at grading time are checked here, at collection."""
    import re

    try:
        re.compile(contract.tests_class_pattern, re.ASCII)
    except re.error as exc:
        raise DatasetError(
            f"not a valid regular expression: {exc}",
            path=path,
            field="contract.tests_class_pattern",
        ) from None
    for name, template, key in (
        ("layer_annotation", contract.layer_annotation, "layer"),
        ("class_template", contract.class_template, "name"),
    ):
        try:
            template.format(**{key: "x"})
        except (KeyError, IndexError, ValueError) as exc:
            raise DatasetError(
                f"not a valid template ({exc!r}); use {{{key}}} for the value",
                path=path,
                field=f"contract.{name}",
            ) from None
