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
from collections.abc import Iterable, Sequence
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
    """A run fields text without a line break (the store writes compact JSON, which has
    none; anything else is re-encoded compactly, the same value)."""
    if "\n" not in fields and "\r" not in fields:
        return fields
    return json.dumps(json.loads(fields), ensure_ascii=False, separators=(",", ":"))


def _chunk_body(timings: Sequence[Timing]) -> bytes:
    """A chunk: one JSON line of ``[case, index, model, duration]`` per attempt, then each
    attempt's fields text on a line of its own: reading a chunk splits lines and decodes only
    the short keys (decoding the fields as escaped JSON strings cost as much as the page)."""
    keys = json.dumps(
        [[c, i, m, d] for c, i, m, d, _f in timings], ensure_ascii=False, separators=(",", ":")
    )
    text = "\n".join([keys, *(_one_line(t[4]) for t in timings)])
    return zlib.compress(text.encode("utf-8"), 6)


def _chunk_timings(body: Any) -> dict[AttemptKey, tuple[Any, str]]:
    raw = bytes(body) if not isinstance(body, bytes) else body
    lines = zlib.decompress(raw).decode("utf-8").split("\n")
    return {
        (c, i, m): (d, f) for (c, i, m, d), f in zip(json.loads(lines[0]), lines[1:], strict=True)
    }


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
        for (body,) in tx.query(
            "SELECT body FROM run_timings WHERE run_id = ?" + _KEY_ORDER, (run_id,)
        ):
            out.update(_chunk_timings(body))
        return out

    @staticmethod
    def _own_fields(
        tx: Tx, run_id: str, keys: Iterable[AttemptKey]
    ) -> dict[AttemptKey, tuple[Any, str]]:
        """The duration and fields of the attempts ``keys`` of sharing run ``run_id``.

        One query reads the chunks from the one holding the first key to the last key, at
        most one more than there are keys (a page of consecutive attempts: one or two
        chunks; a filtered page whose rows lie close together: the few chunks between);
        keys it did not reach (a sparse filter) get their chunk each, one indexed lookup.
        O(page), whatever the run's size."""
        wanted = sorted(set(keys))
        if not wanted:
            return {}
        out: dict[AttemptKey, tuple[Any, str]] = {}
        first, last = wanted[0], wanted[-1]
        for (body,) in tx.query(_CHUNKS_FROM, (run_id, run_id, *first, *last, len(wanted) + 1)):
            out.update(_chunk_timings(body))
        for key in wanted:
            if key not in out:
                for (body,) in tx.query(_CHUNK_OF, (run_id, *key)):
                    out.update(_chunk_timings(body))
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
