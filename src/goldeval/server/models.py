"""The API's request and response documents (pydantic v2, camelCase on the wire)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from goldeval.dataset.variants import NAME_PATTERN as VARIANT_NAME
from goldeval.results.documents import Comparison, ExitDecisionDoc, GateDoc, Metrics, Protocol
from goldeval.server.settings import DATASET_SPEC

_PRINTABLE = r"^[\x21-\x7e]{1,200}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class DatasetRef(_Strict):
    """The seed's spelling: ``{"name": "<folder>", "version": "<dataset id>"}``."""

    name: str = Field(min_length=1, max_length=128)
    version: str | None = Field(default=None, min_length=1, max_length=128)


class ModelRef(_Strict):
    """The seed's spelling: ``{"provider": "openai", "name": "gpt-x"}``."""

    provider: str | None = Field(default=None, max_length=64)
    name: str | None = Field(default=None, max_length=200)


class RunRequest(_Strict):
    """``POST /api/eval/runs``. Unknown fields are refused (422), so a typo never runs with
    a default silently."""

    dataset: str | DatasetRef = Field(
        description="dataset id (manifest `version`) or folder name under the datasets folder"
    )
    mode: Literal["fixture", "live"] = Field(
        default="fixture", description="fixture: recorded answers; live: call the model"
    )
    attempts: int = Field(default=1, ge=1, description="attempts per case")
    model: str | ModelRef | None = Field(default=None, description="model for live mode")
    provider: str | None = Field(
        default=None, max_length=64, description="live provider (ollama, openai, ...)"
    )
    baselineRunId: str | None = Field(
        default=None, max_length=128, description="compare with this run (id of this service)"
    )
    idempotencyKey: str | None = Field(
        default=None,
        pattern=_PRINTABLE,
        description="the same key returns the existing run (200) instead of a second one",
    )
    deadlineSeconds: float | None = Field(
        default=None, gt=0, le=7 * 24 * 3600, description="run budget (--golden-deadline)"
    )
    noGate: bool = Field(default=False, description="report without gating (--golden-no-gate)")
    variants: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=32,
        description="the manifest variants to run side by side, in order "
        "(--golden-variants); all declared ones when left out",
    )
    scoringProfile: str | None = Field(
        default=None,
        max_length=64,
        description="accepted for the seed's clients; only 'default' exists (the manifest's "
        "graders and gate)",
    )

    @field_validator("model", mode="after")
    @classmethod
    def _model_text(cls, value: str | ModelRef | None) -> str | ModelRef | None:
        if isinstance(value, str) and not value:
            return None
        return value

    @field_validator("variants", mode="after")
    @classmethod
    def _variant_names(cls, value: list[str] | None) -> list[str] | None:
        for name in value or ():
            if not VARIANT_NAME.match(name):
                raise ValueError(
                    f"{name[:80]!r} is not a variant name: letters, digits, '.', '_' and '-', "
                    "at most 64"
                )
        return value

    @field_validator("provider", mode="after")
    @classmethod
    def _provider_name(cls, value: str | None) -> str | None:
        if value is not None and not DATASET_SPEC.match(value):
            raise ValueError("a provider name: letters, digits, '.', '_' and '-'")
        return value

    def dataset_spec(self) -> tuple[str, str | None]:
        if isinstance(self.dataset, DatasetRef):
            return self.dataset.name, self.dataset.version
        return self.dataset, None

    def model_and_provider(self) -> tuple[str | None, str | None]:
        if isinstance(self.model, ModelRef):
            return self.model.name, self.model.provider or self.provider
        return self.model, self.provider


class ArtifactOut(BaseModel):
    type: str
    path: str
    sha256: str
    size: int
    href: str


class RunOut(BaseModel):
    """A run as the API shows it."""

    id: str
    status: str
    datasetId: str
    idempotencyKey: str | None
    request: dict[str, Any]
    runKey: str
    storeRunId: str | None
    createdAt: datetime
    startedAt: datetime | None
    finishedAt: datetime | None
    claims: int
    cancelRequested: bool
    exitCode: int | None
    passed: bool | None = Field(
        description="true only when the run finished with exit code 0 (everything graded, "
        "gate passed)"
    )
    error: str | None
    attempts: dict[str, int] | None = None
    # The run document's own models (goldeval.results.documents), shown with the keys run.json
    # has: the OpenAPI schema types every field, the JSON equals run.json's.
    protocol: Protocol | None = None
    metrics: Metrics | None = None
    qualityGate: GateDoc | None = None
    exitDecision: ExitDecisionDoc | None = None
    comparison: Comparison | None = None
    artifacts: list[ArtifactOut] | None = None
    links: dict[str, str] = Field(default_factory=dict)

    @field_serializer("protocol", "metrics", "qualityGate", "exitDecision", "comparison")
    def _as_in_run_json(self, value: Any) -> dict[str, Any] | None:
        return value.dump() if value is not None else None


class RunPage(BaseModel):
    items: list[RunOut]
    nextCursor: str | None


class ResultOut(BaseModel):
    caseId: str
    attempt: int
    model: str | None
    #: The manifest variant the attempt ran (variant sessions only).
    variant: str | None = None
    status: str
    record: dict[str, Any]


class ResultPage(BaseModel):
    runId: str
    items: list[ResultOut]
    nextCursor: str | None


class Liveness(BaseModel):
    """``/healthz``: the process answers; nothing about the store (no key needed)."""

    status: Literal["ok"]


class Health(BaseModel):
    """``/readyz``: ``checks`` says what was checked (store, schemaVersion, migrations,
    datasets)."""

    status: Literal["ok", "unavailable"]
    checks: dict[str, Any] = Field(default_factory=dict)
