"""The API's error answers: every error is RFC 9457 problem+json (:func:`problem_response`),
installed on the app by :func:`install_error_handlers`."""

import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from goldeval.core.textsafe import safe_text
from goldeval.server import logs
from goldeval.server.problems import MEDIA_TYPE, Problem, validation_problem
from goldeval.store import StoreError


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


def _validation_errors(exc: RequestValidationError) -> list[dict[str, str]]:
    """One ``{field, message}`` per error, in the words of the RunRequest schema."""
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
    return errors


def install_error_handlers(app: FastAPI, public: Callable[[Any], Any]) -> None:
    """Answer every error with problem+json; ``public`` rewrites server paths in the texts."""

    def respond(problem: Problem, request: Request) -> JSONResponse:
        # Messages quote the CLI's (a manifest error names its file): no absolute paths.
        return problem_response(problem, request, public)

    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        return respond(exc, request)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return respond(validation_problem(_validation_errors(exc)), request)

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
