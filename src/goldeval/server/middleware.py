"""The API's plain ASGI middleware: the request body limit (413), authentication before the
body (401/403) and the request log."""

import time
from collections.abc import Iterable

from fastapi import Request
from fastapi.routing import APIRoute
from prometheus_client import Histogram
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from goldeval.server import logs
from goldeval.server.deps import Need
from goldeval.server.errors import problem_response
from goldeval.server.header_deadline import BODY_TIMED_OUT
from goldeval.server.problems import Problem


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


def _carries_body(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() != b"0"):
            return True
    return False


def keyed_routes(routes: Iterable[BaseRoute]) -> list[tuple[APIRoute, Need]]:
    """The routes among ``routes`` that need a key, each with its :class:`Need`."""
    found = []
    for route in routes:
        if isinstance(route, APIRoute):
            needs = [d.call for d in route.dependant.dependencies if isinstance(d.call, Need)]
            if needs:
                found.append((route, needs[0]))
    return found


class KeyFirst:
    """A request with a body, to a route that needs a key, is answered 401 or 403 from its
    headers, before its body is read: FastAPI reads a route's body before it checks its
    dependencies, so a client without a key could otherwise hold a connection by never
    finishing a body. The route's own dependency checks again (and applies the rate limit).
    ``routes``: :func:`keyed_routes` of the app's routers."""

    def __init__(self, app: ASGIApp, routes: list[tuple[APIRoute, Need]]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _carries_body(scope):
            await self.app(scope, receive, send)
            return
        for route, need in self.routes:
            match, child = route.matches(scope)
            if match != Match.FULL:
                continue
            headers = Headers(scope=scope)
            request = Request(scope)
            try:
                need.authorize(request, headers.get("x-api-key"), headers.get("authorization"))
            except Problem as problem:
                scope.update(child)  # the route's template and run id for the request log
                await problem_response(problem, request)(scope, receive, send)
                return
            break
        await self.app(scope, receive, send)


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
            if scope.get(BODY_TIMED_OUT):
                status = 408  # what the client got (the app answered a disconnect)
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
