"""Deduplicated storage of a run's cases and attempts: content-addressed texts.

Ten runs of the same dataset in fixture mode used to store every case text and every graded
record ten times. Since schema version 5 the store keeps:

* ``contents``: each distinct JSON text once, keyed by its SHA-256 (a case's info — so case
  texts are stored once per dataset version — and an attempt's record minus the fields that
  change from run to run);
* since schema 8, one narrow row per attempt (``attempts``: key, status, error kind,
  duration, tokens, content id and the slimmed run fields of :func:`slim_fields`) and per
  case of a run (``run_cases``), indexed for keyset paging and SQL over runs; schemas 5 and
  6 kept them in ``run_pages``, compressed pages of entries ``[case id, content id]`` and
  ``[case id, index, model, status, content id, run fields]`` (a later attempt entry
  replacing an earlier one), which migration 8 moves into rows (:func:`decode_page`);
* in ``runs.summary``, values longer than :data:`BIG_VALUE` (the run document's selected case
  ids) are stand-ins ``{"$goldevalContent": sha256}`` for a content.

A pure module: no database, no pytest; :mod:`goldeval.store.base` does the SQL.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from goldeval.core.record_text import RUN_FIELDS

CASE = "case"
ATTEMPT = "attempt"
PAGE_KINDS = (CASE, ATTEMPT)


_COMPACT = (",", ":")


def digest(text: str) -> bytes:
    """The content key of a JSON text: its SHA-256 (32 raw bytes)."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def split_record(record: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(run fields, content)`` of an attempt record dict; ``{**run, **content}`` is equal
    to the record."""
    run: dict[str, Any] = {}
    content: dict[str, Any] = {}
    for key, value in record.items():
        (run if key in RUN_FIELDS else content)[key] = value
    return run, content


def join_record(run_fields: Mapping[str, Any], content: Mapping[str, Any]) -> dict[str, Any]:
    """The record ``split_record`` split (key order: the key fields first)."""
    out = dict(run_fields)
    out.update(content)
    return out


def slim_fields(case_id: str, index: int, status: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` without the ``caseId``, ``index`` and ``status`` the page entry holds
    anyway (only when equal, so :func:`full_fields` gives ``fields`` back exactly)."""
    out = dict(fields)
    if "case_id" not in out and out.get("caseId") == case_id and type(out["caseId"]) is str:
        del out["caseId"]
    if out.get("index") == index and type(out["index"]) is int:
        del out["index"]
    if out.get("status") == status and type(out["status"]) is str:
        del out["status"]
    return out


def full_fields(case_id: str, index: int, status: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The run fields :func:`slim_fields` slimmed (key fields first)."""
    out: dict[str, Any] = {}
    if "caseId" not in fields and "case_id" not in fields:
        out["caseId"] = case_id
    if "index" not in fields:
        out["index"] = index
    if "status" not in fields:
        out["status"] = status
    out.update(fields)
    return out


def encode_page(entries: Iterable[Any]) -> bytes:
    """A page body: the entries as compact JSON, zlib-compressed."""
    text = json.dumps(list(entries), ensure_ascii=False, separators=_COMPACT)
    return zlib.compress(text.encode("utf-8"), 6)


def decode_page(body: Any) -> list[Any]:
    """The entries of a page body (``bytes``, or a driver's ``memoryview``)."""
    raw = bytes(body)
    value = json.loads(zlib.decompress(raw).decode("utf-8"))
    if not isinstance(value, list):
        raise ValueError("a run page is not a JSON list")
    return value


def key_string(case_id: str, index: int, model: str) -> str:
    """One compact string per attempt key (the writer's in-memory index holds 100,000s)."""
    return f"{case_id}\x1f{index}\x1f{model}"


# --------------------------------------------------------------------------- run summaries

#: Key of a stand-in for a large value of a run's summary stored as a content:
#: ``{"$goldevalContent": "<sha256 hex>"}``.
MARK = "$goldevalContent"
#: Values of a summary whose JSON is longer than this are stored as contents. A run's
#: summary holds its run document, whose protocol lists every selected case id: 150 KB at
#: 10,000 rows, the same in every run of the dataset.
BIG_VALUE = 2048


def externalise(value: Any, texts: dict[bytes, str], *, root: bool = True) -> Any:
    """``value`` with each large list or object (children first, never the root) replaced by
    a :data:`MARK` stand-in; the replaced JSON texts are added to ``texts`` by digest."""
    if isinstance(value, dict):
        value = {k: externalise(v, texts, root=False) for k, v in value.items()}
    elif not isinstance(value, list):
        return value
    if root:
        return value
    text = json.dumps(value, ensure_ascii=False, separators=_COMPACT, allow_nan=False)
    if len(text) <= BIG_VALUE:
        return value
    key = digest(text)
    texts[key] = text
    return {MARK: key.hex()}


def marks(value: Any) -> set[str]:
    """The digests (hex) of every stand-in in ``value``."""
    found: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            if len(v) == 1 and isinstance(v.get(MARK), str):
                found.add(v[MARK])
                return
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(value)
    return found


def expand(value: Any, texts: Mapping[str, str]) -> Any:
    """``value`` with every stand-in replaced by its stored value (``texts``: hex -> JSON)."""
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get(MARK), str):
            return expand(json.loads(texts[value[MARK]]), texts)
        return {k: expand(v, texts) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v, texts) for v in value]
    return value
