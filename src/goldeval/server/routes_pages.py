"""The run page (/ui/): the history site, live from the store; HTML, out of the OpenAPI
document, behind Basic auth so a browser can log in."""

# No `from __future__ import annotations`: FastAPI evaluates the endpoint annotations.

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from fastapi.responses import HTMLResponse

from goldeval.server.auth import Principal
from goldeval.server.deps import ServiceDep, browse

router = APIRouter(include_in_schema=False)

_HTML_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}


@router.get("/ui/", response_class=HTMLResponse)
@router.get("/ui/index.html", response_class=HTMLResponse)
def ui_index(
    caller: Annotated[Principal, Depends(browse)],
    service: ServiceDep,
    before: Annotated[str | None, Query(max_length=512)] = None,
) -> HTMLResponse:
    """Newest runs first, ``ui_page_runs`` a page; ``?before=`` is the older page's link.
    Bounded per key and cached per role (:mod:`goldeval.server.page_guard`)."""
    return HTMLResponse(service.page_index(before, caller), headers=_HTML_HEADERS)


@router.get("/ui/runs/{page}", response_class=HTMLResponse)
def ui_run(
    page: str,
    caller: Annotated[Principal, Depends(browse)],
    service: ServiceDep,
    compare: Annotated[str | None, Query(max_length=128)] = None,
    after: Annotated[str | None, Query(max_length=1024)] = None,
    status: Annotated[str | None, Query(max_length=16)] = None,
) -> HTMLResponse:
    """One run: its stored summary and a page of its attempts (``?after=`` the next page's
    cursor, ``?status=`` one status), bounded at any run size (:mod:`goldeval.server.run_page`)."""
    run_id = page[: -len(".html")] if page.endswith(".html") else page
    html = service.page_run(run_id, compare, caller, after=after, status=status)
    return HTMLResponse(html, headers=_HTML_HEADERS)
