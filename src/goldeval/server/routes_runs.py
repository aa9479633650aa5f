"""The run routes: queue a run, list runs, read one run, its results and its comparison with a
baseline run (tag ``runs``)."""

# No `from __future__ import annotations`: FastAPI evaluates the endpoint annotations.

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response

from goldeval.server import logs
from goldeval.server.auth import Principal
from goldeval.server.deps import PROBLEM_DOC, ServiceDep, read, write
from goldeval.server.models import ResultPage, RunOut, RunPage, RunRequest

router = APIRouter(tags=["runs"])


@router.post(
    "/api/eval/runs",
    response_model=RunOut,
    status_code=202,
    responses={
        200: {"model": RunOut, "description": "existing run (same idempotency key)"},
        **PROBLEM_DOC,
    },
)
def create_run(
    body: RunRequest,
    response: Response,
    caller: Annotated[Principal, Depends(write)],
    service: ServiceDep,
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


@router.get("/api/eval/runs", response_model=RunPage, responses=PROBLEM_DOC)
def list_runs(
    caller: Annotated[Principal, Depends(read)],
    service: ServiceDep,
    dataset: Annotated[str | None, Query(max_length=128)] = None,
    status: Annotated[str | None, Query(max_length=16)] = None,
    since: Annotated[datetime | None, Query()] = None,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> Response:
    """Runs, newest first; pass ``nextCursor`` back as ``cursor`` for the next page."""
    items, next_cursor = service.list_runs(
        dataset=dataset, status=status, since=since, cursor=cursor, limit=limit, viewer=caller
    )
    # Serialised here, once: FastAPI would validate the 50 models again on the way out.
    body = RunPage(items=items, nextCursor=next_cursor).model_dump_json()
    return Response(body, media_type="application/json")


@router.get("/api/eval/runs/{run_id}", response_model=RunOut, responses=PROBLEM_DOC)
def get_run(
    run_id: str, caller: Annotated[Principal, Depends(read)], service: ServiceDep
) -> RunOut:
    """Status, protocol, metrics, gate, exit decision and artifact inventory."""
    return service.get(run_id, viewer=caller)


@router.get("/api/eval/runs/{run_id}/results", response_model=ResultPage, responses=PROBLEM_DOC)
def get_results(
    run_id: str,
    _: Annotated[Principal, Depends(read)],
    service: ServiceDep,
    status: Annotated[str | None, Query(max_length=16)] = None,
    cursor: Annotated[str | None, Query(max_length=1024)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> Response:
    """Graded attempts in (case, attempt, model) order, optionally of one status (shaped as
    ResultPage; the stored records are sent as stored, not decoded and encoded again)."""
    body = service.results(run_id, status=status, cursor=cursor, limit=limit)
    return Response(content=body, media_type="application/json")


@router.get("/api/eval/runs/{run_id}/compare/{baseline_id}", responses=PROBLEM_DOC)
def compare_runs(
    run_id: str,
    baseline_id: str,
    _: Annotated[Principal, Depends(read)],
    service: ServiceDep,
    noGate: Annotated[bool, Query()] = False,
) -> dict[str, Any]:
    """``goldeval compare``'s verdict: the comparison document with the gate attached, the
    exit decision, ``runId`` and ``comparedWith``; 409 with the reasons when the runs are
    not comparable, or when the run's dataset (its gate policy) is not on this server."""
    return service.compare(run_id, baseline_id, gate=not noGate)
