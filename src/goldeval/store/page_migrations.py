"""The two data-moving steps of the schema history (5: rows into pages; 8: pages back into
rows), run by :meth:`~goldeval.store.sql.SqlCore._migrate` through a step's ``hook`` name.
A mixin over :class:`~goldeval.store.sql.SqlCore` (see there for why the store is split)."""

from __future__ import annotations

from typing import Any

from goldeval.store.encoding import (
    Attempt,
    content_columns,
    json_text,
    json_value,
    utcnow,
)
from goldeval.store.pages import (
    ATTEMPT,
    CASE,
    decode_page,
    digest,
    encode_page,
    full_fields,
    split_record,
)
from goldeval.store.sql import (
    INSERT_ATTEMPT_SCHEMA8,
    INSERT_CASE,
    INSERT_PAGE,
    PAGE_ROWS,
    SqlCore,
    Tx,
)


class PageMigrations(SqlCore):
    """The migration hooks (``Step.hook`` in :mod:`goldeval.store.migrations`)."""

    @staticmethod
    def _pages(tx: Tx, run_id: str, kind: str | None, after: int = 0) -> list[tuple[Any, ...]]:
        """``(page_no, kind, entries)`` of a run's pages after ``after``, in write order."""
        sql = "SELECT page_no, kind, body FROM run_pages WHERE run_id = ? AND page_no > ?"
        params: tuple[Any, ...] = (run_id, after)
        if kind is not None:
            sql += " AND kind = ?"
            params = (run_id, after, kind)
        rows = tx.query(sql + " ORDER BY page_no", params)
        return [(int(no), str(k), decode_page(body)) for no, k, body in rows]

    def _append_page(
        self, tx: Tx, run_id: str, page_no: int, kind: str, entries: list[list[Any]]
    ) -> None:
        tx.execute(
            INSERT_PAGE,
            (run_id, page_no, kind, encode_page(entries), self.ts_param(utcnow())),
        )

    def _final_page_entries(self, tx: Tx, run_id: str) -> dict[tuple[str, int, str], list[Any]]:
        """The page entry that counts per attempt key (a later entry replaces an earlier)."""
        final: dict[tuple[str, int, str], list[Any]] = {}
        for _, _, entries in self._pages(tx, run_id, ATTEMPT):
            for e in entries:
                final[(str(e[0]), int(e[1]), str(e[2]))] = e
        return final

    def move_pages_to_rows(self, tx: Tx) -> None:
        """Migration 8: every run's case and attempt pages into ``run_cases`` and
        ``attempts`` rows (contents are kept as they are: the rows point at the same ids)."""
        for (run_id,) in tx.query("SELECT run_id FROM runs ORDER BY run_id"):
            first: dict[str, int] = {}
            for _, _, entries in self._pages(tx, run_id, CASE):
                for case_id, content_id in entries:
                    first.setdefault(str(case_id), int(content_id))
            if first:
                tx.executemany(INSERT_CASE, [(run_id, c, i) for c, i in first.items()])
            final = self._final_page_entries(tx, run_id)
            texts = self._content_texts(tx, (int(e[4]) for e in final.values()))
            rows = []
            for (case_id, index, model), e in sorted(final.items()):
                status, content_id, slim = str(e[3]), int(e[4]), e[5]
                run_fields = full_fields(case_id, index, status, slim)
                attempt = Attempt(case_id, index, model, status, run_fields, texts[content_id])
                error_kind, tokens, _cost = content_columns(texts[content_id])
                rows.append(
                    (
                        run_id,
                        case_id,
                        index,
                        model,
                        status,
                        error_kind,
                        attempt.duration_ms(),
                        tokens,
                        content_id,
                        json_text(slim),
                    )
                )
            for i in range(0, len(rows), PAGE_ROWS):
                tx.executemany(INSERT_ATTEMPT_SCHEMA8, rows[i : i + PAGE_ROWS])

    def move_rows_to_pages(self, tx: Tx) -> None:
        """Migration 5: every run's ``cases`` and ``attempts`` rows into contents and pages."""
        for (run_id,) in tx.query("SELECT run_id FROM runs ORDER BY run_id"):
            page_no = 0
            cases = tx.query(
                "SELECT case_id, info FROM cases WHERE run_id = ? ORDER BY case_id", (run_id,)
            )
            rows = tx.query(
                "SELECT case_id, attempt_index, model, status, record FROM attempts"
                " WHERE run_id = ? ORDER BY case_id, attempt_index, model",
                (run_id,),
            )
            for i in range(0, len(cases), PAGE_ROWS):
                chunk = [
                    (str(c), json_text(json_value(info))) for c, info in cases[i : i + PAGE_ROWS]
                ]
                ids = self._content_ids(tx, {digest(t): t for _, t in chunk})
                page_no += 1
                self._append_page(
                    tx, run_id, page_no, CASE, [[c, ids[digest(t)]] for c, t in chunk]
                )
            for i in range(0, len(rows), PAGE_ROWS):
                moved = []
                for case_id, index, model, status, record in rows[i : i + PAGE_ROWS]:
                    run_fields, content = split_record(json_value(record))
                    moved.append(
                        Attempt(
                            str(case_id),
                            int(index),
                            str(model),
                            str(status),
                            run_fields,
                            json_text(content),
                        )
                    )
                ids = self._content_ids(tx, {digest(a.content): a.content for a in moved})
                page_no += 1
                self._append_page(
                    tx,
                    run_id,
                    page_no,
                    ATTEMPT,
                    [
                        [
                            a.case_id,
                            a.index,
                            a.model,
                            a.status,
                            ids[digest(a.content)],
                            a.slim(),
                        ]
                        for a in moved
                    ],
                )
