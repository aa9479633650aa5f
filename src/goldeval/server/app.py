"""The HTTP API (FastAPI): ``create_app(settings)``. See docs/service.md for the endpoints.

The routes live in topic routers (``routes_runs``, ``routes_artifacts``, ``routes_admin``,
``routes_operations``, ``routes_pages``); what they depend on (the key ring, the rate limiter,
the settings, the :class:`Service`, the metrics registry) is put on ``app.state`` here and read
by :mod:`goldeval.server.deps`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Histogram, ProcessCollector

from goldeval import __version__
from goldeval.server import (
    auth,
    logs,
    routes_admin,
    routes_artifacts,
    routes_operations,
    routes_pages,
    routes_runs,
)
from goldeval.server.auth import RateLimiter
from goldeval.server.errors import install_error_handlers
from goldeval.server.middleware import BodyLimit, KeyFirst, RequestLog, keyed_routes
from goldeval.server.observability import MetricsReader, StoreCollector
from goldeval.server.service import Service
from goldeval.server.settings import ServiceSettings

# Registration order is the OpenAPI document's path order.
_ROUTERS = (routes_runs, routes_artifacts, routes_admin, routes_operations, routes_pages)


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
    service = Service(settings)
    per_minute = settings.rate_limit_per_minute
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
    install_error_handlers(app, settings.public_data)
    # The last added runs first: BodyLimit, RequestLog, KeyFirst, then the routes.
    routes = [route for module in _ROUTERS for route in module.router.routes]
    app.add_middleware(KeyFirst, routes=keyed_routes(routes))
    app.add_middleware(RequestLog, latency=latency)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.state.settings = settings
    app.state.keys = settings.keys
    app.state.limiter = RateLimiter(per_minute) if per_minute else None
    app.state.service = service
    app.state.registry = registry
    for module in _ROUTERS:
        app.include_router(module.router)
    return app
