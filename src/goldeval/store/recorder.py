"""The writer of one run into the store, as its attempts arrive (on the controller only).

Knows nothing of pytest: the session (``pytest_plugin.recording``) gives it the store's URL,
the run key, the write policy and where to look up a case's facts; tests drive it directly
against real SQLite and PostgreSQL stores (tests/store/test_recorder.py).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from goldeval.results.attempt_payloads import attempt_entry, has_raw_text, without_raw_text
from goldeval.results.documents import typed_run
from goldeval.results.run_document import RUN_DOCUMENT
from goldeval.results.run_folder import summary as run_summary
from goldeval.results.run_json import RunJson
from goldeval.store import RunStatus, Store, StoreError, open_store, redact_url
from goldeval.store.base import AttemptText
from goldeval.verdict.outcome import RunOutcome
from goldeval.verdict.run_status import run_status

BATCH = 500
BATCH_SECONDS = 1.0

#: Protocol keys a run key's sessions must share. ``selectedCaseIds`` is not one: shards of
#: one run key select different cases on purpose and add up to the run.
_SELECTION_KEYS = frozenset({"selectedCaseIds"})


def open_store_at(url: str | None) -> Store | None:
    """The store at ``url`` (None: no store), creating a store file's folder."""
    if url is None:
        return None
    if "://" not in url:
        Path(url).parent.mkdir(parents=True, exist_ok=True)
    return open_store(url)


def protocol_differences(stored: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """``key: stored -> current`` for every protocol key on which two sessions differ.

    A key missing on one side counts as None (an older store row). The provider of a conftest
    override (``callable:NAME``) is only known once fixtures are resolved, which an xdist
    controller never does: it is compared only when neither side is such an override.
    """
    out = []
    for key in sorted((set(stored) | set(current)) - _SELECTION_KEYS):
        old, new = stored.get(key), current.get(key)
        if key == "provider" and any(str(v).startswith("callable:") for v in (old, new)):
            continue
        if old != new:
            out.append(f"{key}: {old!r} (run key's run) != {new!r} (this session)")
    return out


def mismatch_message(run_key: str, run_id: str, diffs: list[str]) -> str:
    return (
        f"--golden-run-key={run_key} names run {run_id}, recorded under another protocol: "
        + "; ".join(diffs)
        + ". Resume it with the same options, or use a new run key"
    )


class RunRecorder:
    """Controller-side writer of one run into the store."""

    def __init__(
        self,
        url: str | None,
        *,
        run_key: str | None,
        immediate: bool,
        case_info: Callable[[str], dict[str, Any]],
    ) -> None:
        #: The store's URL or file path (None: no store; nothing is recorded).
        self.url = url
        self.run_key = run_key
        #: Write each attempt at once (live and record modes, where a model call is expensive)
        #: instead of in batches.
        self.immediate = immediate
        #: The case facts of a case id, for payloads that do not carry them.
        self.case_info = case_info
        self.store: Store | None = None
        self.run_id: str | None = None
        self.error: str | None = None
        self.pending: list[AttemptText] = []
        self.pending_cases: dict[str, dict[str, Any]] = {}
        self.last_flush = time.monotonic()
        self.resumed = False
        self.began = False
        self.finished = False
        #: Set when begin found the run key's run under another protocol (exit 65).
        self.conflict: str | None = None

    def _fail(self, exc: Exception) -> None:

        self.error = f"run store {redact_url(self.url or '')} failed: {exc}"
        self.pending.clear()

    def begin(
        self,
        protocol: dict[str, Any],
        configuration: dict[str, Any],
        *,
        run_id: str,
        dataset_id: str,
        dataset_hash: str,
        dataset_source: str,
    ) -> str:
        """Create (or, with a run key, resume) the run; return the local run id to use.

        Without a run key, an id that already exists (same millisecond, another process) is
        not a resume: a suffix makes it distinct, and the caller names its folder by it.
        """
        self.began = True
        try:
            self.store = open_store_at(self.url)
            if self.store is None:
                return run_id
            stored = self.store.begin_run(
                run_id,
                run_key=self.run_key,
                dataset_id=dataset_id,
                dataset_hash=dataset_hash,
                mode=protocol["mode"],
                model=protocol.get("model"),
                protocol=protocol,
                configuration=configuration,
                dataset_source=dataset_source,
            )
        except (StoreError, OSError) as exc:
            self._fail(exc)
            return run_id
        if stored.resumed and not self.run_key:
            self.store.close()
            self.store = None
            return self.begin(
                protocol,
                configuration,
                run_id=f"{run_id}-{secrets.token_hex(2)}",
                dataset_id=dataset_id,
                dataset_hash=dataset_hash,
                dataset_source=dataset_source,
            )
        if stored.resumed and self.run_key:
            # preflight checked before the run; another process may have created the key's
            # run since (two shards started together): check again, never mix protocols.
            diffs = protocol_differences(dict(stored.protocol), dict(protocol))
            if diffs:
                self.conflict = mismatch_message(self.run_key, stored.run_id, diffs)
                self.store.close()
                self.store = None
                return run_id
        self.run_id = stored.run_id
        self.resumed = stored.resumed
        return run_id

    def add(self, payload: dict[str, Any]) -> None:
        if self.store is None or self.run_id is None or self.error:
            return
        entry = attempt_entry(payload)
        if entry.case_id not in self.pending_cases:
            case = payload.get("case") or self.case_info(entry.case_id)
            self.pending_cases[entry.case_id] = case
        # Raw model text stays in the run folder artifacts, not in the store. Without it, the
        # record's own layout lets the store split it without a parse (core.record_text).
        content_at = payload.get("contentAt")
        if type(content_at) is int and not has_raw_text(entry.text):
            text, at = entry.text, content_at
        else:
            text, at = without_raw_text(entry.text), 0
        # A variant session's attempts are keyed by variant (two variants may run one model,
        # or none in fixture mode): the attempt's model column holds the variant's name there
        # (docs/variants.md); the record's own ``model`` stays the model.
        self.pending.append(
            AttemptText(
                entry.case_id, entry.index, entry.key, entry.status, text, at, entry.variant
            )
        )
        now = time.monotonic()
        if self.immediate or len(self.pending) >= BATCH or now - self.last_flush > BATCH_SECONDS:
            self.flush()

    def flush(self) -> None:

        if self.store is None or self.run_id is None or self.error:
            return
        try:
            if self.pending_cases or self.pending:
                # One transaction for the batch's cases and attempts: one lock, one commit.
                self.store.record_batch(
                    self.run_id, list(self.pending_cases.values()), self.pending
                )
                self.pending_cases.clear()
                self.pending.clear()
        except (StoreError, OSError) as exc:
            self._fail(exc)
        self.last_flush = time.monotonic()

    def previous_attempts(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Cases and attempts already in the store for this run (a resumed run key)."""

        if self.store is None or self.run_id is None or self.error:
            return [], []
        try:
            return self.store.cases(self.run_id), self.store.attempts(self.run_id)
        except (StoreError, OSError) as exc:
            self._fail(exc)
            return [], []

    def cases_not_run(self) -> list[str]:
        """The selected case ids an earlier session of this resumed run stopped before
        grading (its run document's ``stoppedEarly.casesNotRun``; [] when none)."""
        if self.store is None or self.run_id is None or self.error or not self.resumed:
            return []
        try:
            row = self.store.get_run(self.run_id)
        except (StoreError, OSError) as exc:
            self._fail(exc)
            return []
        summary = row.summary if row is not None and isinstance(row.summary, dict) else {}
        doc = summary.get(RUN_DOCUMENT)
        stopped = doc.get("stoppedEarly") if isinstance(doc, dict) else None
        cases = stopped.get("casesNotRun") if isinstance(stopped, dict) else None
        return [str(c) for c in cases] if isinstance(cases, list) else []

    def finish(self, run: RunJson, inventory: list[dict[str, Any]]) -> None:
        """Record the artifact inventory and the run's final status (once; later calls are
        no-ops). A failure here sets :attr:`error`: the caller must not report success.
        The store stays open until :meth:`close`, so a later failure can still mark the run.
        """

        if self.finished:
            return
        self.flush()
        self.finished = True
        if self.store is None or self.run_id is None or self.error:
            return
        # The status the run document's outcome gives, as run.json and summary.json say it:
        # cut short by -x, the deadline or the budget INCOMPLETE, ended by a signal
        # INTERRUPTED. A run with ERROR attempts is COMPLETED too: that it needs a retry is
        # its exit decision (75), which the service asks (verdict.run_status.resumable).
        typed = typed_run(run)
        status: RunStatus = run_status(RunOutcome.from_run(typed))

        # The same summary as summary.json (counters, rates, gate, exit decision), plus every
        # run-level field of run.json (provider, fingerprint, commit, duration, comparison,
        # notes...): ``goldeval show/export`` rebuild the cases from the stored attempts and
        # must report the same run as run.json, not a reconstruction with blanks.
        summary = run_summary(typed)
        summary[RUN_DOCUMENT] = {k: v for k, v in run.items() if k != "cases"}
        try:
            self.store.record_artifacts(
                self.run_id, [(e["path"], e["sha256"], e["size"]) for e in inventory]
            )
            self.store.finish_run(self.run_id, status, summary)
        except (StoreError, OSError) as exc:
            self._fail(exc)

    def mark_failed(self, status: str, summary: dict[str, Any]) -> bool:
        """Best effort: the run could not be finished (its folder is not a complete record):
        set its status to FAILED or INTERRUPTED, so it is never RUNNING forever nor COMPLETED.
        """
        self.finished = True
        if self.store is None or self.run_id is None:
            return False
        try:
            self.store.finish_run(self.run_id, status, summary)  # type: ignore[arg-type]
        except Exception:  # the store may be what failed; the caller reports the first error
            return False
        return True

    def close(self) -> None:
        store, self.store = self.store, None
        if store is not None:
            try:
                store.close()
            except Exception:
                pass
