"""The ADMIN routes over one run: cancel, resume, delete (tag ``admin``)."""

# No `from __future__ import annotations`: FastAPI evaluates the endpoint annotations.

from typing import Annotated

from fastapi import APIRouter, Depends, Response

from goldeval.server import logs
from goldeval.server.auth import Principal
from goldeval.server.deps import PROBLEM_DOC, ServiceDep, manage
from goldeval.server.models import RunOut

router = APIRouter(tags=["admin"])


@router.post("/api/eval/runs/{run_id}/cancel", response_model=RunOut, responses=PROBLEM_DOC)
def cancel_run(
    run_id: str, who: Annotated[Principal, Depends(manage)], service: ServiceDep
) -> RunOut:
    """QUEUED: INTERRUPTED at once. RUNNING: the worker stops it (SIGTERM) shortly."""
    out = service.cancel(run_id, who.label)
    logs.event("run cancel requested", run_id=run_id, status=out.status)
    return out


@router.post("/api/eval/runs/{run_id}/resume", response_model=RunOut, responses=PROBLEM_DOC)
def resume_run(
    run_id: str, _: Annotated[Principal, Depends(manage)], service: ServiceDep
) -> RunOut:
    """Queue an INTERRUPTED, INCOMPLETE or FAILED run again; it resumes by its run key."""
    return service.resume(run_id)


@router.delete("/api/eval/runs/{run_id}", status_code=204, responses=PROBLEM_DOC)
def delete_run(
    run_id: str, _: Annotated[Principal, Depends(manage)], service: ServiceDep
) -> Response:
    """Delete a finished run: queue row, store records and run folder (retention)."""
    service.delete(run_id)
    logs.event("run deleted", run_id=run_id)
    return Response(status_code=204)
