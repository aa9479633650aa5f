"""The store's named rows: what callers get back (:class:`StoredRun`, :class:`RunRow`,
:class:`ArtifactRow`), what the plugin hands in (:class:`AttemptText`), and the ``runs`` row
as the store selects it (:class:`RunColumns`), each read by name, not position."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NamedTuple

RunStatus = Literal["QUEUED", "RUNNING", "COMPLETED", "INCOMPLETE", "FAILED", "INTERRUPTED"]
"""Life cycle of a run: QUEUED -> RUNNING -> COMPLETED | INCOMPLETE | FAILED | INTERRUPTED.

INCOMPLETE: cut short by ``-x``/``--maxfail``, its deadline or its budget; INTERRUPTED: ended
by a signal (or a store failure): the status the run document's outcome gives
(:func:`goldeval.verdict.run_status.run_status`)."""

AttemptKey = tuple[str, int, str]
"""(case id, attempt index, model) of an attempt; model is ``""`` when the run has none."""


class AttemptText(NamedTuple):
    """An attempt record already serialised as compact JSON (the plugin's path)."""

    case_id: str
    attempt_index: int
    model: str | None
    status: str
    #: the record as compact JSON, without raw model text
    text: str
    #: where the content begins when ``text`` is laid out run fields first
    #: (goldeval.core.record_text); 0 when it is not known: the store parses the record.
    content_at: int = 0
    #: The manifest variant the attempt ran (variant sessions), the ``variant`` column.
    variant: str | None = None


class AttemptJson(NamedTuple):
    """One attempt of a results page as the API sends it: its key columns and its record as
    JSON text (the store's content spliced in undecoded)."""

    case_id: str
    attempt_index: int
    #: The row's model column (the variant's name in a variant session).
    model: str
    status: str
    variant: str | None
    #: The model the record names (what it asked; None: none).
    record_model: str | None
    record: str


ERROR = "ERROR"


@dataclass(frozen=True)
class StoredRun:
    """The run ``begin_run`` created or resumed. Use its ``run_id`` for every later call."""

    run_id: str
    run_key: str | None
    dataset_id: str
    dataset_hash: str
    mode: str
    model: str | None
    protocol: dict[str, Any]
    configuration: dict[str, Any]
    status: str
    started_at: datetime
    resumed: bool
    """True when the run existed already (a resume, or another shard of the same run key)."""


@dataclass(frozen=True)
class RunRow:
    """One run as listed by :meth:`Store.runs` and :meth:`Store.get_run`."""

    run_id: str
    run_key: str | None
    dataset_id: str
    dataset_hash: str
    mode: str
    model: str | None
    status: str
    started_at: datetime
    finished_at: datetime | None
    pass_rate: float | None
    """``summary.metrics.overallPassRate.rate`` (or ``summary.overallPassRate``), if any."""
    protocol: dict[str, Any]
    configuration: dict[str, Any]
    summary: dict[str, Any] | None


@dataclass(frozen=True)
class ArtifactRow:
    """One file of a run's artifact inventory."""

    path: str
    sha256: str
    size: int
    created_at: datetime


# --------------------------------------------------------------------------- interface


class RunColumns(NamedTuple):
    """One ``runs`` row as :data:`RUN_COLUMNS` selects it, read by name (not position)."""

    run_id: str
    run_key: str | None
    dataset_id: str
    dataset_hash: str
    mode: str
    model: str | None
    protocol: Any
    configuration: Any
    status: str
    started_at: Any
    finished_at: Any
    summary: Any


RUN_COLUMNS = ", ".join(RunColumns._fields)
