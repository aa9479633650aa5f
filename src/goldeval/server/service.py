"""What the API does, without the web framework: queue, read, compare, page, cancel, resume,
delete runs. Its parts: :mod:`store_pool`, :mod:`run_requests` (checks before queueing),
:mod:`run_views` (a run as the API shows it), :mod:`artifact_files` (checked artifact reads).

:mod:`goldeval.server.app`'s routers map HTTP onto these functions; everything that decides
something (validation, idempotency, checksums, comparability) lives here and raises
:class:`~goldeval.server.problems.Problem`.
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from goldeval.core.errors import GoldevalError
from goldeval.core.textsafe import safe_text
from goldeval.dataset.rows import discover
from goldeval.reports import site
from goldeval.reports.html import comparison_classes
from goldeval.results.documents import RunDocument, typed_run
from goldeval.server import (
    artifact_files,
    datasets,
    pages,
    run_artifacts,
    run_endings,
    run_page,
    run_requests,
    run_views,
)
from goldeval.server.artifact_files import ARTIFACT_TYPES
from goldeval.server.auth import Principal
from goldeval.server.models import RunOut, RunRequest
from goldeval.server.page_guard import KeySlots, PageCache
from goldeval.server.problems import Problem, validation_problem
from goldeval.server.settings import ServiceSettings
from goldeval.server.store_pool import StorePool
from goldeval.store import LATEST_VERSION, RUN_STATUSES, StoreError
from goldeval.store.base import AttemptKey
from goldeval.store.cursors import cursor_scope, decode_cursor, encode_cursor
from goldeval.store.migrations import ATTEMPT_STATUSES
from goldeval.store.queue import FINISHED, RESUMABLE, RunQueue, ServiceRun
from goldeval.store.views import (
    SIDE_BY_SIDE_VARIANTS,
    VERDICT_KEYS,
    run_document,
    side_by_side_problem,
)
from goldeval.verdict.decide import Verdict, decide_pair, run_dataset_id
from goldeval.verdict.outcome import cut_short
from goldeval.verdict.run_status import resumable

MAX_PAGE = 500


@dataclass
class Created:
    run: RunOut
    created: bool


class Service:
    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        self.pool = StorePool(settings.store_url, settings.pool_size)
        self.page_loads = KeySlots()
        self.page_cache = PageCache()

    # ---- create

    def create(self, body: RunRequest, owner: str = "") -> Created:
        """Queue ``body``; ``owner`` (the caller's :attr:`Principal.owner`) scopes its
        idempotency key."""
        request = run_requests.checked_request(self.settings, body)
        with self.pool.store() as store:
            q = RunQueue(store)
            if body.baselineRunId is not None:
                run_requests.check_baseline(q, body.baselineRunId)
            job, created = q.enqueue(
                uuid.uuid4().hex,
                dataset_id=request["dataset"],
                request=request,
                idempotency_key=body.idempotencyKey,
                owner=owner,
            )
            if not created and run_requests.canonical(job.request) != run_requests.canonical(
                request
            ):
                raise run_requests.key_reused(body.idempotencyKey, job.id)
            return Created(self.view(q, job, detail=False), created)

    # ---- read

    def _job(self, q: RunQueue, run_id: str) -> ServiceRun:
        return run_views.job_of(q, run_id)

    def view(self, q: RunQueue, job: ServiceRun, *, detail: bool) -> RunOut:
        return run_views.run_view(self.settings, q, job, detail=detail)

    def get(self, run_id: str, viewer: Principal | None = None) -> RunOut:
        with self.pool.store() as store:
            q = RunQueue(store)
            return run_views.own_keys_only(
                q, [self.view(q, self._job(q, run_id), detail=True)], viewer
            )[0]

    def list_runs(
        self,
        *,
        dataset: str | None,
        status: str | None,
        since: datetime | None,
        cursor: str | None,
        limit: int,
        viewer: Principal | None = None,
    ) -> tuple[list[RunOut], str | None]:
        errors = []
        if status is not None and status not in RUN_STATUSES:
            errors.append({"field": "status", "message": f"one of {', '.join(RUN_STATUSES)}"})
        if dataset is not None and datasets.check_spec(dataset):
            errors.append({"field": "dataset", "message": str(datasets.check_spec(dataset))})
        before: tuple[datetime, str] | None = None
        scope = cursor_scope("runs", dataset, status, since.isoformat() if since else None)
        if cursor is not None:
            try:
                created, last = decode_cursor(cursor, 2, scope=scope)
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
            items = run_views.own_keys_only(q, items, viewer)
        if len(rows) <= limit:
            return items, None
        last_job = rows[limit - 1]
        return items, encode_cursor(last_job.created_at.isoformat(), last_job.id, scope=scope)

    def results(self, run_id: str, *, status: str | None, cursor: str | None, limit: int) -> str:
        """``GET .../results`` as JSON text (:class:`ResultPage`'s shape): the stored records
        spliced in without decoding them, so a page costs about its SQL (issue 33)."""
        if status is not None and status not in ATTEMPT_STATUSES:
            raise validation_problem(
                [{"field": "status", "message": f"one of {', '.join(ATTEMPT_STATUSES)}"}]
            )
        scope = run_page.attempts_scope(run_id, status)  # the run's id: q.get(run_id) below
        try:
            after = run_page.parse_after(cursor, scope)
        except ValueError as exc:
            raise validation_problem([{"field": "cursor", "message": str(exc)}]) from None
        with self.pool.store() as store:
            q = RunQueue(store)
            job = self._job(q, run_id)
            store_run_id = job.run_id or q.store_run_id(job.run_key)
            rows = (
                store.attempts_page_json(store_run_id, limit=limit + 1, status=status, after=after)
                if store_run_id is not None
                else []
            )
        next_cursor = None
        if len(rows) > limit:
            # Bound to this run and status filter: refused for any other (run_page).
            next_cursor = run_page.attempt_cursor(rows[limit - 1], scope)
        return run_views.results_page(self.settings, job.id, rows[:limit], next_cursor)

    # ---- documents, comparison

    def document(self, q: RunQueue, ref: str) -> tuple[dict[str, Any], ServiceRun | None]:
        """The run.json-shaped document of a service run id (or a store run id / run key)."""
        run_views.check_run_id(ref)
        job = q.get(ref)
        target = job.run_key if job is not None else ref
        try:
            doc = run_document(q.store, target)
        except GoldevalError:
            if job is not None:
                raise Problem(
                    409,
                    "run-not-started",
                    "Run has no results yet",
                    f"run {ref} is {job.status}: nothing graded yet",
                ) from None
            raise Problem(404, "run-not-found", "Run not found", f"no run {ref!r}") from None
        if job is not None and job.status in FINISHED and doc.get("status") == "RUNNING":
            # Its pytest process ended, yet the store never recorded the end: the store failed
            # during the run. The run folder holds the plugin's whole record of it.
            doc = self._folder_record(job, str(doc.get("runId") or "")) or doc
        return doc, job

    def _folder_record(self, job: ServiceRun, store_run_id: str) -> dict[str, Any] | None:
        """The run.json the plugin wrote in the run's folder (run_endings.folder_record)."""
        runs = self.settings.runs_dir.resolve()
        folder = (runs / store_run_id).resolve()
        if not store_run_id or folder.parent != runs:
            return None
        return run_endings.folder_record(folder, store_run_id, job.exit_code)

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
        """``goldeval compare``'s verdict (one function), with this server's manifest policy."""
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
            return decide_pair(
                run, baseline, dataset_dir=dataset_dir, gate_enabled=gate, comparison_asked=True
            )
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
        for doc, ref in ((candidate, run_id), (baseline, baseline_id)):
            problem = side_by_side_problem(doc.get(SIDE_BY_SIDE_VARIANTS), ref)
            if problem is not None:
                raise Problem(409, "variant-session", "Run holds several variants", problem)
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
            raise artifact_files.unknown_type(kind)
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
        return artifact_files.served(self.settings, job, store_run_id, entry, kind)

    # ---- run page

    def page_index(self, before: str | None, caller: Principal) -> str:
        """One page of the run index (:mod:`goldeval.server.pages`), older than ``before``:
        at most ``ui_loads_per_key`` loads per key at once (429 beyond), and from the page cache
        while no run was queued, finished or deleted since it was rendered."""
        try:
            after = pages.parse_before(before)
        except ValueError as exc:
            raise validation_problem([{"field": "before", "message": str(exc)}]) from None
        with self.page_loads.hold(caller.label), self.pool.store() as store:
            q = RunQueue(store)
            # Read before rendering: a run finishing during the render changes the marker, so
            # the page rendered now is never kept past it.
            marker = q.change_marker()
            cached = self.page_cache.get(caller.role.value, before or "", marker)
            if cached is not None:
                return cached
            page, _older = pages.index_page(q, after)
        public = self.settings.public_text(page)
        self.page_cache.put(caller.role.value, before or "", marker, public)
        return public

    def page_run(
        self,
        run_id: str,
        compare_with: str | None,
        caller: Principal,
        *,
        after: str | None = None,
        status: str | None = None,
    ) -> str:
        """A run's page (:mod:`goldeval.server.run_page`): its stored summary and one page of
        its attempts after the ``after`` cursor, of one ``status`` when given."""
        key = run_page.checked_query(after, status, run_id)
        with self.page_loads.hold(caller.label):
            return self.settings.public_text(self._page_run(run_id, compare_with, key, status))

    def _page_run(
        self, run_id: str, compare_with: str | None, after: AttemptKey | None, status: str | None
    ) -> str:
        with self.pool.store() as store:
            q = RunQueue(store)
            job = self._job(q, run_id)
            row = store.get_run(job.run_id or job.run_key)
            if row is None:
                decision = run_views.process_decision(self.settings, job)
                if compare_with is None and decision is not None:
                    # A run the plugin never began (a usage error, a baseline it refused): the
                    # page states the exit decision of its pytest process, as the run endpoint.
                    return site.render_run(run_page.unbegun(job, decision))
                self.document(q, run_id)  # 409: nothing graded yet
                raise AssertionError("unreachable")  # pragma: no cover
            counts = store.attempt_counts(row.run_id)
            doc = run_page.stored_document(row, counts)
            if job.status in FINISHED and row.status == "RUNNING":
                # The store failed during the run: the run folder's run.json decides it.
                recorded = self._folder_record(job, row.run_id)
                doc = {**recorded, "cases": []} if recorded is not None else doc
            comparison, compared = None, None
            if compare_with is not None:
                base_row = run_page.baseline_row(q, compare_with, lambda r: self.document(q, r))
                base_counts = store.attempt_counts(base_row.run_id)
                compared = (compare_with, base_row.run_id)
                if run_page.compared_whole(counts, base_counts):
                    doc = self._whole_comparison(q, run_id, compare_with)
                else:
                    # Too large to decide on a page: the two runs' stored rates side by side
                    # and this page's attempts against the baseline's; the verdict is the
                    # compare endpoint's.
                    doc = {k: v for k, v in doc.items() if k not in VERDICT_KEYS}
                    base = run_page.stored_document(base_row, base_counts)
                    comparison = run_page.summary_comparison(
                        self._typed(doc, run_id),
                        self._typed(base, compare_with),
                        compare_with,
                        run_id,
                    )
            # Paths hidden before rendering too, so "<server path>" is escaped as text.
            typed = self._typed(self.settings.public_data(doc), run_id)
            attempts = run_page.attempts_view(
                store,
                row.run_id,
                run_id=job.id,
                after=after,
                status=status,
                counts=counts,
                classes=comparison_classes(typed),
                compare=compared,
                public=self.settings.public_text,
            )
        return site.render_run(typed, attempts=attempts, comparison=comparison)

    def _whole_comparison(self, q: RunQueue, run_id: str, baseline_ref: str) -> dict[str, Any]:
        """The run page's ``?compare=`` of two small runs: what the compare endpoint answers
        (comparison, gate and exit decision of `goldeval compare`), labelled with the run
        asked for, as the run's document without its cases."""
        whole, _ = self.document(q, run_id)
        baseline, _ = self.document(q, baseline_ref)
        typed = self._typed(whole, run_id)
        verdict = self._verdict(typed, self._typed(baseline, baseline_ref), gate=True)
        whole.update(verdict.run_fields())
        whole["qualityGate"] = verdict.gate.dump() if verdict.gate is not None else None
        whole["baselinePath"] = f"run {baseline_ref}"
        if cut_short(typed, verdict.outcome) is not None:
            # As the compare endpoint: a run cut short is neither compared nor gated.
            whole.pop("comparison", None)
            whole["qualityGate"] = None
        return {**whole, "cases": []}

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
            if job.status not in FINISHED or not resumable(job.status, job.exit_code):
                raise Problem(
                    409,
                    "not-resumable",
                    "Run cannot be resumed",
                    f"run {run_id} is {job.status} (exit {job.exit_code}); only runs that "
                    f"ended 75 (retry) or {', '.join(RESUMABLE)} resume",
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


def _remove_tree(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
