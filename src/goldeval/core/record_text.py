"""The JSON text of an attempt record, laid out so its run fields and its content split apart
without a parse.

An attempt record has fields that belong to one run (its key, status, duration, tries) and
a content that is the same in every run of the same answers (the grading). The store keeps
the content once and the run fields per run (goldeval.store.pages), so it needs the two
apart. Parsing every record on the controller only to split it and encode its content again
was a third of the store's cost per attempt (docs/performance.md). So the record travels as
one compact JSON object whose run fields come first (AttemptRecord declares them first), with
the offset where the content's fields begin: ``text[:at - 1] + "}"`` is the run fields'
object and ``"{" + text[at:]`` the content's, each exactly as it was encoded.

A pure module: no pydantic, no pytest.
"""

from __future__ import annotations

import json
from typing import Any

#: Record fields kept per run (in the store's page), not in the shared content: the attempt's
#: key, its status and the values that differ between two runs of the same answers. Both
#: spellings: records come as run.json (camelCase) and as Python dicts (snake_case).
RUN_FIELDS = frozenset(
    {"caseId", "case_id", "index", "model", "status", "durationMs", "duration_ms", "tries"}
)


def content_offset(text: str, run_json: str) -> int:
    """Where the content begins in the record ``text`` when it starts with the run fields
    ``run_json`` (their compact JSON object, in the record's order); 0 when it does not."""
    n = len(run_json)
    if n > 2 and run_json[0] == "{" and run_json[-1] == "}" and text.startswith(run_json[:-1]):
        if len(text) == n and text[-1] == "}":
            return n  # no content
        if len(text) > n and text[n - 1] == ",":
            return n
    return 0


def split_parts(text: str, at: int) -> tuple[dict[str, Any], str] | None:
    """``(run fields, content JSON)`` of a record text whose content begins at ``at``
    (:func:`content_offset`); ``None`` when ``text`` and ``at`` are not such a pair (the
    caller parses the whole record)."""
    if at == len(text) and text.endswith("}"):
        head, content = text, "{}"
    elif 2 < at < len(text) and text[at - 1] == "," and text[at] == '"':
        head, content = text[: at - 1] + "}", "{" + text[at:]
    else:
        return None
    try:
        run = json.loads(head)
    except ValueError:
        return None
    # Only run fields before the offset: anything else would be dropped from the content.
    if not isinstance(run, dict) or not run or not RUN_FIELDS.issuperset(run):
        return None
    return run, content
