"""The operations routes: liveness (no key), readiness and Prometheus metrics (MONITOR)."""

# No `from __future__ import annotations`: FastAPI evaluates the endpoint annotations.

from typing import Annotated, cast

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from goldeval.server.auth import Principal
from goldeval.server.deps import PROBLEM_DOC, ServiceDep, monitor
from goldeval.server.models import Health, Liveness

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=Liveness)
def healthz() -> Liveness:
    """Liveness: the process answers. No key needed; reveals nothing."""
    return Liveness(status="ok")


@router.get("/readyz", response_model=Health, responses=PROBLEM_DOC)
def readyz(
    response: Response, _: Annotated[Principal, Depends(monitor)], service: ServiceDep
) -> Health:
    """Readiness: store reachable, migrations applied, datasets folder present."""
    checks = service.readiness()
    ok = (
        checks.get("store") == "ok"
        and checks.get("migrations") == "applied"
        and checks.get("datasets") == "ok"
    )
    response.status_code = 200 if ok else 503
    return Health(status="ok" if ok else "unavailable", checks=checks)


@router.get("/metrics", responses=PROBLEM_DOC)
def metrics(request: Request, _: Annotated[Principal, Depends(monitor)]) -> Response:
    """Prometheus text format."""
    registry = cast(CollectorRegistry, request.app.state.registry)
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
