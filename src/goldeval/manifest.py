"""Dataset and pack manifests (``dataset.yaml``; the reference's ``dataset.json`` is read too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from goldeval.domain import ContractConfig, RetrieverConfig
from goldeval.errors import DatasetError
from goldeval.safe_files import contained_file, read_regular_file

MANIFEST_NAMES = ("dataset.yaml", "dataset.yml", "dataset.json")


class FixtureThresholds(BaseModel):
    model_config = ConfigDict(extra="forbid")

    thresholds: dict[str, float] = Field(default_factory=dict)
    allowed_regression: float | None = Field(default=None, alias="allowedRegression")


class GatePolicy(BaseModel):
    """Gate policy per mode (issue "Baselines…"); absent → the built-in defaults."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    fixture: FixtureThresholds | None = None
    live: FixtureThresholds | None = None
    #: Extra metrics that may be gated by name (e.g. ``grader.json_schema``).
    rules: dict[str, bool] = Field(default_factory=dict)


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    version: str
    schema_: int | None = Field(default=None, alias="schema")
    name: str | None = None
    description: str | None = None
    changelog: list[str] = Field(default_factory=list)
    pack: str | None = None
    gate: GatePolicy | None = None
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
        text = read_regular_file(path).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"not valid UTF-8 ({exc.reason})", path=path) from None
    data: Any
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise _parse_error(exc, path) from None
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
        raise DatasetError(err["msg"], path=path, field=loc) from None
    except (ValueError, TypeError, RecursionError) as exc:
        raise DatasetError(f"invalid value: {str(exc)[:160]}", path=path) from None
    if manifest.contract is not None:
        _check_contract(manifest.contract, path)
    return manifest


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
