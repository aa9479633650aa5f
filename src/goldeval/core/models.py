"""Plain-data records that flow from a test item to the controller and into run.json.

Field names serialise to the reference's camelCase names (``caseId``, ``refuseChecked``) so
run.json and baselines read like the system we port. Every model here is JSON-plain, so a
record can travel on a pytest report between xdist workers and the controller.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class Record(BaseModel):
    """Base: camelCase aliases, population by either name, no extra fields on load."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=False
    )

    def dump(self) -> dict[str, Any]:
        """JSON-plain dict with the reference's field names, nulls omitted."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class Status(str, Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    SKIPPED = "SKIPPED"
    ERROR = "ERROR"


class Mode(str, Enum):
    FIXTURE = "fixture"
    LIVE = "live"
    RECORD = "record"

    @property
    def protocol_name(self) -> str:
        # The reference calls fixture runs DETERMINISTIC; record runs call the model: LIVE.
        return "DETERMINISTIC" if self is Mode.FIXTURE else "LIVE"


class Severity(str, Enum):
    CRITICAL = "CRITICAL"
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class Violation(Record):
    case_id: str
    category: str
    severity: Severity
    grader: str
    reason: str


class ContractResult(Record):
    passed: bool
    violations: list[str] = Field(default_factory=list)
    refuse_checked: bool = False
    refuse_ok: bool = False
    rag_checked: bool = False
    rag_ok: bool = False
    layer_checked: bool = False
    layer_ok: bool = False
    hallucination_hit: bool = False
    taxonomy: list[Violation] = Field(default_factory=list)


class RetrievalResult(Record):
    applicable: bool
    passed: bool
    retrieved: list[str] = Field(default_factory=list)
    expected: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    unexpected: list[str] = Field(default_factory=list)
    forbidden_retrieval: bool = False


class GraderOutcome(Record):
    """Result of one general-purpose grader on one attempt."""

    grader: str
    passed: bool
    hard: bool = True
    score: float | None = None
    threshold: float | None = None
    violations: list[Violation] = Field(default_factory=list)


#: The largest token count an answer may report (a trillion): larger is no measurement, and
#: a count past 2**63 could not even be stored (SQLite and PostgreSQL integers).
MAX_TOKEN_COUNT = 10**12


def token_count_problem(value: object) -> str | None:
    """Why ``value`` is no token count (an integer from 0 to :data:`MAX_TOKEN_COUNT`), with the
    value shown short (a 5,000-digit integer cannot even be repr'd); None when it is one."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT:
        return None
    return f"must be an integer from 0 to {MAX_TOKEN_COUNT:,}, got {shown_count(value)}"


def shown_count(value: object) -> str:
    """``value`` as a message shows it: at most about 40 characters."""
    if isinstance(value, int) and not isinstance(value, bool) and not -(10**40) < value < 10**40:
        return "an integer of more than 40 digits"
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


class TokenUsage(Record):
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    estimated_cost: float | None = None
    #: True when the provider reported no usage and the counts are characters / 4
    #: (goldeval.core.limits.estimate_tokens): a budget still sees the call.
    estimated: bool | None = None


class JudgeRecord(Record):
    decision: str
    score: float | None = None
    reasons: list[str] = Field(default_factory=list)
    schema_valid: bool = False
    override_attempted: bool | None = None
    error: str | None = None
    #: The judge calls' own tokens (all repetitions), counted apart from the model's.
    tokens: TokenUsage | None = None


class AttemptRecord(Record):
    """One test item's outcome: a case × attempt (× model)."""

    # The run fields first (goldeval.core.record_text.RUN_FIELDS): the record's JSON then
    # starts with them, and the store splits it from the content without a parse.
    case_id: str
    index: int
    status: Status
    model: str | None = None
    duration_ms: int = 0
    tries: int | None = None
    contract: ContractResult | None = None
    retrieval: RetrievalResult | None = None
    graders: list[GraderOutcome] = Field(default_factory=list)
    judge: JudgeRecord | None = None
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    error_kind: str | None = None
    error_message: str | None = None
    #: Live calls: ms waiting for the provider's limiter (adaptive concurrency, rate limits,
    #: Retry-After), apart from ``duration_ms``, which runs from send over every try.
    queue_ms: int | None = None
    #: Streamed live calls: ms from send to the first piece of the answer.
    ttft_ms: int | None = None
    judge_stability: float | None = None
    skip_reason: str | None = None
    # Raw texts travel to the controller for per-case artifacts; stripped from run.json.
    output: str | None = None
    judge_output: str | None = None
    #: Record mode only: what the graders read besides the text (tool calls, finish reason,
    #: usage), written as the fixture's JSON sidecar; stripped from run.json like the texts.
    recorded_answer: dict[str, Any] | None = None
    #: Why the model stopped (``stop``, ``length``, ``tool_calls``), when the provider says.
    finish_reason: str | None = None
    #: The messages sent, for a failing attempt of a row with a template or a conversation.
    prompt_messages: list[dict[str, Any]] | None = None
    #: The model the server says answered (the response's ``model`` field), when it says so
    #: and it differs from ``model`` (the name asked for, which keeps runs comparable).
    served_model: str | None = None


class Rate(BaseModel):
    """hits/total; undefined (None) when nothing was counted, never 0% or 100%."""

    model_config = ConfigDict(frozen=True)

    hits: int = 0
    total: int = 0

    @property
    def rate(self) -> float | None:
        return self.hits / self.total if self.total else None

    def __add__(self, other: Rate) -> Rate:
        return Rate(hits=self.hits + other.hits, total=self.total + other.total)


class CaseInfo(Record):
    """What the controller needs to know about a selected case (sent once per case)."""

    case_id: str
    kinds: list[str]
    prompt: str
    tags: list[str] = Field(default_factory=list)
    red: bool = False
    line: int | None = None
