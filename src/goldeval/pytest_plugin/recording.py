"""The run store wired to a pytest session: written as it happens, resumable by run key.

* The controller opens the store (SQLite ``.goldeval/goldeval.sqlite3`` by default, or
  ``--golden-store=postgresql://...``), begins the run, and records every attempt as its
  report arrives (each one at once in live/record mode, where a model call is expensive; in
  batches in fixture mode). Nothing but the controller writes, so ``-n 2`` cannot duplicate.
* ``--golden-run-key=KEY`` names one run across processes: a rerun with the same key
  deselects the attempts already graded and the final metrics are computed over every attempt
  of the run. An ERROR attempt is not a verdict: a rerun retries those a retry may fix (the
  ones that made the run exit 75) by default, and with ``--golden-rerun-errors`` every ERROR
  attempt, also those no identical retry fixes (exit 4: after the configuration was fixed).
  When a session ends 75, the terminal names the command that retries it
  (goldeval.pytest_plugin.retry).
* If the store fails mid-run, the session keeps going, keeps its local artifacts, and exits 75.
* Before anything runs (:func:`preflight`), the controller checks what it can check cheaply: a
  store file that is not a usable SQLite store, or a run key of another dataset, is a usage
  error (exit 4); a run key whose run was recorded under another protocol (mode, attempts,
  model, provider, judge, dataset hash, grader configuration) is refused with exit 65 naming
  every differing key. Resuming under another protocol would mix two experiments in one run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from goldeval.core.errors import GoldevalError, is_retryable
from goldeval.pytest_plugin.protocol import early_protocol

if TYPE_CHECKING:
    from goldeval.pytest_plugin.state import GoldenSession
    from goldeval.store import Store
    from goldeval.store.recorder import RunRecorder

# The store (sqlite3, psycopg, the schema migrations) is imported by the functions below that
# open it, not at the top: listing items or a session that records nothing never loads it,
# and at 10,000 rows it was a quarter of the plugin's share of a collection's memory
# (docs/performance.md).


class ProtocolMismatch(Exception):
    """The run key's stored run was recorded under another protocol (exit 65)."""


def _is_file_store(url: str) -> bool:
    return "://" not in url or url.lower().startswith("sqlite://")


def preflight(state: GoldenSession) -> None:
    """Check the store and the run key before anything runs (controller only).

    Raises ``pytest.UsageError`` for a store file that cannot be used (garbage, a newer
    schema, no permission) and for a run key of another dataset; :class:`ProtocolMismatch`
    for a run key recorded under another protocol. An unreachable PostgreSQL server is left
    to the run (infrastructure: the session keeps its artifacts and exits 75).
    """
    from goldeval.store import StoreError, store_file
    from goldeval.store.recorder import mismatch_message, protocol_differences

    url = store_url(state)
    if url is None:
        return
    key = state.settings.run_key
    path = store_file(url)
    if path is not None and not path.exists():
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
    from goldeval.store.recorder import open_store_at

    return open_store_at(store_url(state))


def session_recorder(state: GoldenSession) -> RunRecorder:
    """The run store writer of this session (controller only)."""
    from goldeval.store.recorder import RunRecorder

    return RunRecorder(
        store_url(state),
        run_key=state.settings.run_key,
        immediate=state.settings.mode.value != "fixture",
        case_info=state.collector.info,
    )


def begin_recording(state: GoldenSession, recorder: RunRecorder) -> None:
    """Begin the session's run in the store; the run id may gain a suffix (see
    :meth:`RunRecorder.begin`), which the session then uses for its folder too."""
    ds = state.load()
    protocol, configuration = early_protocol(state)
    state.run_id = recorder.begin(
        protocol,
        configuration,
        run_id=state.run_id,
        dataset_id=ds.id,
        dataset_hash=ds.hash,
        dataset_source=str(ds.rows_path),
    )


def already_graded(state: GoldenSession) -> set[tuple[str, int, str]]:
    """Keys of the attempts an earlier session of ``--golden-run-key`` settled (any process):
    every PASS, FAIL and SKIPPED attempt, and the ERROR attempts no retry fixes unless
    ``--golden-rerun-errors`` asks for them too. The others are run again: "retry" (exit 75)
    must mean that the rerun retries what failed, not that it deselects it and ends 75 again.
    """

    key = state.settings.run_key
    if not key:
        return set()
    from goldeval.store import StoreError

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
        settled = store.graded_keys(row.run_id, include_errors=False)
        if state.settings.rerun_errors:
            return settled
        errors = store.graded_keys(row.run_id, include_errors=True) - settled
        if not errors:
            return settled  # the usual case: no record is read
        return settled | (errors & _permanent_errors(store.attempts(row.run_id)))
    except (StoreError, OSError):
        return set()
    finally:
        store.close()


def _permanent_errors(attempts: list[dict[str, Any]]) -> set[tuple[str, int, str]]:
    """Keys of the stored ERROR attempts whose kind no identical retry fixes (exit 4)."""
    return {
        (
            str(a.get("caseId")),
            int(a.get("index") or 0),
            str(a.get("variant") or a.get("model") or ""),
        )
        for a in attempts
        if a.get("status") == "ERROR" and not is_retryable(a.get("errorKind"))
    }
