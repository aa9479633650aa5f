"""What the API does, without the web framework: store access, run views, artifacts.

:mod:`goldeval.server.app` maps HTTP onto these functions; everything that decides something
(validation, idempotency, checksums, comparability) lives here and raises
:class:`~goldeval.server.problems.Problem`.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import shutil
import stat
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from goldeval.core.errors import GoldevalError
from goldeval.core.safe_files import read_fd
from goldeval.core.textsafe import safe_text
from goldeval.dataset.rows import discover
from goldeval.reports import site
from goldeval.results.documents import (
    Comparison,
    ExitDecisionDoc,
    GateDoc,
    Metrics,
    Protocol,
    RunDocument,
    typed_run,
)
from goldeval.results.run_document import RUN_DOCUMENT
from goldeval.server import datasets, pages, run_artifacts
from goldeval.server.models import ArtifactOut, ResultOut, RunOut, RunRequest
from goldeval.server.problems import Problem, validation_problem
from goldeval.server.settings import RUN_ID, ServiceSettings
from goldeval.store import LATEST_VERSION, RUN_STATUSES, Store, StoreError, open_store
from goldeval.store.queue import (
    FINISHED,
    RESUMABLE,
    RunQueue,
    ServiceRun,
    decode_cursor,
    encode_cursor,
)
from goldeval.store.views import run_document
from goldeval.verdict.decide import Verdict, decide_pair, run_dataset_id
from goldeval.verdict.outcome import cut_short

#: Artifact types (the seed's names) → their path in the run's artifact inventory: a file of
#: the run folder the plugin writes, or one the worker adds (:mod:`run_artifacts`).
ARTIFACT_TYPES: dict[str, str] = {
    "JSON_SUMMARY": "summary.json",
    "RUN_JSON": "run.json",
    "REPORT_MD": "report.md",
    "COMPARISON": "comparison.json",
    **run_artifacts.SERVICE_ARTIFACTS,
}
MEDIA_TYPES = {
    ".json": "application/json",
    ".md": "text/markdown; charset=utf-8",
    ".xml": "application/xml",
    ".html": "text/html; charset=utf-8",
    ".zip": "application/zip",
}
ATTEMPT_STATUSES = ("PASS", "FAIL", "SKIPPED", "ERROR")
MAX_PAGE = 500
#: Artifacts larger than this are refused rather than read into memory to be checked.
MAX_ARTIFACT_BYTES = 256 * 1024 * 1024


class StorePool:
    """Up to ``size`` open stores shared by the request threads (one connection each)."""

    def __init__(self, url: str, size: int) -> None:
        self.url = url
        self.size = max(1, size)
        self._idle: queue.LifoQueue[Store] = queue.LifoQueue()
        self._opened = 0
        self._lock = threading.Lock()

    @contextmanager
    def store(self) -> Iterator[Store]:
        store: Store | None = None
        try:
            store = self._idle.get_nowait()
        except queue.Empty:
            with self._lock:
                fresh = self._opened < self.size
                if fresh:
                    self._opened += 1
            if fresh:
                try:
                    store = open_store(self.url)
                except BaseException:
                    with self._lock:
                        self._opened -= 1
                    raise
            else:
                store = self._idle.get(timeout=60)
        healthy = True
        try:
            yield store
        except StoreError:
            healthy = False
            raise
        finally:
            if healthy:
                self._idle.put(store)
            else:
                with self._lock:
                    self._opened -= 1
                try:
                    store.close()
                except StoreError:
                    pass

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return


def check_run_id(run_id: str, what: str = "run id") -> str:
    if not RUN_ID.match(run_id):
        raise Problem(404, "run-not-found", "Run not found", f"no run {run_id[:80]!r}")
    return run_id


def _canonical(request: dict[str, Any]) -> str:
    return json.dumps(request, sort_keys=True, separators=(",", ":"))


@dataclass
class Created:
    run: RunOut
    created: bool


class Service:
    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        self.pool = StorePool(settings.store_url, settings.pool_size)

    # ---- create

    def create(self, body: RunRequest, owner: str = "") -> Created:
        """Queue ``body``; ``owner`` (the caller's :attr:`Principal.owner`) scopes its
        idempotency key."""
        settings = self.settings
        spec, version = body.dataset_spec()
        model, provider = body.model_and_provider()
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
                    "message": "only 'default' exists: graders and gate come from the dataset "
                    "manifest",
                }
            )
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
        request: dict[str, Any] = {
            "dataset": resolved.id,
            "mode": body.mode,
            "attempts": body.attempts,
            "model": model,
            "provider": provider,
            "baselineRunId": body.baselineRunId,
            "deadlineSeconds": body.deadlineSeconds,
            "noGate": body.noGate,
        }
        with self.pool.store() as store:
            q = RunQueue(store)
            if body.baselineRunId is not None:
                self._check_baseline(q, body.baselineRunId)
            job, created = q.enqueue(
                uuid.uuid4().hex,
                dataset_id=resolved.id,
                request=request,
                idempotency_key=body.idempotencyKey,
                owner=owner,
            )
            if not created and _canonical(job.request) != _canonical(request):
                raise Problem(
                    409,
                    "idempotency-key-reused",
                    "Idempotency key already used",
                    f"idempotency key {body.idempotencyKey!r} belongs to run {job.id}, created "
                    "with another request; use a new key for a different run",
                    runId=job.id,
                )
            return Created(self.view(q, job, detail=False), created)

    @staticmethod
    def _check_baseline(q: RunQueue, ref: str) -> None:
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

    # ---- read

    def _job(self, q: RunQueue, run_id: str) -> ServiceRun:
        job = q.get(check_run_id(run_id))
        if job is None:
            raise Problem(404, "run-not-found", "Run not found", f"no run {run_id!r}")
        return job

    def view(self, q: RunQueue, job: ServiceRun, *, detail: bool) -> RunOut:
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
            error=self.settings.public_text(job.error) if job.error else None,
            links={"self": base, "results": f"{base}/results", "page": f"/ui/runs/{job.id}.html"},
        )
        if not detail:
            return out
        self._add_store_run(q, job, out)
        # After a run the plugin never began (exit 4), too: exitCode is the decision's code.
        out.exitDecision = _process_decision(job, out.exitDecision, out.error)
        return out

    def _add_store_run(self, q: RunQueue, job: ServiceRun, out: RunOut) -> None:
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
            doc = self.settings.public_data(doc) if isinstance(doc, dict) else {}
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

    def get(self, run_id: str) -> RunOut:
        with self.pool.store() as store:
            q = RunQueue(store)
            return self.view(q, self._job(q, run_id), detail=True)

    def list_runs(
        self,
        *,
        dataset: str | None,
        status: str | None,
        since: datetime | None,
        cursor: str | None,
        limit: int,
    ) -> tuple[list[RunOut], str | None]:
        errors = []
        if status is not None and status not in RUN_STATUSES:
            errors.append({"field": "status", "message": f"one of {', '.join(RUN_STATUSES)}"})
        if dataset is not None and datasets.check_spec(dataset):
            errors.append({"field": "dataset", "message": str(datasets.check_spec(dataset))})
        before: tuple[datetime, str] | None = None
        if cursor is not None:
            try:
                created, last = decode_cursor(cursor, 2)
                before = (datetime.fromisoformat(created), last)
            except ValueError as exc:
                errors.append({"field": "cursor", "message": str(exc)})
        if errors:
            raise validation_problem(errors)
        with self.pool.store() as store:
            q = RunQueue(store)
            rows = q.page(
                limit=limit + 1, dataset_id=dataset, status=status, since=since, before=before
            )
            items = [self.view(q, job, detail=False) for job in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            last_job = rows[limit - 1]
            next_cursor = encode_cursor(last_job.created_at.isoformat(), last_job.id)
        return items, next_cursor

    def results(
        self, run_id: str, *, status: str | None, cursor: str | None, limit: int
    ) -> tuple[str, list[ResultOut], str | None]:
        if status is not None and status not in ATTEMPT_STATUSES:
            raise validation_problem(
                [{"field": "status", "message": f"one of {', '.join(ATTEMPT_STATUSES)}"}]
            )
        after: tuple[str, int, str] | None = None
        if cursor is not None:
            try:
                case_id, index, model = decode_cursor(cursor, 3)
                after = (case_id, int(index), model)
            except ValueError as exc:
                raise validation_problem([{"field": "cursor", "message": str(exc)}]) from None
        with self.pool.store() as store:
            q = RunQueue(store)
            job = self._job(q, run_id)
            store_run_id = job.run_id or q.store_run_id(job.run_key)
            if store_run_id is None:
                return job.id, [], None
            rows = q.results(store_run_id, limit=limit + 1, status=status, after=after)
        items = [
            ResultOut(
                caseId=r.case_id,
                attempt=r.index,
                model=r.model or None,
                status=r.status,
                record=r.record,
            )
            for r in rows[:limit]
        ]
        next_cursor = None
        if len(rows) > limit:
            last = rows[limit - 1]
            next_cursor = encode_cursor(last.case_id, str(last.index), last.model)
        return job.id, items, next_cursor

    # ---- documents, comparison

    def document(self, q: RunQueue, ref: str) -> tuple[dict[str, Any], ServiceRun | None]:
        """The run.json-shaped document of a service run id (or a store run id / run key)."""
        check_run_id(ref)
        job = q.get(ref)
        target = job.run_key if job is not None else ref
        try:
            return run_document(q.store, target), job
        except GoldevalError:
            if job is not None:
                raise Problem(
                    409,
                    "run-not-started",
                    "Run has no results yet",
                    f"run {ref} is {job.status}: nothing graded yet",
                ) from None
            raise Problem(404, "run-not-found", "Run not found", f"no run {ref!r}") from None

    def _typed(self, doc: dict[str, Any], ref: str) -> RunDocument:
        """A stored run's document typed once, where it enters the verdict; 409 when a field
        has the wrong type (the field named)."""
        try:
            return typed_run(doc, f"run {ref}")
        except GoldevalError as exc:
            raise Problem(
                409,
                "run-document-invalid",
                "The run document cannot be read",
                self.settings.public_text(safe_text(exc)),
            ) from None

    def _verdict(self, run: RunDocument, baseline: RunDocument, *, gate: bool) -> Verdict:
        """``goldeval compare``'s verdict on ``run`` against ``baseline``: the same function,
        with the gate policy of the run's dataset manifest in this server's datasets folder."""
        dataset_id = run_dataset_id(run)
        dataset_dir = discover(self.settings.datasets).get(dataset_id) if dataset_id else None
        if gate and dataset_dir is None:
            raise Problem(
                409,
                "no-gate-policy",
                "The run's gate policy is unknown",
                f"dataset {dataset_id!r} of this run is not in this server's datasets folder, so "
                "its manifest's gate policy is unknown; add noGate=true to compare without "
                "gating",
            )
        try:
            return decide_pair(run, baseline, dataset_dir=dataset_dir, gate_enabled=gate)
        except GoldevalError as exc:
            raise Problem(
                409,
                "no-gate-policy",
                "The run's gate policy cannot be read",
                f"{self.settings.public_text(safe_text(exc))}; fix the manifest, or add "
                "noGate=true to compare without gating",
            ) from None

    def compare(self, run_id: str, baseline_id: str, *, gate: bool = True) -> dict[str, Any]:
        """The comparison document with the gate attached, the exit decision, and the two
        runs as asked for (``runId``, ``comparedWith``): ``goldeval compare --json``'s
        comparison, qualityGate and exitDecision for the same two runs."""
        with self.pool.store() as store:
            q = RunQueue(store)
            self._job(q, run_id)
            candidate, _ = self.document(q, run_id)
            baseline, _ = self.document(q, baseline_id)
        typed = self._typed(candidate, run_id)
        verdict = self._verdict(typed, self._typed(baseline, baseline_id), gate=gate)
        result = verdict.comparison
        assert result is not None  # a baseline was given
        decision = {"code": verdict.code, "reason": self.settings.public_text(verdict.reason)}
        cut = cut_short(typed, verdict.outcome)
        if cut is not None:
            # As `goldeval compare`: a run cut short (-x, a signal, the store) is a part of
            # its selection, so it is neither compared nor gated; the one verdict says why.
            return {
                "decision": None,
                "cutShort": {"status": cut.status, "reason": self.settings.public_text(cut.reason)},
                "qualityGate": None,
                "exitDecision": decision,
                "runId": run_id,
                "comparedWith": baseline_id,
            }
        if not result.valid:
            reasons = list(result.invalid_reasons) or [
                f"{d.key}: {d.baseline} != {d.candidate}" for d in result.protocol_differences
            ]
            raise Problem(
                409,
                "not-comparable",
                "Runs are not comparable",
                "; ".join(reasons),
                reasons=reasons,
                comparison=result.dump(),
                exitDecision=decision,
                runId=run_id,
                comparedWith=baseline_id,
            )
        return {
            **result.dump(),
            "qualityGate": verdict.gate.dump() if verdict.gate is not None else None,
            "exitDecision": decision,
            "cutShort": None,
            "runId": run_id,
            "comparedWith": baseline_id,
        }

    # ---- artifacts

    def artifact(self, run_id: str, kind: str) -> tuple[bytes, str, str]:
        """(content, media type, file name) after checking size and SHA-256 against the
        inventory the plugin recorded. 409 when the file differs or is missing."""
        if kind not in ARTIFACT_TYPES:
            raise Problem(
                404,
                "unknown-artifact-type",
                "Unknown artifact type",
                f"{kind[:40]!r} is not an artifact type; types: {', '.join(ARTIFACT_TYPES)}",
            )
        name = ARTIFACT_TYPES[kind]
        with self.pool.store() as store:
            q = RunQueue(store)
            job = self._job(q, run_id)
            store_run_id = job.run_id or q.store_run_id(job.run_key)
            entries = {a.path: a for a in q.store.artifacts(store_run_id)} if store_run_id else {}
        entry = entries.get(name)
        if entry is None or store_run_id is None:
            raise Problem(
                404,
                "artifact-not-found",
                "Artifact not found",
                f"run {job.id} has no {kind} ({name}) in its artifact inventory"
                + ("" if job.status not in ("QUEUED", "RUNNING") else f" yet ({job.status})"),
            )
        runs_root = self.settings.runs_dir.resolve()
        run_folder = Path(job.run_dir) if job.run_dir else runs_root / store_run_id
        file, folder = run_artifacts.locate(name, run_folder, self.settings.work_dir, job.id)
        root = runs_root if folder == run_folder else self.settings.work_dir.resolve()
        path = file.resolve()
        if not path.is_relative_to(root) or path.parent != folder.resolve():
            raise Problem(
                409,
                "artifact-outside-runs",
                "Artifact is not in this server's runs folder",
                f"{kind} of run {job.id} is not under {root}; serve it from the machine "
                "that ran it, or point --runs at the shared runs folder",
            )
        data = _read_regular(path, job.id, kind, entry.size)
        digest = hashlib.sha256(data).hexdigest()
        if digest != entry.sha256 or len(data) != entry.size:
            raise Problem(
                409,
                "artifact-checksum-mismatch",
                "Artifact does not match its checksum",
                f"{name} of run {job.id} was changed after the run recorded it: inventory "
                f"sha256 {entry.sha256[:16]}… ({entry.size} bytes), on disk {digest[:16]}… "
                f"({len(data)} bytes). It is not served; `goldeval verify` checks the whole "
                "folder",
                expectedSha256=entry.sha256,
                actualSha256=digest,
            )
        media = MEDIA_TYPES.get(Path(name).suffix, "application/octet-stream")
        return data, media, f"{store_run_id}-{Path(name).name}"

    # ---- run page

    def page_index(self, before: str | None) -> str:
        """One page of the run index (:mod:`goldeval.server.pages`), older than ``before``."""
        try:
            after = pages.parse_before(before)
        except ValueError as exc:
            raise validation_problem([{"field": "before", "message": str(exc)}]) from None
        with self.pool.store() as store:
            page, _older = pages.index_page(RunQueue(store), after)
        return self.settings.public_text(page)

    def page_run(self, run_id: str, compare_with: str | None) -> str:
        with self.pool.store() as store:
            q = RunQueue(store)
            self._job(q, run_id)
            doc, _ = self.document(q, run_id)
            baseline = self.document(q, compare_with)[0] if compare_with else None
        if compare_with and baseline is not None:
            # The page shows what the compare endpoint answers: comparison, gate and exit
            # decision of `goldeval compare`, labelled with the run asked for.
            typed = self._typed(doc, run_id)
            verdict = self._verdict(typed, self._typed(baseline, compare_with), gate=True)
            doc.update(verdict.run_fields())
            doc["qualityGate"] = verdict.gate.dump() if verdict.gate is not None else None
            doc["baselinePath"] = f"run {compare_with}"
            if cut_short(typed, verdict.outcome) is not None:
                # As the compare endpoint: a run cut short is neither compared nor gated.
                doc.pop("comparison", None)
                doc["qualityGate"] = None
        return self.settings.public_text(site.render_run(doc))

    # ---- admin

    def cancel(self, run_id: str, by: str = "") -> RunOut:
        with self.pool.store() as store:
            q = RunQueue(store)
            self._job(q, run_id)
            job = q.request_cancel(run_id, by)
            assert job is not None
            return self.view(q, job, detail=False)

    def resume(self, run_id: str) -> RunOut:
        with self.pool.store() as store:
            q = RunQueue(store)
            job = self._job(q, run_id)
            if job.status not in RESUMABLE:
                raise Problem(
                    409,
                    "not-resumable",
                    "Run cannot be resumed",
                    f"run {run_id} is {job.status}; only {', '.join(RESUMABLE)} runs resume",
                )
            again = q.requeue(run_id)
            assert again is not None
            return self.view(q, again, detail=False)

    def delete(self, run_id: str) -> None:
        with self.pool.store() as store:
            q = RunQueue(store)
            job = self._job(q, run_id)
            if not q.delete(run_id):
                raise Problem(
                    409,
                    "run-active",
                    "Run is not finished",
                    f"run {run_id} is {job.status}: cancel it first",
                )
        if job.run_id:
            folder = (self.settings.runs_dir / job.run_id).resolve()
            if folder.parent == self.settings.runs_dir.resolve() and folder.is_dir():
                _remove_tree(folder)
        evidence = run_artifacts.evidence_dir(self.settings.work_dir, job.id)
        if evidence.is_dir():
            _remove_tree(evidence)

    # ---- health

    def readiness(self) -> dict[str, Any]:
        checks: dict[str, Any] = {}
        try:
            with self.pool.store() as store:
                version = store.schema_version()
            checks["store"] = "ok"
            checks["schemaVersion"] = version
            checks["migrations"] = (
                "applied"
                if version == LATEST_VERSION
                else (f"schema {version}, this server needs {LATEST_VERSION}")
            )
        except StoreError as exc:
            checks["store"] = self.settings.public_text(safe_text(exc))
        checks["datasets"] = "ok" if self.settings.datasets.is_dir() else "missing"
        return checks


def _read_regular(path: Path, run_id: str, kind: str, expected: int) -> bytes:
    """The bytes of a regular file, never following a final symlink."""
    try:
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise Problem(
            409,
            "artifact-missing",
            "Artifact file is missing",
            f"{path.name} of run {run_id} is in the inventory but not on disk",
        ) from None
    except OSError as exc:
        raise Problem(
            409,
            "artifact-unreadable",
            "Artifact cannot be read",
            f"{path.name} of run {run_id}: {exc.strerror}",
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Problem(
                409,
                "artifact-unreadable",
                "Artifact is not a regular file",
                f"{path.name} of run {run_id} is not a regular file",
            )
        if info.st_size > MAX_ARTIFACT_BYTES or info.st_size > expected + 1024 * 1024:
            raise Problem(
                409,
                "artifact-checksum-mismatch",
                "Artifact does not match its checksum",
                f"{path.name} of run {run_id} is {info.st_size} bytes, the inventory says "
                f"{expected}: it was changed after the run; it is not served",
            )
        return read_fd(fd)
    finally:
        os.close(fd)


_DECISION_LINE = re.compile(r"^goldeval decision: exit -?\d+ — ")


def _process_decision(
    job: ServiceRun, recorded: ExitDecisionDoc | None, error: str | None
) -> ExitDecisionDoc | None:
    """The exit decision of the run's last pytest process: the one the plugin recorded, unless
    that process ended with another code (a refused resume exits 65 while the store still holds
    the earlier attempt's 75; a failed finalisation recorded none). ``exitCode`` is the
    decision's code, so the two always agree. ``error``: the run's error as the API shows it."""
    code = job.exit_code
    if code is None or job.status not in FINISHED:
        return recorded
    if recorded is not None and recorded.code == code:
        return recorded
    reason = _DECISION_LINE.sub("", error or "") or f"pytest exited {code}"
    return ExitDecisionDoc.model_validate({"code": code, "reason": reason})


_DocT = TypeVar("_DocT", bound=BaseModel)


def _typed(model: type[_DocT], value: Any) -> _DocT | None:
    """A part of the recorded run document as its typed model (None when absent)."""
    return model.model_validate(value) if isinstance(value, dict) else None


def _remove_tree(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
