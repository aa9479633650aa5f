"""The API's plain ASGI middleware: the request body limit (413) and the request log."""

import time

from prometheus_client import Histogram
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from goldeval.server import logs
from goldeval.server.errors import problem_response
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
