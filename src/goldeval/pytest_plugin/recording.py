"""The run store wired to a pytest session: written as it happens, resumable by run key.

* The controller opens the store (SQLite ``.goldeval/goldeval.sqlite3`` by default, or
  ``--golden-store=postgresql://...``), begins the run, and records every attempt as its
  report arrives (each one at once in live/record mode, where a model call is expensive; in
  batches in fixture mode). Nothing but the controller writes, so ``-n 2`` cannot duplicate.
* ``--golden-run-key=KEY`` names one run across processes: a rerun with the same key
  deselects the attempts already graded (all of them, or all but ERROR ones with
  ``--golden-rerun-errors``) and the final metrics are computed over every attempt of the run.
* If the store fails mid-run, the session keeps going, keeps its local artifacts, and exits 75.
* Before anything runs (:func:`preflight`), the controller checks what it can check cheaply: a
  store file that is not a usable SQLite store, or a run key of another dataset, is a usage
  error (exit 4); a run key whose run was recorded under another protocol (mode, attempts,
  model, provider, judge, dataset hash, grader configuration) is refused with exit 65 naming
  every differing key. Resuming under another protocol would mix two experiments in one run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goldeval.core.errors import GoldevalError
from goldeval.pytest_plugin.protocol import early_protocol
from goldeval.results.run_document import RUN_DOCUMENT, attempt_entry, without_raw_text
from goldeval.results.run_folder import summary as run_summary
from goldeval.store import StoreError, open_store, redact_url

if TYPE_CHECKING:
    from goldeval.pytest_plugin.state import GoldenSession
    from goldeval.store import Store
    from goldeval.store.base import AttemptText

BATCH = 500
BATCH_SECONDS = 1.0

#: Protocol keys a run key's sessions must share. ``selectedCaseIds`` is not one: shards of
#: one run key select different cases on purpose and add up to the run.
_SELECTION_KEYS = frozenset({"selectedCaseIds"})


class ProtocolMismatch(Exception):
    """The run key's stored run was recorded under another protocol (exit 65)."""


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


def _is_file_store(url: str) -> bool:
    return "://" not in url or url.lower().startswith("sqlite://")


def preflight(state: GoldenSession) -> None:
    """Check the store and the run key before anything runs (controller only).

    Raises ``pytest.UsageError`` for a store file that cannot be used (garbage, a newer
    schema, no permission) and for a run key of another dataset; :class:`ProtocolMismatch`
    for a run key recorded under another protocol. An unreachable PostgreSQL server is left
    to the run (infrastructure: the session keeps its artifacts and exits 75).
    """
    import pytest

    url = store_url(state)
    if url is None:
        return
    key = state.settings.run_key
    if _is_file_store(url):
        path = Path(url.split("://", 1)[1][1:] if "://" in url else url)
        if not path.exists():
            return  # created on first use: nothing recorded under any key yet
    try:
        store = open_session_store(state)
    except (StoreError, OSError) as exc:
        if not _is_file_store(url):
            return
        raise pytest.UsageError(
            f"run store {url} is not a usable goldeval store: {exc}. Move the file away, "
            "or pass --golden-store=PATH (or none)"
        ) from None
    if store is None:
        return
    try:
        if not key:
            return
        try:
            row = store.get_run(key)
        except (StoreError, OSError) as exc:
            if not _is_file_store(url):
                return
            raise pytest.UsageError(f"run store {url} cannot be read: {exc}") from None
        if row is None or row.run_key != key:
            return
        try:
            ds = state.load()
        except GoldevalError:
            return  # collection reports the dataset problem
        if row.dataset_id != ds.id:
            raise pytest.UsageError(
                f"--golden-run-key={key} belongs to run {row.run_id} of dataset "
                f"{row.dataset_id}, not {ds.id}: use another run key for this dataset"
            )

        diffs = protocol_differences(row.protocol, early_protocol(state)[0])
        if diffs:
            raise ProtocolMismatch(mismatch_message(key, row.run_id, diffs))
    finally:
        store.close()


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
        #: Set when begin found the run key's run under another protocol (exit 65).
        self.conflict: str | None = None

    def _fail(self, exc: Exception) -> None:

        url = store_url(self.state) or ""
        self.error = f"run store {redact_url(url)} failed: {exc}"
        self.pending.clear()

    def begin(self, protocol: dict[str, Any], configuration: dict[str, Any]) -> None:

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
        if stored.resumed and self.state.settings.run_key:
            # preflight checked before the run; another process may have created the key's
            # run since (two shards started together): check again, never mix protocols.
            diffs = protocol_differences(dict(stored.protocol), dict(protocol))
            if diffs:
                self.conflict = mismatch_message(self.state.settings.run_key, stored.run_id, diffs)
                self.store.close()
                self.store = None
                return
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

        if self.finished:
            return
        self.flush()
        self.finished = True
        if self.store is None or self.run_id is None or self.error:
            return
        status = {"COMPLETED": "COMPLETED", "INTERRUPTED": "INTERRUPTED"}.get(
            str(run.get("status")), "FAILED"
        )
        if run.get("stoppedEarly"):
            status = "INTERRUPTED"  # unfinished, not failed: resume it with the run key
        if run.get("attemptsError"):
            status = "FAILED" if status == "COMPLETED" else status

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
