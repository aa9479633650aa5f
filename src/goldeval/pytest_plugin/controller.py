"""Controller side: fold every attempt's report into the run; at the end, hand the session
to goldeval.pytest_plugin.finishing (build → decide → write → record).

Registered only in the controller process (serial run or xdist controller), so the exit
status and the artifacts are decided exactly once.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import pytest

from goldeval.core.errors import BaselineError, ConfigError, DatasetError, GoldevalError
from goldeval.core.textsafe import cut
from goldeval.pipeline.attempt import case_facts
from goldeval.pytest_plugin.adaptive import check_whole_case_ids
from goldeval.pytest_plugin.collection import crash_message, shown_message, thread_timeout_hint
from goldeval.pytest_plugin.config_keys import is_listing
from goldeval.pytest_plugin.decision import preflight, preflight_baseline_file
from goldeval.pytest_plugin.finishing import deferred_signals, finalisation_failed, finish_session
from goldeval.pytest_plugin.params import is_golden_nodeid, param_of, parse_golden_nodeid
from goldeval.pytest_plugin.record_mode import preflight_record_targets
from goldeval.pytest_plugin.recording import ProtocolMismatch, begin_recording
from goldeval.pytest_plugin.recording import preflight as preflight_store
from goldeval.pytest_plugin.state import PAYLOAD_ATTR, RERUN_KIND, GoldenSession
from goldeval.pytest_plugin.summary import print_summary
from goldeval.pytest_plugin.variants import power_line
from goldeval.pytest_plugin.write_targets import preflight_write_targets
from goldeval.results.finalise import FinalisationError
from goldeval.results.last_session import write_last_session
from goldeval.results.run_folder import ArtifactError
from goldeval.verdict.exit_codes import ExitDecision, refused_before_run


def _lost_worker_channel(exc: OSError) -> bool:
    """``exc`` is execnet refusing to send to a worker whose channel is closed."""
    return "cannot send" in str(exc)


def _resume_xdist_loop(dsession: Any) -> bool:
    """xdist's own run loop (``DSession.pytest_runtestloop``) from where a send to a dead
    worker broke it, such sends skipped: the worker's end (already queued or on its way)
    is handled as xdist handles any crash (its running item reported as crashed, and
    recorded as ERROR WORKER_CRASH; its other items rescheduled; the worker replaced), and
    the run goes on. What the failed send carried is not lost: xdist books items to a worker
    before it sends them and reschedules a dead worker's booked items."""
    from xdist.dsession import Interrupted  # type: ignore[import-untyped]

    stopped: BaseException | None = None
    while not dsession.session_finished:
        try:
            dsession.loop_once()
        except OSError as exc:
            if not _lost_worker_channel(exc):
                raise
            continue
        if dsession.shouldstop:
            dsession.triggershutdown()
            stopped = Interrupted(str(dsession.shouldstop))
    if stopped is not None:
        raise stopped
    return True


class Controller:
    def __init__(self, state: GoldenSession) -> None:
        self.state = state
        self.lost_items: list[str] = []
        #: The pre-flight refused the run before any item ran: nothing to record or decide.
        self.refused = False
        #: Why the session was refused before any item ran (its LAST_SESSION reason).
        self.refused_reason: str | None = None
        self.preflown = False
        #: the one-line reason when finishing the run failed (see finalisation_failed)
        self.final_error: str | None = None
        #: Golden items selected for this session (None: not known, e.g. collection failed).
        self.expected: int | None = None
        #: The session's selected case ids (None: unknown), for what an early stop left out.
        self.selected_cases: list[str] | None = None
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
            # A test file that does not import, under --continue-on-collection-errors:
            # pytest's 1 must stay (a golden gate PASS hid it: exit 0).
            self.state.other_failures += 1

    # -- pre-flight: refused before the first model call -------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Before anything runs (and before xdist starts its workers): a broken store or a run
        # key of another dataset is a usage error, another protocol under the key is 65; a
        # missing --golden-baseline is a usage error, a damaged one 65. Listing items
        # (--collect-only) runs nothing, reads no store and compares nothing.
        self.session = session
        if is_listing(session.config.option):
            return
        try:
            preflight_store(self.state)
        except ProtocolMismatch as exc:
            self._refuse(session.config, refused_before_run(str(exc)))
        try:
            preflight_write_targets(self.state)
            self._secrets_known()
            preflight_baseline_file(self.state)
            preflight_record_targets(self.state)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
        except BaselineError as exc:
            if exc.message.startswith("comparison invalid"):
                self._refuse(
                    session.config, refused_before_run(f"{exc.message} (baseline {exc.path})")
                )
            self._refuse(session.config, refused_before_run(f"baseline rejected: {exc}"))

    def _secrets_known(self) -> None:
        """Build the run's masker now: a ``pytest_goldeval_secrets`` hook returning no list
        is a usage error before the run (it failed every item). A dataset that does not
        load is left to collection, which reports it."""
        try:
            self.state.masker  # noqa: B018 (built for its check)
        except ConfigError:
            raise
        except GoldevalError:
            pass

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # Serial runs only: an xdist controller does not collect (see the hook below).

        params = [param_of(item) for item in session.items]
        self.expected = sum(1 for p in params if p is not None)
        selected = sorted({p.case.id for p in params if p is not None})
        if self.state.adaptive is not None:
            self.state.adaptive.cases = selected  # the cases its rounds plan over
        self.selected_cases = selected
        self._preflight(session.config, selected)

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
        if self.state.adaptive is not None and selected is not None:
            check_whole_case_ids(self.state, ids)  # a usage error before anything is sent
            self.state.adaptive.cases = sorted(selected)  # the cases its rounds plan over
        if self.selected_cases is None and selected is not None:
            self.selected_cases = sorted(selected)
        self._preflight(node.config, None if selected is None else sorted(selected))

    def _preflight(self, config: pytest.Config, selected: list[str] | None) -> None:
        # Listing items or showing the set-up plan calls no model: nothing to refuse.
        if self.preflown or is_listing(config.option) or config.getoption("setupplan", False):
            return
        self.preflown = True

        try:
            reason = preflight(self.state, selected)
        except (ConfigError, DatasetError) as exc:
            self.refused, self.refused_reason = True, str(exc)
            raise pytest.UsageError(str(exc)) from None
        except BaselineError as exc:
            self._refuse(config, refused_before_run(f"baseline rejected: {exc}"))
        if reason is not None:
            self._refuse(config, refused_before_run(reason))
        if builtin_provider_answers(self.session):
            refused = self.state.model_refusal()
            if refused is not None:
                self.refused, self.refused_reason = True, refused
                raise pytest.UsageError(refused)
        line = power_line(self.state.variants, len(selected)) if selected is not None else None
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if line is not None and reporter is not None:
            reporter.write_line(line)

    def _refuse(self, config: pytest.Config, decision: ExitDecision) -> None:
        """End the session before any item ran: the only exit status set before a run."""
        self.refused = True
        self.refused_reason = decision.reason
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

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        # xdist's controller can still send to a worker that has just died (os._exit, an OOM
        # kill) before it handles that worker's end: execnet's "cannot send" escapes xdist's
        # loop and pytest ends in INTERNALERROR (exit 3) with an xdist traceback, the dead
        # worker's item never reported. trylast: the innermost wrapper, so the other
        # wrappers (the stop request's among them) still hold while the loop goes on.
        try:
            return (yield)
        except OSError as exc:
            dsession = session.config.pluginmanager.getplugin("dsession")
            if dsession is None or not _lost_worker_channel(exc):
                raise
            return _resume_xdist_loop(dsession)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # Listing items is not a run: nothing recorded, exit status untouched.
        if is_listing(session.config.option):
            self.state.close()
            return
        if self.refused:
            self.state.close()
            self._record_last_session(session)
            return
        state = self.state
        fin = state.finalisation
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
        self._record_last_session(session)
        if received:
            names = ", ".join(signal.Signals(s).name for s in received)
            sys.stderr.write(
                f"goldeval: {names} arrived while the run was being written; the write was "
                "completed first\n"
            )

    def _record_last_session(self, session: pytest.Session) -> None:
        """LAST_SESSION: this session's exit and run, for commands given no run (a session
        that did not pass leaves LATEST on an earlier run). Never fails the session."""
        state = self.state
        try:
            write_last_session(
                state.settings.out_dir,
                int(session.exitstatus),
                self.refused_reason or state.exit_reason or f"pytest exited {session.exitstatus}",
                state.run_dir,
            )
        except (OSError, GoldevalError) as exc:
            # Said, not silent: `goldeval gate` with no run would take LATEST for this session.
            sys.stderr.write(f"goldeval: LAST_SESSION was not written: {exc}\n")

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


def lost_item_payload(state: GoldenSession, report: pytest.TestReport) -> dict[str, Any] | None:
    """An item whose report carries no record (its xdist worker crashed, say): ERROR.

    Every selected item must be part of the run; a lost one is infrastructure, not a FAIL.
    """
    parsed = parse_golden_nodeid(report.nodeid)
    if parsed is None:
        return None
    case_id, index, label = parsed
    model = state.label_model(label)
    try:
        case = state.case(case_id)
    except GoldevalError:
        return None
    if case is None:
        return None

    # pytest's crash message (xdist's "worker 'gw0' crashed while running ...", a plugin's
    # own text), not the last line of a traceback.
    message = shown_message(state, cut(crash_message(report), 300))
    message += thread_timeout_hint(state.config)
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
        # The run it belongs to when the session runs variants (the id's label is its name).
        **({"variant": label} if state.variant_name(label) == label and label else {}),
    }
