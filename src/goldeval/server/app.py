"""The HTTP API (FastAPI): ``create_app(settings)``. See docs/service.md for the endpoints."""

# No `from __future__ import annotations`: FastAPI evaluates the endpoint annotations, and
# they name dependencies local to create_app.

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any

import anyio.to_thread
from fastapi import Depends, FastAPI, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.security import APIKeyHeader
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from goldeval import __version__
from goldeval.core.textsafe import safe_text
from goldeval.server import auth, logs
from goldeval.server.auth import KeyRing, Principal, RateLimiter, Role
from goldeval.server.models import Health, Liveness, ResultPage, RunOut, RunPage, RunRequest
from goldeval.server.observability import MetricsReader, StoreCollector
from goldeval.server.problems import MEDIA_TYPE, Problem, validation_problem
from goldeval.server.service import Service
from goldeval.server.settings import ServiceSettings
from goldeval.store import StoreError

_api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False)


def problem_response(
    problem: Problem,
    request: Request | None = None,
    public: Callable[[Any], Any] | None = None,
) -> JSONResponse:
    """The problem+json answer; ``public`` rewrites server paths in its texts
    (:meth:`ServiceSettings.public_data`)."""
    instance = request.url.path if request is not None else None
    body = problem.body(instance)
    return JSONResponse(
        public(body) if public is not None else body,
        status_code=problem.status,
        media_type=MEDIA_TYPE,
        headers=problem.headers,
    )


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes (413), whether announced or streamed."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = Problem(
            413,
            "body-too-large",
            "Request body too large",
            f"request bodies are limited to {self.limit} bytes",
        )
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    announced = int(value)
                except ValueError:
                    announced = self.limit + 1
                if announced > self.limit:
                    response = problem_response(too_big)
                    await response(scope, receive, send)
                    return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    # An HTTPException passes FastAPI's body parsing unchanged (-> 413).
                    raise StarletteHTTPException(413, too_big.detail)
            return message

        await self.app(scope, limited, send)


class RequestLog:
    """One log line and one latency observation per request (a plain ASGI middleware: the
    decorator kind costs a stream copy per request)."""

    def __init__(self, app: ASGIApp, latency: Histogram) -> None:
        self.app = app
        self.latency = latency

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - started
            template = getattr(scope.get("route"), "path", "unmatched")
            method = str(scope.get("method"))
            self.latency.labels(method, template, str(status)).observe(seconds)
            principal = (scope.get("state") or {}).get("principal")
            params = scope.get("path_params") or {}
            logs.event(
                "request",
                method=method,
                path=template,
                status=status,
                ms=round(seconds * 1000, 2),
                caller=principal.label if principal is not None else None,
                role=principal.role.value if principal is not None else None,
                run_id=params.get("run_id"),
            )


def create_app(
    settings: ServiceSettings,
    *,
    on_startup: Callable[[], None] | None = None,
    on_shutdown: Callable[[], None] | None = None,
) -> FastAPI:
    """The API over ``settings``' store. ``on_startup``/``on_shutdown`` start and stop the
    in-process workers (``goldeval serve``)."""
    if settings.keys is None or len(settings.keys) == 0:
        raise auth.KeyConfigError(f"no API keys: set {auth.ENV}")
    keys: KeyRing = settings.keys
    service = Service(settings)
    per_minute = settings.rate_limit_per_minute
    limiter = RateLimiter(per_minute) if per_minute else None
    registry = CollectorRegistry()
    latency = Histogram(
        "goldeval_http_request_duration_seconds",
        "HTTP request latency",
        ["method", "route", "status"],
        registry=registry,
    )
    reader = MetricsReader(settings.store_url)
    registry.register(StoreCollector(reader))
    ProcessCollector(registry=registry)  # CPU, memory, open files of this process

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        logs.event("server starting", version=__version__)
        # Sync endpoints run in the thread pool; more threads than store connections only
        # queue on the pool and fight over the GIL (benchmarks/bench_service.py).
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.pool_size * 2
        if on_startup is not None:
            on_startup()
        yield
        if on_shutdown is not None:
            on_shutdown()
        service.pool.close()
        reader.close()
        logs.event("server stopped")

    app = FastAPI(
        title="goldeval evaluation service",
        version=__version__,
        description="Golden-dataset evaluation runs over HTTP (pytest-goldeval). Errors are "
        "RFC 9457 problem+json; authenticate with X-API-Key.",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )

    # ---- errors

    def respond(problem: Problem, request: Request) -> JSONResponse:
        # Messages quote the CLI's (a manifest error names its file): no absolute paths.
        return problem_response(problem, request, settings.public_data)

    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        return respond(exc, request)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = []
        for error in exc.errors():
            loc = [str(p) for p in error.get("loc", ()) if p not in ("body",)]
            where = ".".join(loc)
            if error.get("type") == "extra_forbidden":
                message = (
                    f"unknown option {loc[-1] if loc else where!r}; see the RunRequest schema "
                    "in /openapi.json"
                )
            elif error.get("type") == "json_invalid":
                message = "the body is not valid JSON"
            else:
                message = str(error.get("msg"))
            errors.append({"field": where, "message": message})
        return respond(validation_problem(errors), request)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        titles = {404: "Not found", 405: "Method not allowed", 413: "Request body too large"}
        kinds = {404: "not-found", 405: "method-not-allowed", 413: "body-too-large"}
        problem = Problem(
            exc.status_code,
            kinds.get(exc.status_code, "http-error"),
            titles.get(exc.status_code, "HTTP error"),
            str(exc.detail) if exc.detail else None,
            headers=dict(exc.headers or {}),
        )
        return respond(problem, request)

    @app.exception_handler(StoreError)
    async def _store(request: Request, exc: StoreError) -> JSONResponse:
        logs.event("store error", logging.ERROR, path=request.url.path, error=safe_text(exc))
        problem = Problem(
            503,
            "store-unavailable",
            "Run store unavailable",
            safe_text(exc),
            headers={"Retry-After": "5"},
        )
        return respond(problem, request)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        logs.event(
            "internal error",
            logging.ERROR,
            path=request.url.path,
            error=type(exc).__name__,
        )
        return respond(
            Problem(500, "internal", "Internal server error", "see the server log"), request
        )

    # ---- middleware

    app.add_middleware(RequestLog, latency=latency)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)

    # ---- auth

    def need(
        allowed: frozenset[Role], *, browser: bool = False
    ) -> Callable[..., Awaitable[Principal]]:
        # async: a hash and a few comparisons, cheaper than a hop to the thread pool.
        async def dependency(
            request: Request,
            x_api_key: Annotated[str | None, Depends(_api_key_header)],
            authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
        ) -> Principal:
            challenge = 'Basic realm="goldeval"' if browser else 'ApiKey header="X-API-Key"'
            key = auth.presented_key(x_api_key, authorization)
            principal = keys.identify(key)
            if principal is None:
                raise Problem(
                    401,
                    "unauthenticated",
                    "Authentication required",
                    "send a valid API key in the X-API-Key header"
                    if key is None
                    else "the API key is not valid",
                    headers={"WWW-Authenticate": challenge},
                )
            request.state.principal = principal
            if principal.role not in allowed:
                raise Problem(
                    403,
                    "forbidden",
                    "Role not allowed",
                    f"role {principal.role.value} may not do this; needs "
                    + " or ".join(sorted(r.value for r in allowed)),
                )
            if limiter is not None:
                wait = limiter.take(principal.label)
                if wait:
                    raise Problem(
                        429,
                        "rate-limited",
                        "Too many requests",
                        f"this key's limit is {settings.rate_limit_per_minute} requests a "
                        f"minute; retry in {wait:.0f} s",
                        headers={"Retry-After": f"{wait:.0f}"},
                    )
            return principal

        return dependency

    read = need(auth.READ)
    write = need(auth.WRITE)
    manage = need(auth.MANAGE)
    monitor = need(auth.MONITOR)
    browse = need(auth.READ, browser=True)
    problem_doc: dict[int | str, dict[str, Any]] = {
        code: {"description": "problem+json", "content": {MEDIA_TYPE: {}}}
        for code in (401, 403, 404, 409, 422, 429)
    }

    # ---- API

    @app.post(
        "/api/eval/runs",
        response_model=RunOut,
        status_code=202,
        responses={
            200: {"model": RunOut, "description": "existing run (same idempotency key)"},
            **problem_doc,
        },
        tags=["runs"],
    )
    def create_run(
        body: RunRequest, response: Response, caller: Annotated[Principal, Depends(write)]
    ) -> RunOut:
        """Queue a run (202); the same idempotency key from the same API key returns the
        existing run (200)."""
        created = service.create(body, owner=caller.owner)
        response.status_code = 202 if created.created else 200
        response.headers["Location"] = f"/api/eval/runs/{created.run.id}"
        if created.created:
            logs.event(
                "run queued",
                run_id=created.run.id,
                dataset_version=created.run.datasetId,
                idempotency_key=created.run.idempotencyKey,
            )
        return created.run

    @app.get("/api/eval/runs", response_model=RunPage, responses=problem_doc, tags=["runs"])
    def list_runs(
        _: Annotated[Principal, Depends(read)],
        dataset: Annotated[str | None, Query(max_length=128)] = None,
        status: Annotated[str | None, Query(max_length=16)] = None,
        since: Annotated[datetime | None, Query()] = None,
        cursor: Annotated[str | None, Query(max_length=512)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> Response:
        """Runs, newest first; pass ``nextCursor`` back as ``cursor`` for the next page."""
        items, next_cursor = service.list_runs(
            dataset=dataset, status=status, since=since, cursor=cursor, limit=limit
        )
        # Serialised here, once: FastAPI would validate the 50 models again on the way out.
        body = RunPage(items=items, nextCursor=next_cursor).model_dump_json()
        return Response(body, media_type="application/json")

    @app.get("/api/eval/runs/{run_id}", response_model=RunOut, responses=problem_doc, tags=["runs"])
    def get_run(run_id: str, _: Annotated[Principal, Depends(read)]) -> RunOut:
        """Status, protocol, metrics, gate, exit decision and artifact inventory."""
        return service.get(run_id)

    @app.get(
        "/api/eval/runs/{run_id}/results",
        response_model=ResultPage,
        responses=problem_doc,
        tags=["runs"],
    )
    def get_results(
        run_id: str,
        _: Annotated[Principal, Depends(read)],
        status: Annotated[str | None, Query(max_length=16)] = None,
        cursor: Annotated[str | None, Query(max_length=1024)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
    ) -> ResultPage:
        """Graded attempts in (case, attempt, model) order, optionally of one status."""
        job_id, items, next_cursor = service.results(
            run_id, status=status, cursor=cursor, limit=limit
        )
        return ResultPage(runId=job_id, items=items, nextCursor=next_cursor)

    @app.get("/api/eval/runs/{run_id}/compare/{baseline_id}", responses=problem_doc, tags=["runs"])
    def compare_runs(
        run_id: str,
        baseline_id: str,
        _: Annotated[Principal, Depends(read)],
        noGate: Annotated[bool, Query()] = False,
    ) -> dict[str, Any]:
        """``goldeval compare``'s verdict: the comparison document with the gate attached, the
        exit decision, ``runId`` and ``comparedWith``; 409 with the reasons when the runs are
        not comparable, or when the run's dataset (its gate policy) is not on this server."""
        return service.compare(run_id, baseline_id, gate=not noGate)

    @app.get(
        "/api/eval/runs/{run_id}/artifacts/{kind}",
        responses={
            200: {
                "content": {
                    "application/json": {},
                    "text/markdown": {},
                    "application/xml": {},
                    "text/html": {},
                    "application/zip": {},
                }
            },
            **problem_doc,
        },
        tags=["runs"],
    )
    def get_artifact(run_id: str, kind: str, _: Annotated[Principal, Depends(read)]) -> Response:
        """One artifact (JSON_SUMMARY, RUN_JSON, REPORT_MD, COMPARISON, MANIFEST, JUNIT_XML,
        HTML_REPORT, LOG_BUNDLE), served only if its SHA-256 and size still match the inventory
        the run recorded (409 otherwise)."""
        data, media, filename = service.artifact(run_id, kind)
        return Response(
            data,
            media_type=media,
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )

    @app.post(
        "/api/eval/runs/{run_id}/cancel",
        response_model=RunOut,
        responses=problem_doc,
        tags=["admin"],
    )
    def cancel_run(run_id: str, _: Annotated[Principal, Depends(manage)]) -> RunOut:
        """QUEUED: INTERRUPTED at once. RUNNING: the worker stops it (SIGTERM) shortly."""
        out = service.cancel(run_id)
        logs.event("run cancel requested", run_id=run_id, status=out.status)
        return out

    @app.post(
        "/api/eval/runs/{run_id}/resume",
        response_model=RunOut,
        responses=problem_doc,
        tags=["admin"],
    )
    def resume_run(run_id: str, _: Annotated[Principal, Depends(manage)]) -> RunOut:
        """Queue an INTERRUPTED, INCOMPLETE or FAILED run again; it resumes by its run key."""
        return service.resume(run_id)

    @app.delete("/api/eval/runs/{run_id}", status_code=204, responses=problem_doc, tags=["admin"])
    def delete_run(run_id: str, _: Annotated[Principal, Depends(manage)]) -> Response:
        """Delete a finished run: queue row, store records and run folder (retention)."""
        service.delete(run_id)
        logs.event("run deleted", run_id=run_id)
        return Response(status_code=204)

    # ---- operations

    @app.get("/healthz", response_model=Liveness, tags=["operations"])
    def healthz() -> Liveness:
        """Liveness: the process answers. No key needed; reveals nothing."""
        return Liveness(status="ok")

    @app.get("/readyz", response_model=Health, responses=problem_doc, tags=["operations"])
    def readyz(response: Response, _: Annotated[Principal, Depends(monitor)]) -> Health:
        """Readiness: store reachable, migrations applied, datasets folder present."""
        checks = service.readiness()
        ok = (
            checks.get("store") == "ok"
            and checks.get("migrations") == "applied"
            and checks.get("datasets") == "ok"
        )
        response.status_code = 200 if ok else 503
        return Health(status="ok" if ok else "unavailable", checks=checks)

    @app.get("/metrics", tags=["operations"], responses=problem_doc)
    def metrics(_: Annotated[Principal, Depends(monitor)]) -> Response:
        """Prometheus text format."""
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    # ---- run page (the history site, live from the store)

    html_headers = {
        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-store",
    }

    @app.get("/ui/", response_class=HTMLResponse, include_in_schema=False)
    @app.get("/ui/index.html", response_class=HTMLResponse, include_in_schema=False)
    def ui_index(
        _: Annotated[Principal, Depends(browse)],
        before: Annotated[str | None, Query(max_length=512)] = None,
    ) -> HTMLResponse:
        """Newest runs first, ``ui_page_runs`` a page; ``?before=`` is the older page's link."""
        return HTMLResponse(service.page_index(before), headers=html_headers)

    @app.get("/ui/runs/{page}", response_class=HTMLResponse, include_in_schema=False)
    def ui_run(
        page: str,
        _: Annotated[Principal, Depends(browse)],
        compare: Annotated[str | None, Query(max_length=128)] = None,
    ) -> HTMLResponse:
        run_id = page[: -len(".html")] if page.endswith(".html") else page
        return HTMLResponse(service.page_run(run_id, compare), headers=html_headers)

    app.state.service = service
    return app
