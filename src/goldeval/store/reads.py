"""Reads of the SQL store: runs listed or found (their summaries' stored values put back),
attempts whole or by page, counts, cases and artifacts. A mixin over
:class:`~goldeval.store.sql.SqlCore` (see there for why the store is split this way)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any, cast

from goldeval.store import counters
from goldeval.store.encoding import json_value, pass_rate
from goldeval.store.migrations import ATTEMPT_STATUSES
from goldeval.store.pages import expand, full_fields, join_record
from goldeval.store.rows import (
    RUN_COLUMNS,
    ArtifactRow,
    AttemptJson,
    AttemptKey,
    RunColumns,
    RunRow,
)
from goldeval.store.sharing import RunSharing, key_texts
from goldeval.store.sql import Tx, statuses_by_key

#: The columns :meth:`RunReads.records_of` turns back into records, and the join they need
#: (``a``: attempts, ``c``: its content): one query per page, no second round trip.
ATTEMPT_ROW_COLUMNS = "a.case_id, a.attempt_index, a.model, a.status, a.fields, c.body, a.variant"
ATTEMPT_ROW_JOIN = "attempts a JOIN contents c ON c.id = a.content_id"
#: The run id a run's attempts and cases are stored under: its own, or the run whose rows it
#: shares (:mod:`goldeval.store.sharing`), in the same statement as the read (one snapshot).
RUN_ROWS = "(SELECT COALESCE(rows_of, run_id) FROM runs WHERE run_id = ?)"


def _page_sql(by_status: bool, after: bool) -> str:
    """A page's SQL: its rows, each with the run's ``rows_of`` (the same value on every row,
    computed once: whether its own timings are to be put back, without a round trip)."""
    where = [f"a.run_id = {RUN_ROWS}"]
    if by_status:
        where.append("a.status = ?")
    if after:
        where.append("(a.case_id, a.attempt_index, a.model) > (?, ?, ?)")
    return (
        f"SELECT {ATTEMPT_ROW_COLUMNS}, (SELECT rows_of FROM runs WHERE run_id = ?)"
        f" FROM {ATTEMPT_ROW_JOIN} WHERE {' AND '.join(where)}"
        " ORDER BY a.case_id, a.attempt_index, a.model LIMIT ?"
    )


#: Every attempt of a run, then its ``rows_of`` (as a page, :func:`_page_sql`).
_ALL_ROWS = (
    "SELECT case_id, attempt_index, model, status, fields, content_id, variant,"
    " (SELECT rows_of FROM runs WHERE run_id = ?)"
    f" FROM attempts WHERE run_id = {RUN_ROWS} ORDER BY case_id, attempt_index, model"
)

#: Statuses as JSON strings (a page quotes one per row).
_QUOTED_STATUS = {s: encode_basestring(s) for s in ATTEMPT_STATUSES}

#: A results page's SQL by (filtered by status, after a cursor): built once, not per page.
_PAGE_SQL = {(s, a): _page_sql(s, a) for s in (False, True) for a in (False, True)}


def record_json(
    case_id: Any, index: Any, status: Any, fields: Any, body: Any, variant: Any = None
) -> str:
    """The record :func:`join_record` gives, as JSON text, without decoding anything: the
    key fields, then the stored run ``fields`` and content spliced in as they are. Where
    :func:`full_fields` lets the stored fields' ``caseId``/``index``/``status`` win, and
    :func:`join_record` the content's keys, the spliced text repeats the key later, and a
    later duplicate wins in JSON: the same record. A variant session's record ends with its
    ``variant`` (:func:`with_variant`)."""
    fields = fields if isinstance(fields, str) else bytes(fields).decode("utf-8")
    content = (body if isinstance(body, str) else bytes(body).decode("utf-8")).strip()
    if not (content.startswith("{") and content.endswith("}")):
        # Not an object (a damaged store): decoded and joined, never spliced into bad JSON.
        record = join_record(
            full_fields(str(case_id), int(index), str(status), json.loads(fields)),
            {"content": json.loads(content)},
        )
        return json.dumps(with_variant(record, variant), ensure_ascii=False)
    if '"case_id"' in fields:  # a snake_case record: full_fields adds no caseId to it
        decoded = full_fields(str(case_id), int(index), str(status), json.loads(fields))
        fields, head = json.dumps(decoded, ensure_ascii=False), []
    else:
        head = [
            f'{{"caseId":{encode_basestring(str(case_id))},"index":{int(index)},'
            f'"status":{encode_basestring(str(status))}'
        ]
    parts = head or ["{"]
    for text in (fields, body):
        inner = (text if isinstance(text, str) else bytes(text).decode("utf-8")).strip()
        inner = inner[1:-1].strip()
        if inner:
            parts.append(inner)
    if variant is not None:
        parts.append(f'"variant":{encode_basestring(str(variant))}')
    if not head:  # "{" then the parts: no comma right after the brace
        return "{" + ",".join(parts[1:]) + "}"
    return ",".join(parts) + "}"


def _variant_attempt_json(
    case_id: Any, index: Any, model: Any, status: Any, fields: Any, body: Any, variant: Any
) -> AttemptJson:
    """A variant session's page row: its model column is the variant's name, the record's
    model is in its stored fields."""
    named = json.loads(fields).get("model")
    return AttemptJson(
        str(case_id),
        int(index),
        str(model),
        str(status),
        str(variant),
        named if isinstance(named, str) else None,
        record_json(case_id, index, status, fields, body, variant),
    )


def with_variant(record: dict[str, Any], variant: Any) -> dict[str, Any]:
    """A stored attempt record with its ``variant`` column (variant sessions only: the
    record itself names the model it asked, the column the variant it ran)."""
    if variant is not None:
        record["variant"] = str(variant)
    return record


class RunReads(RunSharing):
    """Everything that reads a run back."""

    def _run_rows(self, tx: Tx, rows: list[RunColumns]) -> list[RunRow]:
        """Rows as :class:`RunRow`, their summaries' stored values put back in place."""
        summaries = [json_value(r.summary) if r.summary is not None else None for r in rows]
        texts = self._stand_in_texts(tx, summaries)
        return [
            self._run_row(r, expand(s, texts) if texts else s)
            for r, s in zip(rows, summaries, strict=True)
        ]

    def _run_row(self, row: RunColumns, summary: Any) -> RunRow:
        return RunRow(
            **self.run_identity(row),
            finished_at=self.ts_value(row.finished_at) if row.finished_at is not None else None,
            pass_rate=pass_rate(summary),
            summary=cast("dict[str, Any] | None", summary),
        )

    @staticmethod
    def records_of(rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
        """Attempt records of rows selected as :data:`ATTEMPT_ROW_COLUMNS` from
        :data:`ATTEMPT_ROW_JOIN`: run fields and content joined back (also for callers
        reading attempts with their own SQL: the service's queue)."""
        return [
            with_variant(
                join_record(
                    full_fields(str(c), int(i), str(st), json.loads(fields)), json.loads(body)
                ),
                variant,
            )
            for c, i, _m, st, fields, body, variant in rows
        ]

    def graded_keys(self, run_id: str, *, include_errors: bool) -> set[AttemptKey]:
        sql = f"SELECT case_id, attempt_index, model FROM attempts WHERE run_id = {RUN_ROWS}"
        if not include_errors:
            sql += " AND status <> 'ERROR'"
        with self._read("graded_keys") as tx:
            rows = tx.query(sql, (run_id,))
        return {(str(c), int(i), str(m)) for c, i, m in rows}

    def attempts(self, run_id: str) -> list[dict[str, Any]]:
        # Two queries, not the join: a run's attempts share few contents, each fetched once.
        with self._read("attempts") as tx:
            rows = self._with_own_timings(
                lambda: tx.query(_ALL_ROWS, (run_id, run_id)),
                lambda _rows, _texts: self._all_fields(tx, run_id),
            )
            texts = self._content_texts(tx, (int(r[5]) for r in rows))
        return [
            with_variant(
                join_record(
                    full_fields(str(c), int(i), str(st), json.loads(fields)),
                    json.loads(texts[int(content_id)]),
                ),
                variant,
            )
            for c, i, _m, st, fields, content_id, variant, *_rows_of in rows
        ]

    def attempts_page(
        self,
        run_id: str,
        *,
        limit: int,
        status: str | None = None,
        after: AttemptKey | None = None,
    ) -> list[dict[str, Any]]:
        rows = self._page_rows(run_id, limit=limit, status=status, after=after)
        return self.records_of([r[:7] for r in rows])

    def attempts_page_json(
        self,
        run_id: str,
        *,
        limit: int,
        status: str | None = None,
        after: AttemptKey | None = None,
    ) -> list[AttemptJson]:
        out: list[AttemptJson] = []
        append, quote, new = out.append, encode_basestring, tuple.__new__
        quoted = _QUOTED_STATUS
        for c, i, m, st, f, b, variant, _rows_of in self._page_rows(
            run_id, limit=limit, status=status, after=after
        ):
            if (
                variant is None
                and f[:2] == b[:2] == '{"'  # text, not bytes: a bytes slice never equals a str
                and f[-1:] == b[-1:] == "}"
                and '"case_id"' not in f
            ):
                # The common row (two non-empty compact objects, as the store writes them),
                # spliced inline: on SQLite a page's Python work per row is as much as its
                # fetch, so each call counts (tuple.__new__: AttemptJson._make without its
                # Python frame). Every other shape goes through record_json.
                text = (
                    f'{{"caseId":{quote(c)},"index":{i},'
                    f'"status":{quoted.get(st) or quote(st)},{f[1:-1]},{b[1:-1]}}}'
                )
                append(new(AttemptJson, (c, i, m, st, None, m or None, text)))
            elif variant is None:
                record = record_json(c, i, st, f, b)
                append(AttemptJson(str(c), int(i), str(m), str(st), None, m or None, record))
            else:
                append(_variant_attempt_json(c, i, m, st, f, b, variant))
        return out

    def _page_rows(
        self, run_id: str, *, limit: int, status: str | None, after: AttemptKey | None
    ) -> list[Any]:
        """The :data:`ATTEMPT_ROW_COLUMNS` of one keyset page, then the run's ``rows_of``."""
        params: list[Any] = [run_id, run_id]
        if status is not None:
            params.append(status)
        if after is not None:
            params.extend(after)
        sql = _PAGE_SQL[status is not None, after is not None]
        with self._read("attempts_page") as tx:
            return self._with_own_timings(
                lambda: tx.query(sql, (*params, max(0, int(limit)))),
                lambda rows, texts: self._own_fields(tx, run_id, rows, texts),
            )

    @staticmethod
    def _with_own_timings(
        read_rows: Callable[[], list[Any]],
        fields_of: Callable[[list[Any], list[str]], Mapping[str, str]],
    ) -> list[Any]:
        """Rows (key in columns 0-2, fields in 4, the run's ``rows_of`` in 7) of a run that
        may share another's: a sharing run's own fields put back (``fields_of``: the fields
        texts of rows given with their :func:`key_texts`). When some are missing, a resume
        gave the run its rows back between the two reads: the rows are read again (now its
        own), once."""
        for _ in range(2):
            rows = read_rows()
            if not rows or rows[0][7] is None:
                return rows
            texts = key_texts(rows)
            own = fields_of(rows, texts)
            if all(text in own for text in texts):
                break
        return [
            (c, i, m, st, own.get(text) or f, b, v, o)
            for text, (c, i, m, st, f, b, v, o) in zip(texts, rows, strict=True)
        ]

    def statuses_of(self, run_id: str, case_ids: Sequence[str]) -> dict[AttemptKey, str]:
        """The status of every stored attempt of ``case_ids`` in the run (its shared rows
        too): the primary key's ranges of those cases, whatever the run's size."""
        with self._read("statuses_of") as tx:
            return statuses_by_key(tx, RUN_ROWS, run_id, case_ids)

    def attempt_counts(self, run_id: str) -> dict[str, int]:
        """The run's attempts by status, from the counts kept as they are written
        (:func:`goldeval.store.counters.read_run`): O(1), not a count of its attempts."""
        with self._read("attempt_counts") as tx:
            return counters.read_run(tx, run_id)

    def cases(self, run_id: str) -> list[dict[str, Any]]:
        with self._read("cases") as tx:
            rows = tx.query(
                f"SELECT content_id FROM run_cases WHERE run_id = {RUN_ROWS}", (run_id,)
            )
            texts = self._content_texts(tx, (int(r[0]) for r in rows))
        infos = [cast(dict[str, Any], json.loads(texts[int(r[0])])) for r in rows]

        def order(info: dict[str, Any]) -> tuple[int, str]:
            line = info.get("line")
            return (line if isinstance(line, int) else 0, str(info.get("caseId", "")))

        return sorted(infos, key=order)

    def artifacts(self, run_id: str) -> list[ArtifactRow]:
        with self._read("artifacts") as tx:
            rows = tx.query(
                "SELECT path, sha256, size, created_at FROM artifacts WHERE run_id = ?"
                " ORDER BY path",
                (run_id,),
            )
        return [ArtifactRow(r[0], r[1], int(r[2]), self.ts_value(r[3])) for r in rows]

    def runs(self, limit: int = 50, dataset_id: str | None = None) -> list[RunRow]:
        where, params = ("WHERE dataset_id = ?", [dataset_id]) if dataset_id else ("", [])
        with self._read("runs") as tx:
            rows = tx.query(
                f"SELECT {RUN_COLUMNS} FROM runs {where}"
                " ORDER BY started_at DESC, run_id DESC LIMIT ?",
                (*params, int(limit)),
            )
            return self._run_rows(tx, [RunColumns(*r) for r in rows])

    def get_run(self, run_id_or_key: str) -> RunRow | None:
        with self._read("get_run") as tx:
            row = self._find(tx, "run_id", run_id_or_key) or self._find(
                tx, "run_key", run_id_or_key
            )
            return self._run_rows(tx, [row])[0] if row is not None else None
