"""One run document built from the collected attempts (``build_for``) and committed to its
folder (``write_run``): artifacts durable, the store's final status, the manifest, LATEST and
history, in that order (goldeval.results.finalise undoes them on a failure).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from goldeval.core.models import Mode
from goldeval.core.settings import RunSettings
from goldeval.pytest_plugin.protocol import protocol_for, variant_protocol
from goldeval.pytest_plugin.state import GoldenSession
from goldeval.pytest_plugin.variant_providers import settings_of
from goldeval.reports import markdown as report_md
from goldeval.reports.variant_charts import pass_at_k_svg
from goldeval.results import run_folder as artifacts
from goldeval.results.documents import typed_run
from goldeval.results.evidence import inventory, write_manifest
from goldeval.results.finalise import FinalisationError
from goldeval.results.run_document import (
    build_run,
    config_fingerprint,
    git_commit,
    new_run_id,
    project_relative,
    write_run_json,
)
from goldeval.results.run_json import RunJson


def build_for(
    state: GoldenSession, model: str | None, interrupted: bool, *, multi: bool
) -> tuple[RunJson, Path]:
    only = model if multi else None
    selected = state.collector.case_ids(only)
    ds = state.load()
    s = state.settings
    live = s.mode is not Mode.FIXTURE
    out_dir = s.out_dir
    run_id = state.run_id
    recorder = state.recorder
    if model is not None and multi:
        # Side by side: a run (and folder) per model or variant, also when a run key resumes
        # the session's stored run, which holds them all.
        run_id = new_run_id(out_dir, state.started)
    elif recorder is not None and recorder.run_id and recorder.resumed:
        run_id = recorder.run_id  # the resumed run keeps its identity (and its folder)
    protocol = protocol_for(state, selected)
    variant = state.variant_name(model)
    if variant is not None:
        # The collector's key is the variant's name; the run records the model it asked for,
        # on its own provider when it names one.
        model = state.label_model(variant)
        protocol.update(variant_protocol(state, variant))
        s = dataclasses.replace(s, provider=settings_of(state, variant))
        if live and variant in state.variants.providers:  # type: ignore[union-attr]
            protocol["provider"] = s.provider.name
    model = (model or s.provider.model) if live else None
    protocol["model"] = model
    red_ids = {x.id for x in ds.cases if x.red}
    include_red = any(case_id in red_ids for case_id in selected)
    judge_model = protocol["judgeModel"]
    configuration = _configuration(s, model, protocol, include_red, state.project_root)
    identity = _identity(state, model, protocol, include_red, configuration["provider"])
    run_status, extra = _status(state, interrupted)
    judge_errors = 0
    served: set[str] = set()

    fin = state.finalisation

    def on_case(case: dict[str, Any]) -> None:
        nonlocal judge_errors
        judge_errors += sum(1 for a in case["attempts"] if (a.get("judge") or {}).get("error"))
        served.update(a["servedModel"] for a in case["attempts"] if a.get("servedModel"))
        fin.unsynced += len(artifacts.write_case(run_dir, case, s.artifacts))

    # A folder of its own, created exclusively (a clash draws a new id); a run key's folder
    # is shared by its sessions and written by one process at a time (flock).
    shared = bool(s.run_key) or (recorder is not None and recorder.resumed)
    run_id, run_dir = fin.open_run_dir(
        out_dir, run_id, shared=shared, new_id=lambda: new_run_id(out_dir, state.started)
    )
    cases_file = fin.cases_files[run_dir]
    run = build_run(
        run_id=run_id,
        started=state.started,
        duration_ms=round((time.monotonic() - state.started_monotonic) * 1000),
        # Released as they are rolled up: run.json and the artifacts are the record from here.
        cases=state.collector.iter_cases(only, release=True),
        cases_file=cases_file,
        on_case=on_case,
        protocol=protocol,
        configuration={k: v for k, v in configuration.items() if v is not None},
        identity=identity,
        status=run_status,
        extra=extra,
    )
    block = run.get("configuration")
    if isinstance(block, dict):
        block.update(served_model_fields(served))
    if protocol["judgeEnabled"]:
        run["judgeErrors"] = judge_errors
        if judge_model and judge_model == model:
            run["judgeSelfPreference"] = True
            run.setdefault("notes", []).append(
                f"judge model {judge_model} is the generator model: self-preference risk"
            )
    return run, run_dir


def _configuration(
    s: RunSettings,
    model: str | None,
    protocol: dict[str, Any],
    include_red: bool,
    project_root: Path,
) -> dict[str, Any]:
    """The run's ``configuration`` block (None values are left out by the caller)."""
    live = s.mode is not Mode.FIXTURE
    return {
        "mode": s.mode.protocol_name,
        "goldenMode": s.mode.value,
        "model": model,
        "judgeModel": protocol["judgeModel"],
        "judgeEnabled": protocol["judgeEnabled"],
        "repetitions": s.attempts,
        "includeRed": include_red,
        "artifactMode": s.artifacts.upper(),
        "outputDir": project_relative(s.out_dir, project_root),
        "provider": s.provider.name if live else "fixture",
        "providerSettings": s.provider.public() if live else None,
        "experimentId": s.experiment,
        "concurrency": s.concurrency if live else None,
        "deadlineSeconds": s.deadline,
    }


def _identity(
    state: GoldenSession,
    model: str | None,
    protocol: dict[str, Any],
    include_red: bool,
    provider: str,
) -> dict[str, Any]:
    """What identifies the run for comparisons: dataset, pack, commit and the fingerprint of
    the configuration that decides comparability."""
    ds = state.load()
    s = state.settings
    judge_model = protocol["judgeModel"]
    commit = git_commit(state.project_root)
    fingerprint = config_fingerprint(
        {
            "artifactMode": "omitted",
            "datasetHash": ds.hash,
            "datasetVersion": ds.id,
            "experimentId": s.experiment,
            "gitCommit": commit,
            "includeRed": include_red,
            "judgeEnabled": protocol["judgeEnabled"],
            "judgeModel": judge_model or "off",
            "mode": s.mode.protocol_name,
            "model": model,
            "packDatasetVersion": ds.pack.version if ds.pack else None,
            "packHash": ds.pack.hash if ds.pack else None,
            "provider": provider,
            "repetitions": s.attempts,
        }
    )
    return {
        "model": model,
        "judgeModel": judge_model,
        "datasetVersion": ds.id,
        "packDatasetVersion": ds.pack.version if ds.pack else None,
        "datasetHash": ds.hash,
        "packHash": ds.pack.hash if ds.pack else None,
        "gitCommit": commit,
        "experimentId": s.experiment,
        "configFingerprint": fingerprint,
    }


def _status(state: GoldenSession, interrupted: bool) -> tuple[str, dict[str, Any]]:
    """The run's status and the fields that say why it is incomplete."""
    incomplete = state.skipped_by_deadline > 0 or state.skipped_by_budget > 0 or interrupted
    run_status = "INTERRUPTED" if interrupted else ("INCOMPLETE" if incomplete else "COMPLETED")
    extra: dict[str, Any] = {}
    if interrupted:
        # Before the gate is evaluated: its ``complete`` rule fails, so no label of an
        # interrupted run says its gate passed.
        extra["incomplete"] = True
    if state.skipped_by_deadline:
        extra["incomplete"] = True
        extra["notStartedBeforeDeadline"] = state.skipped_by_deadline
    if state.skipped_by_budget:
        extra["incomplete"] = True
        extra["notStartedOverBudget"] = state.skipped_by_budget
    if state.adaptive is not None:
        extra["adaptiveAttempts"] = state.adaptive.dump()
    return run_status, extra


def served_model_fields(served: set[str]) -> dict[str, Any]:
    """The models the servers said answered, for the run's configuration: ``servedModel``
    when they all named one, ``servedModels`` when several, nothing when none did. The
    protocol's ``model`` stays the name asked for, so runs and baselines keep comparing as
    before."""
    if not served:
        return {}
    if len(served) == 1:
        return {"servedModel": next(iter(served))}
    return {"servedModels": sorted(served)}


def write_run(state: GoldenSession, run: RunJson, run_dir: Path) -> Path:
    """Commit a built run: every artifact durable, then the store's final status, then the
    manifest (the folder's commit record), then LATEST and one history line.

    Any failure propagates; :meth:`Controller.pytest_sessionfinish` then rolls back what this
    process recorded (see :mod:`goldeval.results.finalise`) and exits INFRA.
    """

    fin = state.finalisation
    fin.runs[run_dir] = run
    out_dir = state.settings.out_dir
    # run.json is written from the JSON built (key order kept); what reads it takes it typed.
    typed = typed_run(run, run_dir / "run.json")
    artifacts.atomic_write(run_dir / "summary.json", artifacts.dumps(artifacts.summary(typed)))
    artifacts.atomic_write(run_dir / "report.md", report_md.render(typed))
    variants = typed.variant_comparison
    chart = pass_at_k_svg(variants.pass_at_k) if variants is not None else None
    if chart is not None:  # report.md links it
        artifacts.atomic_write(run_dir / "pass-at-k.svg", chart)
    if run.get("comparison"):
        artifacts.atomic_write(run_dir / "comparison.json", artifacts.dumps(run["comparison"]))
    cases_file = fin.cases_files.pop(run_dir)
    write_run_json(run_dir / "run.json", run, cases_file)
    fin.drop_temp(cases_file)
    fin.sync()
    fin.clear_stale_temps(run_dir)
    entries = inventory(run_dir)
    state.artifact_inventory = entries
    recorder = state.recorder
    if recorder is not None and recorder.run_id == run["runId"] and not recorder.finished:
        had_error = recorder.error
        recorder.finish(run, entries)
        if recorder.error and not had_error:
            raise FinalisationError(recorder.error)
    write_manifest(run_dir, run["runId"], entries)
    fin.committed(run_dir)
    point_latest(state, run, run_dir)
    fin.history.append(artifacts.append_history(out_dir, typed))
    fin.release(run_dir)
    state.run_dir = run_dir
    return run_dir


def point_latest(state: GoldenSession, run: RunJson, run_dir: Path) -> None:
    """Point LATEST at a committed run (undone with the rest on a finalisation fault). An
    early stop (-x, --maxfail) or a rerun plugin's run is no finished run to point at."""
    unfinished = run.get("stoppedEarly") or run.get("duplicateAttempts")
    if run.get("status") in ("COMPLETED", "INCOMPLETE") and not unfinished:
        out_dir = state.settings.out_dir
        ours = (str(run_dir.resolve()) + "\n").encode("utf-8")
        previous = artifacts.write_latest(out_dir, run_dir)
        state.finalisation.latest.append((out_dir / "LATEST", previous, ours))
