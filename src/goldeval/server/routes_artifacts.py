"""The artifact route: one file of a run, checked against the inventory it recorded (tag
``runs``)."""

# No `from __future__ import annotations`: FastAPI evaluates the endpoint annotations.

from typing import Annotated

from fastapi import APIRouter, Depends, Response

from goldeval.server.auth import Principal
from goldeval.server.deps import PROBLEM_DOC, ServiceDep, read

router = APIRouter(tags=["runs"])


@router.get(
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
        **PROBLEM_DOC,
    },
)
def get_artifact(
    run_id: str, kind: str, _: Annotated[Principal, Depends(read)], service: ServiceDep
) -> Response:
    """One artifact (JSON_SUMMARY, RUN_JSON, REPORT_MD, COMPARISON, MANIFEST, JUNIT_XML,
    HTML_REPORT, LOG_BUNDLE), served only if its SHA-256 and size still match the inventory
    the run recorded (409 otherwise)."""
    data, media, filename = service.artifact(run_id, kind)
    return Response(
        data,
        media_type=media,
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
