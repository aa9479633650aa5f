"""A run request checked before it is queued: the server's limits (attempts, live mode,
cases), the dataset resolved, the baseline present, an idempotency key not reused for another
request. Every refusal is a :class:`~goldeval.server.problems.Problem` naming the field."""

from __future__ import annotations

import json
from typing import Any

from goldeval.core.errors import GoldevalError
from goldeval.core.textsafe import safe_text
from goldeval.server import datasets
from goldeval.server.models import RunRequest
from goldeval.server.problems import Problem, validation_problem
from goldeval.server.settings import RUN_ID, ServiceSettings
from goldeval.store.queue import RunQueue


def canonical(request: dict[str, Any]) -> str:
    """The request as compared for idempotency: key order and spacing do not matter."""
    return json.dumps(request, sort_keys=True, separators=(",", ":"))


def _option_errors(
    settings: ServiceSettings, body: RunRequest, model: str | None, provider: str | None
) -> list[dict[str, str]]:
    """The options this server refuses, one ``{field, message}`` each."""
    errors: list[dict[str, str]] = []
    if body.attempts > settings.max_attempts:
        errors.append(
            {
                "field": "attempts",
                "message": f"{body.attempts} attempts is more than this server allows "
                f"({settings.max_attempts})",
            }
        )
    if body.mode == "live" and not settings.allow_live:
        errors.append({"field": "mode", "message": "live runs are disabled on this server"})
    if body.mode == "fixture" and (model or provider):
        errors.append(
            {
                "field": "model",
                "message": "fixture mode replays recorded answers: a model or provider "
                "applies to live mode only",
            }
        )
    if body.scoringProfile not in (None, "default"):
        errors.append(
            {
                "field": "scoringProfile",
                "message": "only 'default' exists: graders and gate come from the dataset manifest",
            }
        )
    return errors


def checked_request(settings: ServiceSettings, body: RunRequest) -> dict[str, Any]:
    """The request to queue (its ``dataset`` the resolved dataset id), or a 422."""
    spec, version = body.dataset_spec()
    model, provider = body.model_and_provider()
    errors = _option_errors(settings, body, model, provider)
    if errors:
        raise validation_problem(errors)
    try:
        resolved = datasets.resolve(settings, spec, version)
    except GoldevalError as exc:
        raise validation_problem(
            [{"field": "dataset", "message": safe_text(exc)}], safe_text(exc)
        ) from None
    if settings.max_cases is not None and resolved.cases > settings.max_cases:
        raise validation_problem(
            [
                {
                    "field": "dataset",
                    "message": f"{resolved.id} has {resolved.cases} cases, more than this "
                    f"server runs at once ({settings.max_cases})",
                }
            ]
        )
    variants = _checked_variants(body.variants, resolved.variants)
    running = variants or list(resolved.variants)
    if body.mode == "fixture":
        try:
            datasets.check_fixtures(resolved, running)
        except GoldevalError as exc:
            raise validation_problem(
                [{"field": "dataset", "message": safe_text(exc)}], safe_text(exc)
            ) from None
    if body.baselineRunId and len(running) > 1:
        raise validation_problem(
            [
                {
                    "field": "baselineRunId",
                    "message": f"{len(running)} variants run side by side, each against its "
                    "own baseline: a baselineRunId names one run; pick one variant "
                    "(variants: [NAME]) or leave baselineRunId out",
                }
            ]
        )
    return {
        **({"variants": variants} if variants else {}),
        "dataset": resolved.id,
        "mode": body.mode,
        "attempts": body.attempts,
        "model": model,
        "provider": provider,
        "baselineRunId": body.baselineRunId,
        "deadlineSeconds": body.deadlineSeconds,
        "noGate": body.noGate,
    }


def _checked_variants(wanted: list[str] | None, declared: tuple[str, ...]) -> list[str] | None:
    """``variants`` of the request, each declared by the dataset's manifest (a 422 naming
    the first that is not), duplicates dropped; None: all declared ones run."""
    if not wanted:
        return None
    for name in wanted:
        if name not in declared:
            known = ", ".join(declared) if declared else "none: the manifest has no variants"
            raise validation_problem(
                [{"field": "variants", "message": f"no variant {name!r} (declared: {known})"}]
            )
    return list(dict.fromkeys(wanted))


def check_baseline(q: RunQueue, ref: str) -> None:
    """422 unless ``ref`` is a service run, a store run id or a run key of this store."""
    if RUN_ID.match(ref) and (q.get(ref) is not None or q.store.get_run(ref) is not None):
        return
    raise validation_problem(
        [
            {
                "field": "baselineRunId",
                "message": f"no run {ref[:80]!r} in the store: give the id of a run of "
                "this service, or a store run id or run key",
            }
        ]
    )


def key_reused(idempotency_key: str | None, run_id: str) -> Problem:
    """The 409 for an idempotency key already used by ``run_id`` with another request."""
    return Problem(
        409,
        "idempotency-key-reused",
        "Idempotency key already used",
        f"idempotency key {idempotency_key!r} belongs to run {run_id}, created "
        "with another request; use a new key for a different run",
        runId=run_id,
    )
