"""Repeated runs share their rows (schema 13): a run whose outcomes repeat an earlier run's
keeps only what differs, its timings.

Ten fixture runs of one dataset wrote ten copies of the same attempt rows (the same statuses,
tokens and contents; only durations differ): 6× the size of one run for 10 runs, where the
store is meant to be a history kept for months. When a run finishes COMPLETED, its rows are
compared with the rows of the latest other COMPLETED run of the same dataset (id and hash);
if every attempt (key, status, error kind, tokens, content, variant) and every case (id,
content) is the same, the run's durations and run fields go into ``run_timings`` as
zlib-compressed chunks of :data:`CHUNK_ROWS` attempts in key order, its own rows are deleted
and ``runs.rows_of`` names the run whose rows it reads (the *owner*).

Invariants, each kept by one function here:

- a shared row never changes under a run that did not write it: any write of attempts or
  cases to an owner or a sharing run first gives every run involved its own rows again
  (:meth:`RunSharing._unshare`, called by the run writer lock of ``run_writes``);
- deleting an owner hands its rows to the oldest run that shares them (:meth:`_hand_over`);
- reads of a sharing run page the owner's rows with the same SQL and put the run's own
  duration and fields back by key (:meth:`_own_fields`): at most one chunk per row of a
  page, so a page stays O(page).

``run_attempts`` (a view) gives every run's attempts as rows for SQL over runs.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from typing import Any

from goldeval.store.rows import AttemptKey
from goldeval.store.sql import INSERT_ATTEMPT, SqlCore, Tx

#: Attempts per ``run_timings`` chunk: a page of 50 rows decompresses one or two of them,
#: each small enough that decoding it costs about what fetching the page's rows does.
CHUNK_ROWS = 64

#: One attempt's own values in a chunk: (case, index, model, duration_ms, fields text).
Timing = tuple[str, int, str, Any, str]

_SAME_ATTEMPTS = (
    "SELECT COUNT(*) FROM attempts s JOIN attempts o ON o.run_id = ?"
    " AND o.case_id = s.case_id AND o.attempt_index = s.attempt_index AND o.model = s.model"
    " WHERE s.run_id = ? AND o.status = s.status AND o.content_id = s.content_id"
    " AND COALESCE(o.error_kind, '') = COALESCE(s.error_kind, '')"
    " AND COALESCE(o.tokens, -1) = COALESCE(s.tokens, -1)"
    " AND COALESCE(o.variant, '') = COALESCE(s.variant, '')"
)
_SAME_CASES = (
    "SELECT COUNT(*) FROM run_cases s JOIN run_cases o ON o.run_id = ?"
    " AND o.case_id = s.case_id AND o.content_id = s.content_id WHERE s.run_id = ?"
)
_KEY_ORDER = " ORDER BY case_id, attempt_index, model"
_ALL_CHUNKS = "SELECT body FROM run_timings WHERE run_id = ?" + _KEY_ORDER
#: The chunk of ``run_timings`` that holds an attempt key: the last one starting at or before.
_CHUNK_OF = (
    "SELECT body FROM run_timings WHERE run_id = ?"
    " AND (case_id, attempt_index, model) <= (?, ?, ?)"
    " ORDER BY case_id DESC, attempt_index DESC, model DESC LIMIT 1"
)
#: The chunks from the one holding a first key up to a last key (at most ``LIMIT``).
_CHUNKS_FROM = (
    "SELECT body FROM run_timings WHERE run_id = ?"
    " AND (case_id, attempt_index, model) >= ("
    "SELECT case_id, attempt_index, model FROM run_timings WHERE run_id = ?"
    " AND (case_id, attempt_index, model) <= (?, ?, ?)"
    " ORDER BY case_id DESC, attempt_index DESC, model DESC LIMIT 1)"
    " AND (case_id, attempt_index, model) <= (?, ?, ?)"
    " ORDER BY case_id, attempt_index, model LIMIT ?"
)


def _count(tx: Tx, sql: str, params: Sequence[Any]) -> int:
    return int(tx.query(sql, params)[0][0])


def _one_line(fields: str) -> str:
    """A run fields text without a line break or record separator (the store writes compact
    JSON, which has neither: JSON escapes control characters in strings; anything else is
    re-encoded compactly, the same value; ``strict=False`` reads a raw control character in
    a string, which the re-encoding escapes)."""
    if "\n" not in fields and "\r" not in fields and _SECTION not in fields:
        return fields
    value = json.loads(fields, strict=False)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


#: A chunk body in the current format starts with this byte (a zlib stream never does: its
#: first byte is 0x78); anything else is the first format (keys as one JSON line).
_FORMAT_2 = b"\x02"
#: Separates a chunk's three sections: keys, durations, fields (each one line per attempt).
_SECTION = "\x1e"


def key_text(case_id: str, index: int, model: str) -> str:
    """An attempt key as one line of text, different for different keys: the parts joined
    by U+001F, or (a case id or model holding U+001F, a line break or U+001E) the key as
    JSON, whose strings escape those characters, so it holds no U+001F at all."""
    text = f"{case_id}\x1f{index}\x1f{model}"
    if text.count("\x1f") == 2 and "\n" not in text and _SECTION not in text:
        return text
    return json.dumps([case_id, index, model])


def key_texts(keys: Sequence[Sequence[Any]]) -> list[str]:
    """:func:`key_text` of each key (columns 0-2 of each row), checked once for the whole
    list (a page's keys: the check per key cost as much as the page's other work)."""
    texts = [f"{c}\x1f{i}\x1f{m}" for c, i, m, *_rest in keys]
    joined = "\n".join(texts)
    if (
        joined.count("\x1f") == 2 * len(texts)
        and joined.count("\n") == len(texts) - 1
        and _SECTION not in joined
    ):
        return texts
    return [key_text(str(k[0]), int(k[1]), str(k[2])) for k in keys]


def _chunk_body(timings: Sequence[Timing]) -> bytes:
    """A chunk: the attempts' key texts (:func:`key_text`), one per line, then their
    durations as JSON, then their fields texts, the sections separated by U+001E. A page
    splits lines and looks its rows up by key text: nothing is decoded as JSON (decoding
    the keys as JSON cost as much as fetching the page)."""
    sections = (
        "\n".join(key_text(c, i, m) for c, i, m, _d, _f in timings),
        "\n".join(json.dumps(t[3]) for t in timings),
        "\n".join(_one_line(t[4]) for t in timings),
    )
    return _FORMAT_2 + zlib.compress(_SECTION.join(sections).encode("utf-8"), 6)


def _chunk_fields(body: Any) -> dict[str, str]:
    """A chunk's fields texts by key text (what a page needs)."""
    raw = bytes(body) if not isinstance(body, bytes) else body
    if raw[:1] != _FORMAT_2:
        return {key_text(*key): f for key, (_d, f) in _chunk_timings(raw).items()}
    keys, _durations, fields = zlib.decompress(raw[1:]).decode("utf-8").split(_SECTION)
    return dict(zip(keys.split("\n"), fields.split("\n"), strict=True))


def _chunk_timings(body: Any) -> dict[AttemptKey, tuple[Any, str]]:
    """A chunk's durations and fields texts by key (what giving a run its rows back needs)."""
    raw = bytes(body) if not isinstance(body, bytes) else body
    if raw[:1] == _FORMAT_2:
        keys, durations, fields = zlib.decompress(raw[1:]).decode("utf-8").split(_SECTION)
        return {
            _key_of(k): (json.loads(d), f)
            for k, d, f in zip(
                keys.split("\n"), durations.split("\n"), fields.split("\n"), strict=True
            )
        }
    lines = zlib.decompress(raw).decode("utf-8").split("\n")
    return {
        (c, i, m): (d, f) for (c, i, m, d), f in zip(json.loads(lines[0]), lines[1:], strict=True)
    }


def _key_of(text: str) -> AttemptKey:
    if text.count("\x1f") == 2:
        case_id, index, model = text.split("\x1f")
        return (case_id, int(index), model)
    case_id, index, model = json.loads(text)
    return (str(case_id), int(index), str(model))


class RunSharing(SqlCore):
    """Sharing rows between runs that repeat each other (see the module's docstring)."""

    @staticmethod
    def _owner_of(tx: Tx, run_id: str) -> str | None:
        """The run whose rows ``run_id`` reads; None: its own (or no such run)."""
        rows = tx.query("SELECT rows_of FROM runs WHERE run_id = ?", (run_id,))
        return str(rows[0][0]) if rows and rows[0][0] is not None else None

    # ------------------------------------------------------------------ sharing at finish

    def _share_if_repeat(self, tx: Tx, run_id: str) -> str | None:
        """Make the just-finished ``run_id`` share an earlier run's rows when it repeats them
        exactly; returns the owner, or None when its rows stay its own."""
        row = tx.query(
            "SELECT dataset_id, dataset_hash, rows_of FROM runs WHERE run_id = ?", (run_id,)
        )
        if not row or row[0][2] is not None:
            return None
        if tx.query("SELECT 1 FROM runs WHERE rows_of = ? LIMIT 1", (run_id,)):
            return None  # others read its rows: it keeps them
        dataset_id, dataset_hash = row[0][0], row[0][1]
        latest = tx.query(
            "SELECT COALESCE(rows_of, run_id) FROM runs WHERE dataset_id = ?"
            " AND dataset_hash = ? AND run_id <> ? AND status = 'COMPLETED'"
            " AND finished_at IS NOT NULL ORDER BY finished_at DESC, run_id DESC LIMIT 1",
            (dataset_id, dataset_hash, run_id),
        )
        if not latest or str(latest[0][0]) == run_id:
            return None
        owner = str(latest[0][0])
        # The owner's row lock, not waited for: a write to it (a resume) in progress means
        # its rows may change, so this run keeps its own (never a lock cycle between two
        # runs finishing at once). Held, a later writer of the owner finds this run among
        # its sharers. SQLite's writers are serialised already.
        if self.backend == "postgresql" and not tx.query(
            "SELECT 1 FROM runs WHERE run_id = ? FOR UPDATE SKIP LOCKED", (owner,)
        ):
            return None
        if not self._same_rows(tx, run_id, owner):
            return None
        own = tx.query(
            "SELECT case_id, attempt_index, model, duration_ms, fields FROM attempts"
            " WHERE run_id = ?" + _KEY_ORDER,
            (run_id,),
        )
        self._write_timings(
            tx, run_id, [(str(c), int(i), str(m), d, str(f)) for c, i, m, d, f in own]
        )
        tx.execute("DELETE FROM attempts WHERE run_id = ?", (run_id,))
        tx.execute("DELETE FROM run_cases WHERE run_id = ?", (run_id,))
        tx.execute("UPDATE runs SET rows_of = ? WHERE run_id = ?", (owner, run_id))
        return owner

    @staticmethod
    def _same_rows(tx: Tx, run_id: str, owner: str) -> bool:
        """Every attempt and case of ``run_id`` is the owner's, and nothing more."""
        attempts = _count(tx, "SELECT COUNT(*) FROM attempts WHERE run_id = ?", (run_id,))
        if attempts == 0:
            return False
        if attempts != _count(tx, "SELECT COUNT(*) FROM attempts WHERE run_id = ?", (owner,)):
            return False
        cases = _count(tx, "SELECT COUNT(*) FROM run_cases WHERE run_id = ?", (run_id,))
        if cases != _count(tx, "SELECT COUNT(*) FROM run_cases WHERE run_id = ?", (owner,)):
            return False
        return (
            _count(tx, _SAME_ATTEMPTS, (owner, run_id)) == attempts
            and _count(tx, _SAME_CASES, (owner, run_id)) == cases
        )

    @staticmethod
    def _write_timings(tx: Tx, run_id: str, timings: Sequence[Timing]) -> None:
        rows = [
            (run_id, *timings[i][:3], _chunk_body(timings[i : i + CHUNK_ROWS]))
            for i in range(0, len(timings), CHUNK_ROWS)
        ]
        if rows:
            tx.executemany(
                "INSERT INTO run_timings (run_id, case_id, attempt_index, model, body)"
                " VALUES (?, ?, ?, ?, ?)",
                rows,
            )

    # ------------------------------------------------------------------ reads

    @staticmethod
    def _all_timings(tx: Tx, run_id: str) -> dict[AttemptKey, tuple[Any, str]]:
        out: dict[AttemptKey, tuple[Any, str]] = {}
        for (body,) in tx.query(_ALL_CHUNKS, (run_id,)):
            out.update(_chunk_timings(body))
        return out

    @staticmethod
    def _all_fields(tx: Tx, run_id: str) -> dict[str, str]:
        """Every fields text of sharing run ``run_id``, by :func:`key_text`."""
        out: dict[str, str] = {}
        for (body,) in tx.query(_ALL_CHUNKS, (run_id,)):
            out.update(_chunk_fields(body))
        return out

    @staticmethod
    def _own_fields(
        tx: Tx, run_id: str, rows: Sequence[Sequence[Any]], texts: Sequence[str]
    ) -> dict[str, str]:
        """The fields texts (by :func:`key_text`) of the page ``rows`` (key in columns 0-2,
        in key order; ``texts`` their key texts) of sharing run ``run_id``.

        One query reads the chunks from the one holding the first key to the last key, at
        most one more than there are rows (a page of consecutive attempts: one or two
        chunks; a filtered page whose rows lie close together: the few chunks between);
        rows it did not reach (a sparse filter) get their chunk each, one indexed lookup.
        O(page), whatever the run's size."""
        if not rows:
            return {}
        out: dict[str, str] = {}
        first, last = rows[0][:3], rows[-1][:3]
        for (body,) in tx.query(_CHUNKS_FROM, (run_id, run_id, *first, *last, len(rows) + 1)):
            out.update(_chunk_fields(body))
        for text, row in zip(texts, rows, strict=True):
            if text not in out:
                for (body,) in tx.query(_CHUNK_OF, (run_id, *row[:3])):
                    out.update(_chunk_fields(body))
        return out

    # ------------------------------------------------------------------ giving rows back

    def _unshare(self, tx: Tx, run_id: str) -> None:
        """Before a write of ``run_id``'s attempts or cases: it, and every run reading its
        rows, get rows of their own (a shared row never changes under a run that did not
        write it). A no-op, one indexed query, for a run that shares nothing."""
        owner = self._owner_of(tx, run_id)
        if owner is not None:
            self._materialise(tx, run_id, owner)
            return
        # PostgreSQL: the sharers' row locks, after the owner's (always that order, so no
        # cycle): a sharer being written at the same time gets its rows back itself, and
        # once its writer commits it no longer matches (rows_of is re-checked after the
        # wait), so the rows are never copied twice.
        lock = " ORDER BY run_id FOR UPDATE" if self.backend == "postgresql" else ""
        for (sharer,) in tx.query("SELECT run_id FROM runs WHERE rows_of = ?" + lock, (run_id,)):
            self._materialise(tx, str(sharer), run_id)

    def _hand_over(self, tx: Tx, run_id: str, leaving: set[str]) -> None:
        """Before ``run_id`` is deleted: the oldest run reading its rows (not deleted with
        it) gets them, and the others read that run's rows from now on."""
        sharers = [
            str(r)
            for (r,) in tx.query(
                "SELECT run_id FROM runs WHERE rows_of = ? ORDER BY started_at, run_id",
                (run_id,),
            )
            if str(r) not in leaving
        ]
        if not sharers:
            return
        heir = sharers[0]
        self._materialise(tx, heir, run_id)
        tx.execute("UPDATE runs SET rows_of = ? WHERE rows_of = ?", (heir, run_id))

    def _materialise(self, tx: Tx, sharer: str, owner: str) -> None:
        """``sharer`` gets its own copy of ``owner``'s rows, with its own timings."""
        timings = self._all_timings(tx, sharer)
        rows = tx.query(
            "SELECT case_id, attempt_index, model, status, error_kind, duration_ms, tokens,"
            " content_id, fields, variant FROM attempts WHERE run_id = ?",
            (owner,),
        )
        copies = []
        for c, i, m, st, kind, duration, tokens, content_id, fields, variant in rows:
            duration, fields = timings.get((str(c), int(i), str(m)), (duration, fields))
            copies.append(
                (sharer, c, i, m, st, kind, duration, tokens, content_id, fields, variant)
            )
        if copies:
            tx.executemany(INSERT_ATTEMPT, copies)
        tx.execute(
            "INSERT INTO run_cases (run_id, case_id, content_id)"
            " SELECT ?, case_id, content_id FROM run_cases WHERE run_id = ?",
            (sharer, owner),
        )
        tx.execute("DELETE FROM run_timings WHERE run_id = ?", (sharer,))
        tx.execute("UPDATE runs SET rows_of = NULL WHERE run_id = ?", (sharer,))
