"""How the store turns records into what it stores: compact JSON, attempt keys, and the
attempt split into its run fields and its content (stored once by hash)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from goldeval.core.record_text import split_parts
from goldeval.store.migrations import ATTEMPT_STATUSES
from goldeval.store.pages import slim_fields, split_record
from goldeval.store.rows import AttemptKey, AttemptText


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


#: One encoder for every stored text: ``json.dumps`` with options builds a new one per call.
_STORED_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def json_text(value: Any) -> str:
    """Compact JSON for a JSON column; NaN and infinities become null."""
    try:
        return _STORED_JSON.encode(value)
    except ValueError:
        return json.dumps(finite(value), ensure_ascii=False, separators=(",", ":"))


def json_value(raw: Any) -> Any:
    if isinstance(raw, (str, bytes, bytearray)):
        return json.loads(raw)
    return raw


def pass_rate(summary: Any) -> float | None:
    if not isinstance(summary, dict):
        return None
    for holder in (summary.get("metrics"), summary):
        if not isinstance(holder, dict):
            continue
        value = holder.get("overallPassRate")
        if isinstance(value, dict):
            value = value.get("rate")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _field(record: Mapping[str, Any], camel: str, snake: str, what: str) -> Any:
    if camel in record:
        return record[camel]
    if snake in record:
        return record[snake]
    raise ValueError(f"{what} record has no {camel!r}: {sorted(record)}")


def _text(value: Any) -> str:
    # Accept str-valued enums (goldeval.core.models.Status) as well as plain strings.
    enum_value = getattr(value, "value", value)
    return str(enum_value)


def _check_status(case_id: Any, index: Any, status: str) -> None:
    if status not in ATTEMPT_STATUSES:
        raise ValueError(
            f"attempt {case_id!r}#{index}: status {status!r} is not one of {ATTEMPT_STATUSES}"
        )


def attempt_key(record: Mapping[str, Any]) -> tuple[AttemptKey, str]:
    """The (case id, index, model) key and the status of an attempt record dict."""
    case_id = _field(record, "caseId", "case_id", "attempt")
    index = _field(record, "index", "index", "attempt")
    if isinstance(index, bool) or not isinstance(index, int):
        raise ValueError(f"attempt {case_id!r}: index must be an integer, got {index!r}")
    status = _text(_field(record, "status", "status", "attempt"))
    _check_status(case_id, index, status)
    model = record.get("model")
    return (str(case_id), index, "" if model is None else str(model)), status


@dataclass(frozen=True)
class Attempt:
    case_id: str
    index: int
    model: str
    status: str
    run_fields: dict[str, Any]
    content: str
    #: The manifest variant the attempt ran (variant sessions; the ``variant`` column).
    variant: str | None = None

    def slim(self) -> dict[str, Any]:
        return slim_fields(self.case_id, self.index, self.status, self.run_fields)

    def duration_ms(self) -> float | None:
        for name in ("durationMs", "duration_ms"):
            value = self.run_fields.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return value
        return None


def content_columns(content: str) -> tuple[str | None, int | None, float | None]:
    """``(error kind, total tokens, estimated cost)`` of an attempt's content JSON: the row's
    columns, and the cost the counters add up (:mod:`goldeval.store.counters`)."""
    value = json.loads(content) if content else {}
    if not isinstance(value, dict):
        return None, None, None
    kind = value.get("errorKind", value.get("error_kind"))
    tokens = value.get("tokens")
    usage = tokens if isinstance(tokens, dict) else {}
    total = usage.get("totalTokens", usage.get("total_tokens"))
    cost = usage.get("estimatedCost", usage.get("estimated_cost"))
    return (
        kind if isinstance(kind, str) else None,
        total if isinstance(total, int) and not isinstance(total, bool) else None,
        float(cost)
        if isinstance(cost, (int, float)) and not isinstance(cost, bool) and math.isfinite(cost)
        else None,
    )


def attempt_from_record(record: Mapping[str, Any]) -> Attempt:
    (case_id, index, model), status = attempt_key(record)
    run_fields, content = split_record(record)
    return Attempt(case_id, index, model, status, run_fields, json_text(content))


def case_texts(case_infos: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    return [
        (str(_field(info, "caseId", "case_id", "case")), json_text(dict(info)))
        for info in case_infos
    ]


def attempts_of_texts(rows: Iterable[AttemptText | tuple[Any, ...]]) -> list[Attempt]:
    out: list[Attempt] = []
    for row in rows:
        case_id, index, model, status, text = row[:5]
        _check_status(case_id, index, status)
        parts = split_parts(text, row[5]) if len(row) > 5 and row[5] else None
        if parts is None:
            run_fields, content = split_record(json.loads(text))
            parts = run_fields, json_text(content)
        variant = row[6] if len(row) > 6 else None
        out.append(Attempt(case_id, index, model or "", status, *parts, variant=variant))
    return out
