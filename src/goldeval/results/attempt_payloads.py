"""What travels on a test report for one attempt, and what the controller keeps of it.

An attempt leaves the worker as :func:`attempt_payload` (plain data: xdist sends it as is) and
is folded by the run collector (goldeval.results.run_document) as an :class:`AttemptEntry`,
its record as one compact JSON string. The store takes the raw model text out
(:func:`without_raw_text`). In a variant session the payload also carries a short excerpt of
the answer (:data:`EXCERPT_CHARS`) for the rows × variants matrix, kept beside the record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

from goldeval.core.limits import default
from goldeval.core.record_text import content_offset
from goldeval.results.rollup import RAW_FIELDS

_COMPACT = (",", ":")

#: Characters of an answer a variant session keeps per attempt for the matrix and the
#: side-by-side answers (the ``answer_excerpt_chars`` limit).
EXCERPT_CHARS = int(default("answer_excerpt_chars"))


@dataclass(frozen=True)
class AttemptEntry:
    case_id: str
    index: int
    model: str | None
    status: str
    #: the record as compact JSON
    text: str
    #: The manifest variant the attempt ran (None outside variant sessions).
    variant: str | None = None

    @property
    def key(self) -> str | None:
        """The run the attempt belongs to: its variant's, else its model's."""
        return self.variant if self.variant is not None else self.model


def attempt_payload(
    record: Any, keep_passing_output: bool, variant: str | None = None, excerpt: bool = True
) -> dict[str, Any]:
    """What travels on a test report for one attempt: its key and the record as one compact
    JSON string (without the answer text of a passing attempt unless it is kept).

    One string rather than the nested record: xdist (execnet) serialises report attributes
    value by value, and sending a nested record cost more than running the item. The string
    puts the run fields first and ``contentAt`` says where the content begins
    (goldeval.core.record_text), so the store takes the two apart without a parse.
    """
    status = record.status.value
    if status == "PASS" and not keep_passing_output and record.output is not None:
        # Left out by setting it aside: pydantic's ``exclude`` cost as much as the dump.
        output, record.output = record.output, None
        try:
            text = record.model_dump_json(by_alias=True, exclude_none=True)
        finally:
            record.output = output
    else:
        text = record.model_dump_json(by_alias=True, exclude_none=True)
    # Where the run fields end (AttemptRecord declares them first); 0 (the store parses the
    # record) should this spelling of them ever differ from pydantic's.
    run = f'{{"caseId":{encode_basestring(record.case_id)},"index":{record.index}'
    run += f',"status":"{status}"'
    if record.model is not None:
        run += f',"model":{encode_basestring(record.model)}'
    if record.duration_ms is not None:
        run += f',"durationMs":{record.duration_ms}'
    if record.tries is not None:
        run += f',"tries":{record.tries}'
    at = content_offset(text, run + "}")
    payload = {
        "caseId": record.case_id,
        "index": record.index,
        "model": record.model,
        "status": status,
        "record": text,
        "contentAt": at,
    }
    if variant is not None:
        payload["variant"] = variant
        if record.output and excerpt:  # not with --golden-artifacts=never: no answer text
            payload["excerpt"] = record.output[:EXCERPT_CHARS]
    return payload


def attempt_entry(payload: dict[str, Any], keep_passing_output: bool = True) -> AttemptEntry:
    text = payload.get("record")
    if isinstance(text, str):
        return AttemptEntry(
            payload["caseId"],
            int(payload["index"]),
            payload.get("model"),
            payload["status"],
            text,
            payload.get("variant"),
        )
    attempt = payload["attempt"]
    if not keep_passing_output and attempt.get("status") == "PASS":
        attempt = {k: v for k, v in attempt.items() if k != "output"}
    return AttemptEntry(
        attempt["caseId"],
        int(attempt["index"]),
        attempt.get("model"),
        str(attempt.get("status")),
        json.dumps(attempt, ensure_ascii=False, separators=_COMPACT),
        payload.get("variant"),
    )


#: The raw fields as they appear in a record's JSON (a match may be a false alarm: a value).
_RAW_KEYS = tuple(f'"{name}"' for name in RAW_FIELDS)


def has_raw_text(text: str) -> bool:
    """Whether a record's JSON may hold raw model text (``False``: it certainly does not)."""
    return any(key in text for key in _RAW_KEYS)


def without_raw_text(text: str) -> str:
    """The record JSON without the raw model text (the store never holds it)."""
    if not has_raw_text(text):
        return text  # the usual case: nothing to drop, no parse
    record = json.loads(text)
    for name in RAW_FIELDS:
        record.pop(name, None)
    return json.dumps(record, ensure_ascii=False, separators=_COMPACT)
