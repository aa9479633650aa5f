"""The run store wired to a pytest session: written as it happens, resumable by run key.

* The controller opens the store (SQLite ``.goldeval/goldeval.sqlite3`` by default, or
  ``--golden-store=postgresql://...``), begins the run, and records every attempt as its
  report arrives (each one at once in live/record mode, where a model call is expensive; in
  batches in fixture mode). Nothing but the controller writes, so ``-n 2`` cannot duplicate.
* ``--golden-run-key=KEY`` names one run across processes: a rerun with the same key
  deselects the attempts already graded (all of them, or all but ERROR ones with
  ``--golden-rerun-errors``) and the final metrics are computed over every attempt of the run.
* If the store fails mid-run, the session keeps going, keeps its local artifacts, and exits 75.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goldeval.run import attempt_entry, without_raw_text

if TYPE_CHECKING:
    from goldeval.session import GoldenSession
    from goldeval.store import Store
    from goldeval.store.base import AttemptText

BATCH = 500
#: Key, in a finished run's stored summary, of its run.json minus ``cases``.
RUN_DOCUMENT = "runDocument"
BATCH_SECONDS = 1.0


def store_url(state: GoldenSession) -> str | None:
    url = state.settings.store
    if url is None:
        return str(state.project_root / ".goldeval" / "goldeval.sqlite3")
    if url.lower() in ("none", "off", ""):
        return None
    if "://" not in url and not Path(url).is_absolute():
        # --golden-store typed on the command line: relative to where pytest was started;
        # GOLDEVAL_STORE: relative to the project root, as the `goldeval` commands read it.
        typed = state.config.getoption("golden_store", default=None)
        base = state.config.invocation_params.dir if typed else state.project_root
        return str(Path(base) / url)
    return url


def open_session_store(state: GoldenSession) -> Store | None:
    from goldeval.store import open_store

    url = store_url(state)
    if url is None:
        return None
    if "://" not in url:
        Path(url).parent.mkdir(parents=True, exist_ok=True)
    return open_store(url)


class RunRecorder:
    """Controller-side writer of one run into the store."""

    def __init__(self, state: GoldenSession) -> None:
        self.state = state
        self.store: Store | None = None
        self.run_id: str | None = None
        self.error: str | None = None
        self.pending: list[AttemptText] = []
        self.pending_cases: dict[str, dict[str, Any]] = {}
        self.last_flush = time.monotonic()
        self.immediate = state.settings.mode.value != "fixture"
        self.resumed = False
        self.began = False
        self.finished = False

    def _fail(self, exc: Exception) -> None:
        from goldeval.store import redact_url

        url = store_url(self.state) or ""
        self.error = f"run store {redact_url(url)} failed: {exc}"
        self.pending.clear()

    def begin(self, protocol: dict[str, Any], configuration: dict[str, Any]) -> None:
        from goldeval.store import StoreError

        self.began = True
        ds = self.state.load()
        try:
            self.store = open_session_store(self.state)
            if self.store is None:
                return
            stored = self.store.begin_run(
                self.state.run_id,
                run_key=self.state.settings.run_key,
                dataset_id=ds.id,
                dataset_hash=ds.hash,
                mode=protocol["mode"],
                model=protocol.get("model"),
                protocol=protocol,
                configuration=configuration,
                dataset_source=str(ds.rows_path),
            )
        except (StoreError, OSError) as exc:
            self._fail(exc)
            return
        if stored.resumed and not self.state.settings.run_key:
            # Same second, another process, no key: not a resume. Take a distinct id.
            import secrets

            self.state.run_id = f"{self.state.run_id}-{secrets.token_hex(2)}"
            self.store.close()
            self.store = None
            return self.begin(protocol, configuration)
        self.run_id = stored.run_id
        self.resumed = stored.resumed

    def add(self, payload: dict[str, Any]) -> None:
        if self.store is None or self.run_id is None or self.error:
            return
        entry = attempt_entry(payload)
        if entry.case_id not in self.pending_cases:
            case = payload.get("case") or self.state.collector.info(entry.case_id)
            self.pending_cases[entry.case_id] = case
        # Raw model text stays in the run folder artifacts, not in the store.
        self.pending.append(
            (entry.case_id, entry.index, entry.model, entry.status, without_raw_text(entry.text))
        )
        now = time.monotonic()
        if self.immediate or len(self.pending) >= BATCH or now - self.last_flush > BATCH_SECONDS:
            self.flush()

    def flush(self) -> None:
        from goldeval.store import StoreError

        if self.store is None or self.run_id is None or self.error:
            return
        try:
            if self.pending_cases:
                self.store.record_cases(self.run_id, list(self.pending_cases.values()))
                self.pending_cases.clear()
            if self.pending:
                self.store.record_attempt_texts(self.run_id, self.pending)
                self.pending.clear()
        except (StoreError, OSError) as exc:
            self._fail(exc)
        self.last_flush = time.monotonic()

    def previous_attempts(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Cases and attempts already in the store for this run (a resumed run key)."""
        from goldeval.store import StoreError

        if self.store is None or self.run_id is None or self.error:
            return [], []
        try:
            return self.store.cases(self.run_id), self.store.attempts(self.run_id)
        except (StoreError, OSError) as exc:
            self._fail(exc)
            return [], []

    def finish(self, run: dict[str, Any], inventory: list[dict[str, Any]]) -> None:
        """Record the artifact inventory and the run's final status (once; later calls are
        no-ops). A failure here sets :attr:`error`: the caller must not report success.
        The store stays open until :meth:`close`, so a later failure can still mark the run.
        """
        from goldeval.store import StoreError

        if self.finished:
            return
        self.flush()
        self.finished = True
        if self.store is None or self.run_id is None or self.error:
            return
        status = {"COMPLETED": "COMPLETED", "INTERRUPTED": "INTERRUPTED"}.get(
            str(run.get("status")), "FAILED"
        )
        if run.get("attemptsError"):
            status = "FAILED" if status == "COMPLETED" else status
        from goldeval.artifacts import summary as run_summary

        # The same summary as summary.json (counters, rates, gate, exit decision), plus every
        # run-level field of run.json (provider, fingerprint, commit, duration, comparison,
        # notes...): ``goldeval show/export`` rebuild the cases from the stored attempts and
        # must report the same run as run.json, not a reconstruction with blanks.
        summary = run_summary(run)
        summary[RUN_DOCUMENT] = {k: v for k, v in run.items() if k != "cases"}
        try:
            self.store.record_artifacts(
                self.run_id, [(e["path"], e["sha256"], e["size"]) for e in inventory]
            )
            self.store.finish_run(self.run_id, status, summary)  # type: ignore[arg-type]
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


def already_graded(state: GoldenSession) -> set[tuple[str, int, str]]:
    """Keys of attempts graded in an earlier session of ``--golden-run-key`` (any process)."""
    from goldeval.store import StoreError

    key = state.settings.run_key
    if not key:
        return set()
    try:
        store = open_session_store(state)
    except (StoreError, OSError):
        return set()
    if store is None:
        return set()
    try:
        row = store.get_run(key)
        if row is None:
            return set()
        return store.graded_keys(row.run_id, include_errors=not state.settings.rerun_errors)
    except (StoreError, OSError):
        return set()
    finally:
        store.close()
