"""Controller side: fold reports into the run, then metrics → comparison → gate → exit.

Registered only in the controller process (serial run or xdist controller), so the exit
status and the artifacts are decided exactly once.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from goldeval.core.errors import BaselineError, ConfigError, DatasetError, GoldevalError
from goldeval.core.models import Mode
from goldeval.core.safe_files import read_regular_file
from goldeval.core.textsafe import one_line
from goldeval.pipeline.attempt import case_facts
from goldeval.providers.fixture import dumps_sidecar, fixture_path, recordable_attempt, sidecar_path
from goldeval.pytest_plugin.collection import crash_message, thread_timeout_hint
from goldeval.pytest_plugin.decision import (
    decide,
    preflight,
    preflight_baseline_file,
    save_requested_baseline,
)
from goldeval.pytest_plugin.ending import (
    SessionEnding,
    apply_exit,
    record_ending,
    session_ending,
)
from goldeval.pytest_plugin.params import is_golden_nodeid, param_of, parse_golden_nodeid
from goldeval.pytest_plugin.protocol import protocol_for
from goldeval.pytest_plugin.recording import ProtocolMismatch, begin_recording
from goldeval.pytest_plugin.recording import preflight as preflight_store
from goldeval.pytest_plugin.state import PAYLOAD_ATTR, RERUN_KIND, GoldenSession
from goldeval.reports import markdown as report_md
from goldeval.results import run_folder as artifacts
from goldeval.results.documents import typed_run
from goldeval.results.evidence import inventory, write_manifest
from goldeval.results.finalise import FAULT_KEY, FinalisationError, finalisation
from goldeval.results.run_document import (
    build_run,
    config_fingerprint,
    git_commit,
    new_run_id,
    write_run_json,
)
from goldeval.results.run_folder import ArtifactError
from goldeval.verdict.comparison import comparison_label
from goldeval.verdict.exit_codes import (
    ExitDecision,
    decide_exit,
    refused_before_run,
    worst,
)
from goldeval.verdict.outcome import FinalisationFault, RunOutcome


class Controller:
    def __init__(self, state: GoldenSession) -> None:
        self.state = state
        self.lost_items: list[str] = []
        #: The pre-flight refused the run before any item ran: nothing to record or decide.
        self.refused = False
        self.preflown = False
        #: the one-line reason when finishing the run failed (see finalisation_failed)
        self.final_error: str | None = None
        #: Golden items selected for this session (None: not known, e.g. collection failed).
        self.expected: int | None = None
        #: Attempts reported more than once (a rerun or repeat plugin), as "case attempt N".
        self.duplicates: list[str] = []
        #: What ended the run loop early, if anything (KeyboardInterrupt, pytest.exit, ...).
        self.interrupt: BaseException | None = None
        self.worker_pids: list[int] = []
        #: Collection errors (serial, or forwarded by xdist from its workers).
        self.collection_errors = 0
        self.session: pytest.Session | None = None
        state.on_signal.append(self._forward_signal)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.collection_errors += 1

    # -- pre-flight: refused before the first model call -------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Before anything runs (and before xdist starts its workers): a broken store or a run
        # key of another dataset is a usage error, another protocol under the key is 65; a
        # missing --golden-baseline is a usage error, a damaged one 65. Listing items
        # (--collect-only) runs nothing, reads no store and compares nothing.
        self.session = session
        if session.config.option.collectonly:
            return
        try:
            preflight_store(self.state)
        except ProtocolMismatch as exc:
            self._refuse(session.config, refused_before_run(str(exc)))
        try:
            preflight_baseline_file(self.state)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
        except BaselineError as exc:
            if exc.message.startswith("comparison invalid"):
                self._refuse(
                    session.config, refused_before_run(f"{exc.message} (baseline {exc.path})")
                )
            self._refuse(session.config, refused_before_run(f"baseline rejected: {exc}"))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # Serial runs only: an xdist controller does not collect (see the hook below).

        params = [param_of(item) for item in session.items]
        self.expected = sum(1 for p in params if p is not None)
        self._preflight(session.config, sorted({p.case.id for p in params if p is not None}))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # Called before xdist schedules anything; every worker collects the same items, so
        # the first worker's list is the selection.
        if self.expected is None:
            self.expected = sum(1 for nodeid in ids if is_golden_nodeid(nodeid))
        selected: set[str] | None = set()
        for nodeid in ids:
            if not is_golden_nodeid(nodeid):
                continue
            parsed = parse_golden_nodeid(nodeid)
            if parsed is None or selected is None:
                selected = None
                continue
            selected.add(parsed[0])
        self._preflight(node.config, None if selected is None else sorted(selected))

    def _preflight(self, config: pytest.Config, selected: list[str] | None) -> None:
        # Listing items or showing the set-up plan calls no model: nothing to refuse.
        if self.preflown or config.option.collectonly or config.getoption("setupplan", False):
            return
        self.preflown = True

        try:
            reason = preflight(self.state, selected)
        except (ConfigError, DatasetError) as exc:
            self.refused = True
            raise pytest.UsageError(str(exc)) from None
        except BaselineError as exc:
            self._refuse(config, refused_before_run(f"baseline rejected: {exc}"))
        if reason is not None:
            self._refuse(config, refused_before_run(reason))
        if builtin_provider_answers(self.session):
            refused = self.state.model_refusal()
            if refused is not None:
                self.refused = True
                raise pytest.UsageError(refused)

    def _refuse(self, config: pytest.Config, decision: ExitDecision) -> None:
        """End the session before any item ran: the only exit status set before a run."""
        self.refused = True
        line = (
            f"goldeval decision: exit {decision.code} — {decision.reason} (refused before any "
            "item ran); to run this selection anyway, report without gating (--golden-no-gate) "
            "or capture a baseline for it (--golden-save-baseline=PATH)"
        )
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line, red=True, bold=True)
        pytest.exit(decision.reason, returncode=decision.code)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodeready(self, node: Any) -> None:
        # execnet caches the worker's sys info (pid included) when xdist sets the node up.
        info = getattr(getattr(node, "gateway", None), "_cache_rinfo", None)
        pid = getattr(info, "pid", None)
        if isinstance(pid, int) and pid != os.getpid():
            self.worker_pids.append(pid)

    def _forward_signal(self, signum: int) -> None:
        """SIGTERM reached the controller: workers stop making model calls at once too."""
        for pid in self.worker_pids:
            try:
                os.kill(pid, signum)
            except OSError:
                pass

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        self.interrupt = excinfo.value

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, PAYLOAD_ATTR, None)
        if report.failed and not is_golden_nodeid(report.nodeid):
            self.state.other_failures += 1
        if payload is not None and self._is_rerun(payload):
            delattr(report, PAYLOAD_ATTR)
            return  # the first report of the attempt stays; the run is refused at the end
        if payload is None and report.failed and is_golden_nodeid(report.nodeid):
            payload = lost_item_payload(self.state, report)
        if payload is not None:
            if payload.get("status") == "SKIPPED" and '"skipReason":"budget"' in str(
                payload.get("record") or ""
            ):
                self.state.skipped_by_budget += 1  # from this process or an xdist worker
            self.state.collector.add(payload)
            recorder = self.state.recorder
            if recorder is not None:
                if not recorder.began:
                    begin_recording(self.state, recorder)
                recorder.add(payload)
            # Folded into the run; pytest keeps every report until the end, so drop the copy.
            if hasattr(report, PAYLOAD_ATTR):
                delattr(report, PAYLOAD_ATTR)

    def _is_rerun(self, payload: dict[str, Any]) -> bool:
        """A second report of one attempt (pytest-repeat, a rerun plugin): never overwrite."""
        case_id = payload.get("caseId")
        if case_id is None:
            return False
        key = (payload.get("model") or "", int(payload.get("index") or 0))
        seen = key in self.state.collector.attempts.get(str(case_id), {})
        rerun = payload.get("status") == "ERROR" and f'"errorKind":"{RERUN_KIND}"' in str(
            payload.get("record") or ""
        )
        if seen or rerun:
            model = f" model {key[0]}" if key[0] else ""
            self.duplicates.append(f"{case_id} attempt {key[1]}{model}")
        return seen

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # Listing items is not a run: nothing recorded, exit status untouched.
        if self.refused or session.config.option.collectonly:
            self.state.close()
            return
        state = self.state
        fin = finalisation(state)
        recorder = state.recorder
        # Ctrl-C or SIGTERM while the run is written would leave half a run folder: the
        # write is short, so it finishes first and the signal is reported afterwards.
        with deferred_signals() as received:
            try:
                finish_session(state, session, self)
                if recorder is not None and recorder.began and not recorder.finished:
                    # Paths that wrote no single run of the store's id (models side by side,
                    # nothing to write): the store run still gets a final status, never
                    # RUNNING.
                    had_error = recorder.error
                    recorder.finish(state.run or {"status": "FAILED"}, state.artifact_inventory)
                    if recorder.error and not had_error:
                        raise FinalisationError(recorder.error)
                fin.release_all()
            except (OSError, ArtifactError, FinalisationError) as exc:
                # Finalisation is infrastructure: a full disk, a folder in LATEST's place, a
                # store that fails at the end. One line and exit 75, not a traceback and exit 1.
                self.final_error = finalisation_failed(state, session, exc)
            except BaseException as exc:
                # A bug: still never leave a green-looking record behind, then let pytest
                # show it.
                finalisation_failed(state, session, exc)
                raise
            finally:
                if recorder is not None:
                    if recorder.began and recorder.error and not recorder.finished:
                        recorder.mark_failed("INTERRUPTED", {})
                    recorder.close()
        if received:
            names = ", ".join(signal.Signals(s).name for s in received)
            sys.stderr.write(
                f"goldeval: {names} arrived while the run was being written; the write was "
                "completed first\n"
            )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.final_error is not None:
            terminalreporter.write_line(f"goldeval: error: {self.final_error}", red=True, bold=True)
            return
        print_summary(self.state, terminalreporter)


def builtin_provider_answers(session: pytest.Session | None) -> bool:
    """Whether the plugin's own ``golden_provider`` fixture answers the golden items (no
    conftest overrides it with the team's own app, whose model names are its business).

    Serial runs ask for the first golden item's definitions (no public API lists them;
    pinned by tests/unit/test_pytest_internals.py); an xdist controller collects nothing and
    looks at the plugins and conftest modules it loaded (the rootdir's conftest.py among
    them; a conftest only the workers load is not seen: documented in docs/reliability.md).
    """
    manager = getattr(session, "_fixturemanager", None)
    if session is None or manager is None:
        return False
    items = [item for item in getattr(session, "items", ()) if param_of(item) is not None]
    if items:
        found = manager.getfixturedefs("golden_provider", items[0])
        defs = list(found or ())[-1:]  # the one the item uses
        return bool(defs) and all(
            getattr(getattr(d, "func", None), "__module__", None) == _PLUGIN_FIXTURES for d in defs
        )
    # An xdist controller has parsed no fixtures: any plugin or conftest module it loaded
    # (the rootdir's conftest.py among them) that defines golden_provider overrides ours.
    return not any(
        getattr(plugin, "golden_provider", None) is not None
        and getattr(plugin, "__name__", None) != _PLUGIN_FIXTURES
        for plugin in session.config.pluginmanager.get_plugins()
    )


#: The module of the plugin's own fixtures (golden_provider among them).
_PLUGIN_FIXTURES = "goldeval.pytest_plugin.hooks"


@contextmanager
def deferred_signals() -> Iterator[list[int]]:
    """Hold SIGINT and SIGTERM for the duration of the block; yields the signals received.

    Used around the run's finalisation: a signal there used to leave ``.cases.*.jsonl.tmp``
    and no run.json. The write goes on to the end; the caller reports what arrived. A no-op
    outside the main thread (where handlers cannot be set).
    """
    import threading

    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def hold(signum: int, frame: Any) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def lost_item_payload(state: GoldenSession, report: pytest.TestReport) -> dict[str, Any] | None:
    """An item whose report carries no record (its xdist worker crashed, say): ERROR.

    Every selected item must be part of the run; a lost one is infrastructure, not a FAIL.
    """
    parsed = parse_golden_nodeid(report.nodeid)
    if parsed is None:
        return None
    case_id, index, model = parsed
    try:
        case = state.case(case_id)
    except GoldevalError:
        return None
    if case is None:
        return None

    # pytest's crash message (xdist's "worker 'gw0' crashed while running ...", a plugin's
    # own text), not the last line of a traceback.
    message = crash_message(report)[:300] + thread_timeout_hint(state.config)
    return {
        "case": case_facts(case),
        "attempt": {
            "caseId": case.id,
            "index": index,
            "status": "ERROR",
            # The run's model identity, as every other attempt of the session carries it.
            "model": model or state.settings.provider.model,
            "errorKind": "WORKER_CRASH",
            "errorMessage": message,
            "durationMs": 0,
        },
    }


def merge_previous(state: GoldenSession) -> None:
    """A resumed run key: fold the attempts graded in earlier sessions into this run."""
    recorder = state.recorder
    if recorder is None:
        return
    if not recorder.began:
        begin_recording(state, recorder)
    if not recorder.resumed:
        return
    recorder.flush()
    cases, attempts = recorder.previous_attempts()
    infos = {c["caseId"]: c for c in cases}
    have = {(cid, m, i) for cid, per in state.collector.attempts.items() for (m, i) in per}
    for attempt in attempts:
        key = (attempt["caseId"], attempt.get("model") or "", int(attempt["index"]))
        info = infos.get(attempt["caseId"])
        if key in have or info is None:
            continue
        state.collector.add({"case": info, "attempt": attempt})


def finish_session(
    state: GoldenSession, session: pytest.Session, controller: Controller | None = None
) -> None:
    """Build, decide, write and record the run; set the exit status from the one verdict."""
    state.close()
    if session.config.option.collectonly:
        return  # listing items is not a run: nothing recorded, exit status untouched
    if session.exitstatus in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR):
        return
    ending = session_ending(
        state,
        session,
        interrupt=controller.interrupt if controller is not None else None,
        expected=controller.expected if controller is not None else None,
        duplicates=list(controller.duplicates) if controller is not None else [],
    )
    if not len(state.collector) and session.exitstatus == pytest.ExitCode.INTERRUPTED:
        nothing_to_record = (
            ending.interrupted
            or controller is None
            or controller.expected is None
            or controller.collection_errors
        )
        if nothing_to_record:
            # Collection errors, or stopped before any attempt: nothing to record; a signal
            # before any attempt was graded is still infrastructure (retry).
            if ending.signal:
                outcome = RunOutcome(pytest_status=ending.pytest_status, **ending.outcome_facts())
                decision = decide_exit(outcome)
                apply_exit(session, decision)
                state.unrecorded_decision = (decision.code, decision.reason)
            return
    if state.dataset is None:
        try:
            state.load()  # an xdist controller does not collect: load identity here
        except GoldevalError:
            return
    merge_previous(state)
    if state.settings.mode is Mode.RECORD:
        state.recorded = record_fixtures(state)
    models = state.collector.models()
    if len(models) > 1:
        finish_side_by_side(state, session, ending, models)
    else:
        finish_one_run(state, session, ending, models[0] if models else None)


def finish_side_by_side(
    state: GoldenSession, session: pytest.Session, ending: SessionEnding, models: list[str]
) -> None:
    """Several models side by side: one run per model, reported together, never gated."""
    decisions = []
    state.benchmark = []
    for model in models:
        run, run_dir = build_for(state, model, ending.interrupted, multi=True)
        run.setdefault("notes", []).append(
            "models side by side (--golden-models): no baseline, no gate"
        )
        outcome = RunOutcome.from_run(
            typed_run(run), pytest_status=ending.pytest_status, **ending.outcome_facts()
        )
        decision = decide_exit(outcome)
        record_ending(run, ending, decision)
        write_run(state, run, run_dir)
        state.benchmark.append(run)
        decisions.append(decision)
    overall = worst(decisions, "models side by side")
    state.exit_reason = overall.reason
    state.run = {**state.benchmark[0], "exitDecision": overall._asdict()}
    apply_exit(session, overall)


def finish_one_run(
    state: GoldenSession, session: pytest.Session, ending: SessionEnding, model: str | None
) -> None:
    """One run: built, decided (with the store's facts), written, recorded, maybe saved."""
    run, run_dir = build_for(state, model, ending.interrupted, multi=False)
    recorder = state.recorder
    resumed_all = (
        ending.pytest_status == pytest.ExitCode.NO_TESTS_COLLECTED
        and recorder is not None
        and recorder.resumed
        and bool(run.get("attemptsTotal"))
    )
    if recorder is not None:
        recorder.flush()
        if recorder.conflict:
            # Another process created the key's run under another protocol after preflight.
            ending.facts["store_conflict"] = recorder.conflict
        elif recorder.error:
            # What was graded is kept (run folder); the run is not a complete record.
            ending.facts["store_error"] = recorder.error
    live = state.settings.mode is not Mode.FIXTURE
    decision = decide(
        state,
        typed_run(run),  # the run typed once, where it enters the verdict
        ending.pytest_status,
        live=live,
        resumed_all=resumed_all,
        **ending.outcome_facts(),
    )
    run.update(decision.run_fields)
    record_ending(run, ending, decision.exit)
    if resumed_all:
        run["pytestStatus"] = pytest.ExitCode.OK  # "no tests" was this session's, not the run's
    if state.other_failures:
        run["otherFailures"] = state.other_failures
    write_run(state, run, run_dir)
    if recorder is not None:
        recorder.finish(run, state.artifact_inventory)
    if decision.save_baseline:
        decision = save_requested_baseline(state, run_dir / "run.json", decision)
        run.update(decision.run_fields)
    state.run = run
    state.exit_reason = decision.reason
    apply_exit(session, decision.exit)
    state.config.hook.pytest_goldeval_run_finished(config=state.config, run=run)


def build_for(
    state: GoldenSession, model: str | None, interrupted: bool, *, multi: bool
) -> tuple[dict[str, Any], Path]:
    only = model if multi else None
    selected = state.collector.case_ids(only)
    ds = state.load()
    s = state.settings
    live = s.mode is not Mode.FIXTURE
    out_dir = s.out_dir
    run_id = state.run_id
    recorder = state.recorder
    if recorder is not None and recorder.run_id and recorder.resumed:
        run_id = recorder.run_id  # the resumed run keeps its identity (and its folder)
    elif model is not None and multi:
        run_id = new_run_id(out_dir, state.started)
    protocol = protocol_for(state, selected)
    model = (model or s.provider.model) if live else None
    protocol["model"] = model
    red_ids = {x.id for x in ds.cases if x.red}
    include_red = any(case_id in red_ids for case_id in selected)
    judge_model = protocol["judgeModel"]
    configuration = {
        "mode": s.mode.protocol_name,
        "goldenMode": s.mode.value,
        "model": model,
        "judgeModel": judge_model,
        "judgeEnabled": protocol["judgeEnabled"],
        "repetitions": s.attempts,
        "includeRed": include_red,
        "artifactMode": s.artifacts.upper(),
        "outputDir": str(out_dir),
        "provider": s.provider.name if live else "fixture",
        "providerSettings": s.provider.public() if live else None,
        "experimentId": s.experiment,
        "concurrency": s.concurrency if live else None,
        "deadlineSeconds": s.deadline,
    }
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
            "provider": configuration["provider"],
            "repetitions": s.attempts,
        }
    )
    identity = {
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
    incomplete = state.skipped_by_deadline > 0 or state.skipped_by_budget > 0 or interrupted
    run_status = "INTERRUPTED" if interrupted else ("INCOMPLETE" if incomplete else "COMPLETED")
    extra: dict[str, Any] = {}
    if state.skipped_by_deadline:
        extra["incomplete"] = True
        extra["notStartedBeforeDeadline"] = state.skipped_by_deadline
    if state.skipped_by_budget:
        extra["incomplete"] = True
        extra["notStartedOverBudget"] = state.skipped_by_budget
    judge_errors = 0
    served: set[str] = set()

    fin = finalisation(state)

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
    note_served_models(run, served)
    if protocol["judgeEnabled"]:
        run["judgeErrors"] = judge_errors
        if judge_model and judge_model == model:
            run["judgeSelfPreference"] = True
            run.setdefault("notes", []).append(
                f"judge model {judge_model} is the generator model: self-preference risk"
            )
    return run, run_dir


#: What a recorded file that cannot be read (over the fixture limit, not a regular file) is
#: compared as: no answer equals it, so re-recording replaces it (with --golden-overwrite-fixtures).
_UNREADABLE_RECORDING = "\x00(unreadable recorded file)"


def _recorded_text(path: Path) -> str | None:
    """The text of a fixture or sidecar about to be re-recorded; None when there is none.
    Read bounded (``fixture_bytes``, fstat before reading): a 3 GiB file is not loaded."""
    if not path.is_file():
        return None
    try:
        return read_regular_file(path, limit="fixture_bytes").decode("utf-8", errors="replace")
    except DatasetError:
        return _UNREADABLE_RECORDING


def note_served_models(run: dict[str, Any], served: set[str]) -> None:
    """The models the servers said answered, in the run's configuration: ``servedModel`` when
    they all named one, ``servedModels`` when several. The protocol's ``model`` stays the
    name asked for, so runs and baselines keep comparing as before."""
    configuration = run.get("configuration")
    if not served or not isinstance(configuration, dict):
        return
    if len(served) == 1:
        configuration["servedModel"] = next(iter(served))
    else:
        configuration["servedModels"] = sorted(served)


def record_fixtures(state: GoldenSession) -> dict[str, list[str]]:
    """Record mode: write answers as fixtures (controller only), never silently overwriting.

    A fixture is the text ``<id>.out.md`` plus, when the answer had tool calls, a finish reason
    or usage, the sidecar ``<id>.out.json`` (goldeval.providers.fixture); the two change
    together, and a re-recorded answer without any drops a stale sidecar.
    """

    ds = state.load()
    changes: dict[str, list[str]] = {"new": [], "changed": [], "unchanged": [], "kept": []}
    for case in state.collector.iter_cases():
        first = recordable_attempt(case["attempts"])  # none for a row that echoed a secret
        if first is None:
            continue
        case_id = case["caseId"]
        path = fixture_path(ds.dir, case_id)
        side = sidecar_path(ds.dir, case_id)
        old, old_side = _recorded_text(path), _recorded_text(side)
        sidecar = first.get("recordedAnswer")
        new_side = dumps_sidecar(sidecar) if sidecar else None
        if old == first["output"] and old_side == new_side:
            changes["unchanged"].append(case_id)
            continue
        if old is not None and not state.settings.overwrite_fixtures:
            changes["kept"].append(case_id)
            continue
        artifacts.atomic_write(path, first["output"])
        if new_side is not None:
            artifacts.atomic_write(side, new_side)
        elif old_side is not None or side.is_symlink():
            side.unlink()
        changes["new" if old is None else "changed"].append(case_id)
    return changes


def write_run(state: GoldenSession, run: dict[str, Any], run_dir: Path) -> Path:
    """Commit a built run: every artifact durable, then the store's final status, then the
    manifest (the folder's commit record), then LATEST and one history line.

    Any failure propagates; :meth:`Controller.pytest_sessionfinish` then rolls back what this
    process recorded (see :mod:`goldeval.results.finalise`) and exits INFRA.
    """

    fin = finalisation(state)
    fin.runs[run_dir] = run
    out_dir = state.settings.out_dir
    artifacts.atomic_write(run_dir / "summary.json", artifacts.dumps(artifacts.summary(run)))
    artifacts.atomic_write(run_dir / "report.md", report_md.render(run))
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
    # An early stop (-x, --maxfail) or a rerun plugin's run is no finished run to point at.
    unfinished = run.get("stoppedEarly") or run.get("duplicateAttempts")
    if run.get("status") in ("COMPLETED", "INCOMPLETE") and not unfinished:
        ours = (str(run_dir.resolve()) + "\n").encode("utf-8")
        previous = artifacts.write_latest(out_dir, run_dir)
        fin.latest.append((out_dir / "LATEST", previous, ours))
    fin.history.append(artifacts.append_history(out_dir, run))
    fin.release(run_dir)
    state.run_dir = run_dir
    return run_dir


def finalisation_failed(state: GoldenSession, session: pytest.Session, exc: BaseException) -> str:
    """Roll back this process's records of the run (marked FAILED/INTERRUPTED), set the exit
    status the verdict gives a finalisation fault (75; 4 for an artifact path goldeval refuses
    to write through; pytest's 2/3/4 never downgraded) and return the one-line reason."""
    fin = finalisation(state)
    interrupted = (
        session.exitstatus == pytest.ExitCode.INTERRUPTED
        or bool(session.shouldstop)
        or isinstance(exc, KeyboardInterrupt)
    )
    status = "INTERRUPTED" if interrupted else "FAILED"
    if isinstance(exc, OSError):
        what = f"{exc.strerror or type(exc).__name__}" + (
            f": {exc.filename}" if exc.filename else ""
        )
    else:
        what = str(exc)
    path_refused = isinstance(exc, ArtifactError)
    action = "fix the path and rerun" if path_refused else "retry once fixed"
    fault = FinalisationFault(f"could not finish the run ({what})", path_refused=path_refused)
    code, _ = decide_exit(RunOutcome(pytest_status=int(session.exitstatus), finalisation=fault))
    reason = f"{fault.reason}; it is marked {status} (exit {code}), {action}"
    recorder = state.recorder
    run_id = recorder.run_id if recorder is not None and recorder.run_id else state.run_id
    left = fin.rollback(
        state.settings.out_dir, run_id, status, code, reason, recorder, path_refused=path_refused
    )
    if left:
        reason += f"; also left behind: {', '.join(left[:3])}"
    if state.run is not None:
        state.run["status"] = status
        state.run["exitDecision"] = {"code": code, "reason": reason}
        state.run[FAULT_KEY] = {"reason": reason, "pathRefused": path_refused}
    state.exit_reason = reason
    apply_exit(session, ExitDecision(code, reason))
    return reason


def print_summary(state: GoldenSession, tr: Any) -> None:
    """The goldeval block of pytest's terminal summary.

    Every value that can hold untrusted text (reasons, notes, paths, case lists) goes through
    goldeval.core.textsafe: an answer's escape sequences must not reach the reader's terminal.
    """

    run = state.run
    if run is None:
        if state.unrecorded_decision is not None:
            code, reason = state.unrecorded_decision
            line = f"goldeval decision: exit {code} — {reason} (nothing graded, nothing recorded)"
            tr.write_line(one_line(line), red=True, bold=True)
        return
    tr.write_sep(
        "=",
        one_line(
            f"goldeval: {run.get('datasetVersion')} "
            f"({run.get('configuration', {}).get('goldenMode')})"
        ),
    )
    tr.write_line(
        f"  cases {run['casesTotal']} (pass {run['casesPassed']}, fail {run['casesFailed']}, "
        f"skipped {run['casesSkipped']}, error {run['casesError']}); "
        f"attempts {run['attemptsTotal']}"
    )
    for line in report_md.summary_table(run):
        tr.write_line(line)
    cmp = run.get("comparison")
    if cmp:
        baseline = run.get("baselinePath")
        label, why = comparison_label(cmp)
        tr.write_line(
            f"  baseline: {one_line(label)}"
            + (f" vs {one_line(baseline)}" if baseline else "")
            + ("" if run.get("qualityGate") else " (no gate applied)")
        )
        if why:
            tr.write_line(f"    {one_line(why)}")
        for reason in cmp.get("invalidReasons") or []:
            tr.write_line(f"    {one_line(reason)}")
        for line in report_md.comparison_case_lines(cmp):
            tr.write_line(f"    {line}")
    for run_doc in getattr(state, "benchmark", None) or []:
        tr.write_line(f"  model {one_line(run_doc.get('model'))}:")
        for line in report_md.summary_table(run_doc):
            tr.write_line("  " + line)
    recorded = getattr(state, "recorded", None)
    if recorded:
        for kind in ("new", "changed"):
            if recorded[kind]:
                tr.write_line(
                    f"  fixtures {kind}: {report_md.name_cases(recorded[kind], limit=10**9)}"
                    " — read them before committing"
                )
        if recorded["kept"]:
            tr.write_line(
                f"  fixtures differing but kept (pass --golden-overwrite-fixtures): "
                f"{report_md.name_cases(recorded['kept'], limit=10**9)}"
            )
    run_dir = getattr(state, "run_dir", None)
    if run_dir is not None:
        tr.write_line(f"  artifacts: {one_line(run_dir)}")
    for notice in report_md.notices(run):
        tr.write_line(f"  {notice}")
    for note in run.get("notes") or []:
        tr.write_line(f"  note: {one_line(note)}")
    decision = run.get("exitDecision") or {}
    line = one_line(f"goldeval decision: exit {decision.get('code')} — {decision.get('reason')}")
    ok = decision.get("code") == 0
    tr.write_line(line, green=ok, red=not ok, bold=True)
