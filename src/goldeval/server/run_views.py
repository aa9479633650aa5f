"""A queued run as the API shows it (:class:`RunOut`): the queue row, and with ``detail`` what
the plugin recorded of it (protocol, metrics, verdict, artifacts) and the exit decision of its
last pytest process."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from goldeval.results.documents import Comparison, ExitDecisionDoc, GateDoc, Metrics, Protocol
from goldeval.results.run_document import RUN_DOCUMENT
from goldeval.server.artifact_files import ARTIFACT_TYPES
from goldeval.server.auth import Principal, Role
from goldeval.server.models import ArtifactOut, RunOut
from goldeval.server.problems import Problem
from goldeval.server.run_endings import DECISION_LINE
from goldeval.server.settings import RUN_ID, ServiceSettings
from goldeval.store.queue import FINISHED, RunQueue, ServiceRun
from goldeval.store.rows import AttemptJson


def check_run_id(run_id: str, what: str = "run id") -> str:
    if not RUN_ID.match(run_id):
        raise Problem(404, "run-not-found", "Run not found", f"no run {run_id[:80]!r}")
    return run_id


def job_of(q: RunQueue, run_id: str) -> ServiceRun:
    """The queued run ``run_id``, or a 404."""
    job = q.get(check_run_id(run_id))
    if job is None:
        raise Problem(404, "run-not-found", "Run not found", f"no run {run_id!r}")
    return job


def run_view(settings: ServiceSettings, q: RunQueue, job: ServiceRun, *, detail: bool) -> RunOut:
    """``job`` as the API shows it; ``detail`` adds what the store recorded of the run."""
    base = f"/api/eval/runs/{job.id}"
    # model_construct: the values come from our own store, typed already; validating 50
    # of them per list page was most of the endpoint's time (benchmarks/bench_service.py).
    out = RunOut.model_construct(
        id=job.id,
        status=job.status,
        datasetId=job.dataset_id,
        idempotencyKey=job.idempotency_key,
        request=job.request,
        runKey=job.run_key,
        storeRunId=job.run_id,
        createdAt=job.created_at,
        startedAt=job.started_at,
        finishedAt=job.finished_at,
        claims=job.claims,
        cancelRequested=job.cancel_requested,
        exitCode=job.exit_code,
        passed=None if job.status in ("QUEUED", "RUNNING") else job.exit_code == 0,
        error=settings.public_text(job.error) if job.error else None,
        links={"self": base, "results": f"{base}/results", "page": f"/ui/runs/{job.id}.html"},
    )
    if not detail:
        # exitCode never stands without its decision (a list page, an idempotent replay).
        out.exitDecision = process_decision(settings, job)
        return out
    _add_store_run(settings, q, job, out)
    if job.exit_decision is not None:
        # The decision the worker recorded with the status (schema 11): exitCode is its code.
        out.exitDecision = ExitDecisionDoc.model_validate(settings.public_data(job.exit_decision))
    else:
        # A run ended before schema 11: rebuilt as then (after a run the plugin never began,
        # exit 4, too: exitCode is the decision's code).
        out.exitDecision = _process_decision(job, out.exitDecision, out.error)
    return out


def _add_store_run(settings: ServiceSettings, q: RunQueue, job: ServiceRun, out: RunOut) -> None:
    """What the plugin recorded of the run: protocol, metrics, verdict, artifacts."""
    base = f"/api/eval/runs/{job.id}"
    store_run_id = job.run_id or q.store_run_id(job.run_key)
    if store_run_id is None:
        return
    out.storeRunId = store_run_id
    out.attempts = q.count_attempts(store_run_id)
    row = q.store.get_run(store_run_id)
    if row is not None:
        summary = row.summary or {}
        doc = summary.get(RUN_DOCUMENT) if isinstance(summary, dict) else None
        # The verdict texts the plugin wrote may name files (a baseline, a dataset).
        doc = settings.public_data(doc) if isinstance(doc, dict) else {}
        metrics = summary.get("metrics") if isinstance(summary, dict) else None
        out.protocol = _typed(Protocol, row.protocol)
        out.metrics = _typed(Metrics, metrics)
        out.qualityGate = _typed(GateDoc, doc.get("qualityGate"))
        out.exitDecision = _typed(ExitDecisionDoc, doc.get("exitDecision"))
        out.comparison = _typed(Comparison, doc.get("comparison"))
        out.artifacts = [
            ArtifactOut(
                type=kind,
                path=a.path,
                sha256=a.sha256,
                size=a.size,
                href=f"{base}/artifacts/{kind}",
            )
            for a in q.store.artifacts(store_run_id)
            for kind, name in ARTIFACT_TYPES.items()
            if a.path == name
        ]


def process_decision(settings: ServiceSettings, job: ServiceRun) -> ExitDecisionDoc | None:
    """The exit decision of the run's last pytest process when the store holds no run of it
    (the plugin never began one): what ``exitDecision`` says on the run endpoint."""
    if job.exit_decision is not None:
        return ExitDecisionDoc.model_validate(settings.public_data(job.exit_decision))
    error = settings.public_text(job.error) if job.error else None
    return _process_decision(job, None, error)


def _process_decision(
    job: ServiceRun, recorded: ExitDecisionDoc | None, error: str | None
) -> ExitDecisionDoc | None:
    """For rows ended before schema 11 (no recorded decision), rebuilt as
    :func:`~goldeval.server.run_endings.ended_decision` decides it at the end of a run.

    The exit decision of the run's last pytest process: the one the plugin recorded, unless
    that process ended with another code (a refused resume exits 65 while the store still holds
    the earlier attempt's 75; a failed finalisation recorded none). ``exitCode`` is the
    decision's code, so the two always agree. ``error``: the run's error as the API shows it."""
    code = job.exit_code
    if code is None or job.status not in FINISHED:
        return recorded
    if recorded is not None and recorded.code == code:
        return recorded
    reason = DECISION_LINE.sub("", error or "") or f"pytest exited {code}"
    return ExitDecisionDoc.model_validate({"code": code, "reason": reason})


_DocT = TypeVar("_DocT", bound=BaseModel)


def _typed(model: type[_DocT], value: Any) -> _DocT | None:
    """A part of the recorded run document as its typed model (None when absent)."""
    return model.model_validate(value) if isinstance(value, dict) else None


def results_page(
    settings: ServiceSettings, run_id: str, rows: Sequence[AttemptJson], cursor: str | None
) -> str:
    """``GET .../results`` as JSON text (:class:`ResultPage`'s shape): each stored record
    spliced in undecoded, with no absolute server path (:meth:`ServiceSettings.public_json`)."""
    items = ",".join(settings.public_json(_result_item(r)) for r in rows)
    return f'{{"runId":{_json(run_id)},"items":[{items}],"nextCursor":{_json(cursor)}}}'


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _result_item(row: AttemptJson) -> str:
    """One :class:`ResultOut` as JSON text, its ``record`` the stored JSON spliced in."""
    return (
        f'{{"caseId":{_json(row.case_id)},"attempt":{row.attempt_index},'
        f'"model":{_json(row.record_model or None)},"variant":{_json(row.variant)},'
        f'"status":{_json(row.status)},"record":{row.record}}}'
    )


def own_keys_only(q: RunQueue, runs: list[RunOut], viewer: Principal | None) -> list[RunOut]:
    """``runs`` with each idempotency key shown only to the API key that used it (and to
    ADMIN): another team's keys (a CI build id, say) are not theirs to read."""
    if viewer is None or viewer.role == Role.ADMIN:
        return runs
    keyed = [r.id for r in runs if r.idempotencyKey is not None]
    owners = q.idempotency_owners(keyed)
    for run in runs:
        if run.idempotencyKey is not None and owners.get(run.id) != viewer.owner:
            run.idempotencyKey = None
    return runs
