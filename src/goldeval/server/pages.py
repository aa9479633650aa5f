"""The paged run index of the service (``/ui/``): one page of runs, newest first.

A page costs O(page), whatever the store holds (issue 33: the old index built the whole run
document, every attempt, of its 30 runs: 1.8 MB in 15–18 s): the page reads at most
``ui_page_runs`` + 1 queue rows by keyset (``created_at, id`` before the cursor, the
``service_runs_created`` index) and, per run, the summary the plugin stored when it finished
(run.json without its cases). So the index shows each run's metrics, gate and trends; the
per-case results are on each run's own page, which reads that one run.
"""

from __future__ import annotations

import html
from datetime import datetime
from typing import Any

from goldeval.core.errors import BaselineError
from goldeval.core.limits import LIMITS_BY_NAME
from goldeval.reports import site
from goldeval.results.documents import RunDocument, typed_run
from goldeval.results.run_document import RUN_DOCUMENT
from goldeval.store.cursors import decode_cursor, encode_cursor
from goldeval.store.queue import RunQueue, ServiceRun

PAGE_RUNS = int(LIMITS_BY_NAME["ui_page_runs"].default)


def parse_before(cursor: str | None) -> tuple[datetime, str] | None:
    """The ``?before=`` cursor of a page link; ValueError when it is not one."""
    if cursor is None:
        return None
    created, last = decode_cursor(cursor, 2)
    return datetime.fromisoformat(created), last


def _summary_document(q: RunQueue, job: ServiceRun) -> dict[str, Any] | None:
    row = q.store.get_run(job.run_id or job.run_key)
    summary = row.summary if row is not None else None
    doc = summary.get(RUN_DOCUMENT) if isinstance(summary, dict) else None
    if not isinstance(doc, dict):
        return None  # not finished (or finished before the plugin wrote a document)
    out = dict(doc)
    out.pop("cases", None)
    out.setdefault("timestamp", job.created_at.isoformat())
    return out


def index_page(
    q: RunQueue, before: tuple[datetime, str] | None, size: int = PAGE_RUNS
) -> tuple[str, str | None]:
    """(the page's HTML, the cursor of the next, older page or None)."""
    jobs = q.page(limit=size + 1, before=before)
    shown = jobs[:size]
    docs: list[RunDocument] = []
    names: dict[int, str] = {}
    for job in shown:
        raw = _summary_document(q, job)
        if raw is None:
            continue
        try:
            doc = typed_run(raw, f"run {job.id}")
        except BaselineError:
            continue  # a damaged stored summary is left off, as goldeval site skips its run.json
        docs.append(doc)
        names[id(doc)] = job.id
    older = None
    if len(jobs) > size:
        last = shown[-1]
        older = encode_cursor(last.created_at.isoformat(), last.id)
    return _with_pager(site.render_index(docs, names), older, before is not None), older


def _with_pager(page: str, older: str | None, paged: bool) -> str:
    links = []
    if paged:
        links.append('<a href="./" rel="first">Newest runs</a>')
    if older is not None:
        links.append(f'<a href="?before={html.escape(older)}" rel="next">Older runs</a>')
    note = (
        f"<p>{PAGE_RUNS} runs a page, newest first; each run's page has its per-case results.</p>"
    )
    pager = f'<nav class="pager">{" · ".join(links)}</nav>' if links else ""
    block = pager + note
    if "</body>" in page:
        head, tail = page.rsplit("</body>", 1)
        return f"{head}{block}</body>{tail}"
    return page + block
