"""What the API's routes depend on (FastAPI dependencies): the caller's role, checked per route
(:func:`need`), and the app's :class:`Service` (:data:`ServiceDep`). Both read what
``create_app`` put on ``app.state``: the key ring, the rate limiter, the settings, the service."""

# No `from __future__ import annotations`: FastAPI evaluates the dependency annotations.

from typing import Annotated, Any, cast

from fastapi import Depends, Header, Request
from fastapi.security import APIKeyHeader

from goldeval.server import auth
from goldeval.server.auth import KeyRing, Principal, RateLimiter, Role
from goldeval.server.problems import MEDIA_TYPE, Problem
from goldeval.server.service import Service
from goldeval.server.settings import ServiceSettings

_api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False)

#: The problem+json answers a route may give, for its OpenAPI ``responses``.
PROBLEM_DOC: dict[int | str, dict[str, Any]] = {
    code: {"description": "problem+json", "content": {MEDIA_TYPE: {}}}
    for code in (401, 403, 404, 409, 422, 429)
}


def _service(request: Request) -> Service:
    return cast(Service, request.app.state.service)


ServiceDep = Annotated[Service, Depends(_service)]


class Need:
    """A dependency: the caller's :class:`Principal` if its key is valid (401), its role is in
    ``allowed`` (403) and it is within the rate limit (429). ``browser``: the 401 asks for
    Basic auth, so a browser shows its login prompt (the /ui pages).

    :meth:`authorize` (401 and 403) reads the headers only: the middleware
    :class:`~goldeval.server.middleware.KeyFirst` calls it before a request's body is read."""

    def __init__(self, allowed: frozenset[Role], *, browser: bool = False) -> None:
        self.allowed = allowed
        self.browser = browser

    def authorize(
        self, request: Request, x_api_key: str | None, authorization: str | None
    ) -> Principal:
        """The caller (recorded on ``request.state``), or a 401/403 :class:`Problem`."""
        keys: KeyRing = request.app.state.keys
        challenge = 'Basic realm="goldeval"' if self.browser else 'ApiKey header="X-API-Key"'
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
        if principal.role not in self.allowed:
            raise Problem(
                403,
                "forbidden",
                "Role not allowed",
                f"role {principal.role.value} may not do this; needs "
                + " or ".join(sorted(r.value for r in self.allowed)),
            )
        return principal

    # async: a hash and a few comparisons, cheaper than a hop to the thread pool.
    async def __call__(
        self,
        request: Request,
        x_api_key: Annotated[str | None, Depends(_api_key_header)],
        authorization: Annotated[str | None, Header(include_in_schema=False)] = None,
    ) -> Principal:
        principal = self.authorize(request, x_api_key, authorization)
        limiter: RateLimiter | None = request.app.state.limiter
        if limiter is not None:
            wait = limiter.take(principal.label)
            if wait:
                settings: ServiceSettings = request.app.state.settings
                raise Problem(
                    429,
                    "rate-limited",
                    "Too many requests",
                    f"this key's limit is {settings.rate_limit_per_minute} requests a "
                    f"minute; retry in {wait:.0f} s",
                    headers={"Retry-After": f"{wait:.0f}"},
                )
        return principal


def need(allowed: frozenset[Role], *, browser: bool = False) -> Need:
    """The dependency for routes open to ``allowed`` (see :class:`Need`)."""
    return Need(allowed, browser=browser)


read = need(auth.READ)
write = need(auth.WRITE)
manage = need(auth.MANAGE)
monitor = need(auth.MONITOR)
browse = need(auth.READ, browser=True)
