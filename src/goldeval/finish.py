"""Controller side: fold reports into the run, then metrics → comparison → gate → exit.

Registered only in the controller process (serial run or xdist controller), so the exit
status and the artifacts are decided exactly once.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from goldeval import artifacts, report_md
from goldeval.errors import GoldevalError
from goldeval.models import Mode
from goldeval.run import build_run, config_fingerprint, git_commit, new_run_id
from goldeval.session import PAYLOAD_ATTR, RERUN_HINT, RERUN_KIND, GoldenSession

KEEP_STATUSES = (
    pytest.ExitCode.INTERRUPTED,
    pytest.ExitCode.INTERNAL_ERROR,
    pytest.ExitCode.USAGE_ERROR,
    pytest.ExitCode.NO_TESTS_COLLECTED,
)


class Controller:
    def __init__(self, state: GoldenSession) -> None:
        self.state = state
        self.lost_items: list[str] = []
        #: Golden items selected for this session (None: not known, e.g. collection failed).
        self.expected: int | None = None
        #: Attempts reported more than once (a rerun or repeat plugin), as "case attempt N".
        self.duplicates: list[str] = []
        #: What ended the run loop early, if anything (KeyboardInterrupt, pytest.exit, ...).
        self.interrupt: BaseException | None = None
        self.worker_pids: list[int] = []
        state.on_signal.append(self._forward_signal)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Before anything runs (and before xdist starts its workers): a broken store or a run
        # key of another dataset is a usage error, another protocol under the key is 65.
        from goldeval.storage import ProtocolMismatch, preflight

        try:
            preflight(self.state)
        except ProtocolMismatch as exc:
            pytest.exit(str(exc), returncode=65)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # Serial runs only: an xdist controller does not collect (see the node hook below).
        self.expected = sum(1 for item in session.items if "::test_golden[" in item.nodeid)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.expected is None:  # every worker collects the same items
            self.expected = sum(1 for nodeid in ids if "::test_golden[" in nodeid)

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
        if report.failed and "::test_golden[" not in report.nodeid:
            self.state.other_failures += 1
        if payload is not None and self._is_rerun(payload):
            delattr(report, PAYLOAD_ATTR)
            return  # the first report of the attempt stays; the run is refused at the end
        if payload is None and report.failed and "::test_golden[" in report.nodeid:
            payload = lost_item_payload(self.state, report)
        if payload is not None:
            self.state.collector.add(payload)
            recorder = self.state.recorder
            if recorder is not None:
                if not recorder.began:
                    recorder.begin(*early_protocol(self.state))
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
        # Ctrl-C or SIGTERM while the run is written would leave half a run folder: the
        # write is short, so it finishes first and the signal is reported afterwards.
        with deferred_signals() as received:
            finish_session(self.state, session, self)
        if received:
            names = ", ".join(signal.Signals(s).name for s in received)
            sys.stderr.write(
                f"goldeval: {names} arrived while the run was being written; the write was "
                "completed first\n"
            )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        print_summary(self.state, terminalreporter)


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


_PARAM_ID = re.compile(r"::test_golden\[(?P<case>.+?)-attempt(?P<n>\d+)(?:-(?P<model>.+))?\]$")


def lost_item_payload(state: GoldenSession, report: pytest.TestReport) -> dict[str, Any] | None:
    """An item whose report carries no record (its xdist worker crashed, say): ERROR.

    Every selected item must be part of the run; a lost one is infrastructure, not a FAIL.
    """
    match = _PARAM_ID.search(report.nodeid)
    if match is None:
        return None
    try:
        case = state.case(match["case"])
    except GoldevalError:
        return None
    if case is None:
        return None
    from goldeval.execute import case_facts

    lines = [ln.strip() for ln in str(report.longreprtext or "").splitlines() if ln.strip()]
    crash = [ln for ln in lines if "crash" in ln.lower()]
    message = (crash[0] if crash else lines[-1] if lines else "item lost")[:300]
    return {
        "case": case_facts(case),
        "attempt": {
            "caseId": case.id,
            "index": int(match["n"]),
            "status": "ERROR",
            "model": match["model"],
            "errorKind": "WORKER_CRASH",
            "errorMessage": message,
            "durationMs": 0,
        },
    }


def early_protocol(state: GoldenSession) -> tuple[dict[str, Any], dict[str, Any]]:
    """Protocol and configuration known before the selection is complete (for the store)."""
    protocol = protocol_for(state, [])
    protocol.pop("selectedCaseIds")
    s = state.settings
    configuration = {
        "mode": s.mode.protocol_name,
        "goldenMode": s.mode.value,
        "repetitions": s.attempts,
        "provider": s.provider.name,
        "runKey": s.run_key,
    }
    return protocol, configuration


def merge_previous(state: GoldenSession) -> None:
    """A resumed run key: fold the attempts graded in earlier sessions into this run."""
    recorder = state.recorder
    if recorder is None:
        return
    if not recorder.began:
        recorder.begin(*early_protocol(state))
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


def protocol_for(state: GoldenSession, selected: list[str]) -> dict[str, Any]:
    ds = state.load()
    s = state.settings
    live = s.mode is not Mode.FIXTURE
    # Only graders that grade some row of the dataset: installing a new grader type must not
    # make every existing baseline incomparable, and every shard or selection of one dataset
    # gets the same hash.
    used = state.graders_in_use()
    grader_config = config_fingerprint(
        {
            "domain": ds.domain.fingerprint(),
            "graders": ",".join(used),
            "modes": ",".join(f"{k}={v}" for k, v in sorted(ds.grader_modes.items())),
        }
    )
    provider_name = s.provider.name if live else None
    fixtures = state._fixtures
    if live and fixtures is not None:
        from goldeval.providers.base import CallableProvider

        used = fixtures[0]
        # A conftest override (the team's own app) is named in the protocol, not "ollama".
        if isinstance(used, CallableProvider) or (callable(used) and not hasattr(used, "complete")):
            provider_name = f"callable:{getattr(used, 'name', getattr(used, '__name__', 'app'))}"
        elif getattr(used, "name", None) and used is not state._provider:
            provider_name = str(used.name)
    return {
        "datasetId": ds.id,
        "datasetHash": ds.hash,
        "packId": ds.pack.version if ds.pack else None,
        "packHash": ds.pack.hash if ds.pack else None,
        "mode": s.mode.protocol_name,
        "attempts": s.attempts,
        "selectedCaseIds": sorted(selected),
        "graderConfigHash": grader_config,
        "provider": provider_name,
        "model": (s.provider.model if live else None),
        "judgeEnabled": bool(s.judge and live),
        "judgeModel": (s.judge_model or s.provider.model) if (s.judge and live) else None,
    }


def _ended_by_user(status: int, state: GoldenSession, interrupt: BaseException | None) -> bool:
    """A real interruption (Ctrl-C, SIGTERM), as opposed to a run loop stopped on purpose.

    pytest turns ``session.shouldstop`` (``--sw``, a plugin) into ``Session.Interrupted`` and
    xdist turns ``-x``/``--maxfail`` into its own ``Interrupted``; both subclass
    KeyboardInterrupt and give pytest's status 2, but nobody pressed Ctrl-C: those runs are
    stopped early (INCOMPLETE), not INTERRUPTED.
    """
    if status != pytest.ExitCode.INTERRUPTED:
        return False
    if state.signal_received is not None or interrupt is None:
        return True
    if isinstance(interrupt, pytest.Session.Interrupted):
        return False
    if type(interrupt).__module__.startswith("xdist"):
        return "keyboard-interrupt" in str(interrupt)  # a worker got Ctrl-C
    return type(interrupt) is KeyboardInterrupt


def _stop_reason(session: pytest.Session, interrupt: BaseException | None) -> str:
    for why in (session.shouldfail, session.shouldstop, interrupt):
        text = str(why or "").strip()
        if text and text != "True":
            return text
    return "the session stopped before running every selected item"


def finish_session(
    state: GoldenSession, session: pytest.Session, controller: Controller | None = None
) -> None:
    state.close()
    status = session.exitstatus
    if session.config.option.collectonly:
        return  # listing items is not a run: nothing recorded, exit status untouched
    if status in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR):
        return
    interrupt = controller.interrupt if controller is not None else None
    interrupted = _ended_by_user(int(status), state, interrupt)
    if not len(state.collector) and status == pytest.ExitCode.INTERRUPTED:
        if interrupted or controller is None or controller.expected is None:
            if state.signal_received:
                # Terminated before any attempt was graded: still infrastructure, retry.
                session.exitstatus = 75
            return  # collection errors, or stopped before any attempt: nothing to record
    if state.dataset is None:
        try:
            state.load()  # an xdist controller does not collect: load identity here
        except GoldevalError:
            return
    # Every selected golden item must report; counted before earlier sessions are merged.
    expected = controller.expected if controller is not None else None
    not_run = max(0, expected - len(state.collector)) if expected is not None else 0
    stopped_early = not interrupted and (
        not_run > 0
        or (expected is None and (bool(session.shouldstop) or bool(session.shouldfail)))
    )
    stop_reason = _stop_reason(session, interrupt) if stopped_early else ""
    if status == pytest.ExitCode.INTERRUPTED and not interrupted:
        # Not Ctrl-C: decide as pytest would have without the stop (failures give 1).
        status = pytest.ExitCode.TESTS_FAILED if session.testsfailed else pytest.ExitCode.OK
    duplicates = list(controller.duplicates) if controller is not None else []
    live = state.settings.mode is not Mode.FIXTURE
    merge_previous(state)
    if state.settings.mode is Mode.RECORD:
        state.recorded = record_fixtures(state)

    def unfinished(run: dict[str, Any], code: int, reason: str) -> tuple[int, str]:
        """Early stop, reruns, SIGTERM: never COMPLETED, never exit 0 (see docs)."""
        notes = run.setdefault("notes", [])
        if duplicates:
            if run.get("status") == "COMPLETED":
                run["status"] = "INCOMPLETE"
            run["duplicateAttempts"] = duplicates[:50]
            shown = ", ".join(duplicates[:3]) + (" ..." if len(duplicates) > 3 else "")
            code = 4
            reason = (
                f"{len(duplicates)} golden attempts reported twice ({shown}): a rerun or "
                f"repeat plugin ran them again; {RERUN_HINT}"
            )
            notes.append(reason)
        elif stopped_early:
            run["status"] = "INCOMPLETE"
            run["incomplete"] = True
            run["stoppedEarly"] = {"reason": stop_reason, "attemptsNotRun": not_run}
            note = (
                f"stopped early ({stop_reason}): {not_run} selected attempts never ran; "
                "the run is INCOMPLETE"
            )
            notes.append(note)
            if code == 0:
                code, reason = 1, note
        if state.signal_received and interrupted:
            key = state.settings.run_key
            reason = (
                f"terminated by {state.signal_received}: the run is INTERRUPTED; "
                + (f"rerun with --golden-run-key={key} to resume it" if key else "retry it")
            )
            code = 75
            notes.append(reason)
        if code != run.get("exitDecision", {}).get("code"):
            run["exitDecision"] = {"code": code, "reason": reason}
        return code, reason

    models = state.collector.models()
    if len(models) > 1:
        # Several models side by side: one run per model, reported together, never gated.
        codes = []
        state.benchmark = []
        for model in models:
            run, run_dir = build_for(state, model, interrupted, multi=True)
            from goldeval.exitcodes import decide_exit

            verdict = decide_exit(run, None, None, pytest_status=int(status))
            run["exitDecision"] = {"code": verdict.code, "reason": verdict.reason}
            run["notes"] = ["models side by side (--golden-models): no baseline, no gate"]
            run_code, _ = unfinished(run, verdict.code, verdict.reason)
            write_run(state, run, run_dir)
            state.benchmark.append(run)
            codes.append(run_code)
        code = max(codes)
        state.exit_reason = f"{len(models)} models side by side, worst exit {code}"
        state.run = {
            **state.benchmark[0],
            "exitDecision": {"code": code, "reason": state.exit_reason},
        }
        forced = bool(duplicates or stopped_early or state.signal_received)
        if code != int(session.exitstatus) and (status not in KEEP_STATUSES or forced):
            session.exitstatus = code
        return
    only_model = models[0] if models else None
    run, run_dir = build_for(state, only_model or None, interrupted, multi=False)
    from goldeval.decide import decide, save_requested_baseline

    recorder = state.recorder
    resumed_all = (
        status == pytest.ExitCode.NO_TESTS_COLLECTED
        and recorder is not None
        and recorder.resumed
        and bool(run.get("attemptsTotal"))
    )
    # A resumed run key with nothing left to do gets the whole run's verdict, not "no tests".
    decision = decide(state, run, 0 if resumed_all else int(status), live=live)
    run.update(decision.run_fields)
    forced = False
    if recorder is not None:
        recorder.flush()
        if recorder.conflict:
            # Another process created the key's run under another protocol after preflight.
            run.setdefault("notes", []).append(recorder.conflict)
            run["exitDecision"] = {"code": 65, "reason": recorder.conflict}
            decision.code, decision.reason = 65, recorder.conflict
            decision.save_baseline = False
            forced = True
        elif recorder.error and decision.code not in (65,):
            # What was graded is kept (run folder); the run is not a complete record.
            run["status"] = "INTERRUPTED"
            reason = f"{recorder.error}; the run is incomplete, retry it"
            run.setdefault("notes", []).append(reason)
            run["exitDecision"] = {"code": 75, "reason": reason}
            decision.code, decision.reason = 75, reason
    if duplicates or stopped_early or (interrupted and state.signal_received):
        code, reason = unfinished(run, decision.code, decision.reason)
        forced = forced or code != decision.code or bool(duplicates) or stopped_early
        decision.code, decision.reason = code, reason
        decision.save_baseline = False
    write_run(state, run, run_dir)
    if recorder is not None:
        recorder.finish(run, state.artifact_inventory)
    if decision.save_baseline:
        decision = save_requested_baseline(state, run, run_dir / "run.json", decision)
        run.update(decision.run_fields)
    state.run = run
    state.exit_reason = decision.reason
    if decision.code != int(session.exitstatus) and (
        status not in KEEP_STATUSES or resumed_all or forced
    ):
        session.exitstatus = decision.code
    elif status in KEEP_STATUSES and decision.code != int(status):
        # pytest's own status stands (e.g. 5: every item deselected): say so, not ours.
        kept = f"pytest exit status {int(status)} kept ({pytest.ExitCode(status).name})"
        run["exitDecision"] = {"code": int(status), "reason": kept}
        state.exit_reason = kept
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
    incomplete = state.skipped_by_deadline > 0 or interrupted
    run_status = "INTERRUPTED" if interrupted else ("INCOMPLETE" if incomplete else "COMPLETED")
    extra: dict[str, Any] = {}
    if state.skipped_by_deadline:
        extra["incomplete"] = True
        extra["notStartedBeforeDeadline"] = state.skipped_by_deadline
    judge_errors = 0

    def on_case(case: dict[str, Any]) -> None:
        nonlocal judge_errors
        judge_errors += sum(1 for a in case["attempts"] if (a.get("judge") or {}).get("error"))
        artifacts.write_case(run_dir, case, s.artifacts)

    run_dir = out_dir / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "cases").mkdir(exist_ok=True)
    cases_file = run_dir / f".cases.{os.getpid()}.jsonl.tmp"
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
    if protocol["judgeEnabled"]:
        run["judgeErrors"] = judge_errors
        if judge_model and judge_model == model:
            run["judgeSelfPreference"] = True
            run.setdefault("notes", []).append(
                f"judge model {judge_model} is the generator model: self-preference risk"
            )
    return run, run_dir


def record_fixtures(state: GoldenSession) -> dict[str, list[str]]:
    """Record mode: write answers as fixtures (controller only), never silently overwriting."""
    from goldeval.providers.fixture import fixture_path

    ds = state.load()
    changes: dict[str, list[str]] = {"new": [], "changed": [], "unchanged": [], "kept": []}
    for case in state.collector.iter_cases():
        first = next((a for a in case["attempts"] if a.get("output") is not None), None)
        if first is None:
            continue
        case_id = case["caseId"]
        path = fixture_path(ds.dir, case_id)
        old = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
        if old == first["output"]:
            changes["unchanged"].append(case_id)
            continue
        if old is not None and not state.settings.overwrite_fixtures:
            changes["kept"].append(case_id)
            continue
        artifacts.atomic_write(path, first["output"])
        changes["new" if old is None else "changed"].append(case_id)
    return changes


def write_run(state: GoldenSession, run: dict[str, Any], run_dir: Path) -> Path:
    from goldeval.evidence import write_manifest
    from goldeval.run import write_run_json

    out_dir = state.settings.out_dir
    cases_file = run_dir / f".cases.{os.getpid()}.jsonl.tmp"
    write_run_json(run_dir / "run.json", run, cases_file)
    cases_file.unlink(missing_ok=True)
    artifacts.atomic_write(run_dir / "summary.json", artifacts.dumps(artifacts.summary(run)))
    artifacts.atomic_write(run_dir / "report.md", report_md.render(run))
    if run.get("comparison"):
        artifacts.atomic_write(run_dir / "comparison.json", artifacts.dumps(run["comparison"]))
    state.artifact_inventory = write_manifest(run_dir, run["runId"])
    artifacts.append_history(out_dir, run)
    # An early stop (-x, --maxfail) or a rerun plugin's run is no finished run to point at.
    unfinished = run.get("stoppedEarly") or run.get("duplicateAttempts")
    if run.get("status") in ("COMPLETED", "INCOMPLETE") and not unfinished:
        artifacts.atomic_write(out_dir / "LATEST", str(run_dir.resolve()) + "\n")
    state.run_dir = run_dir
    return run_dir


def print_summary(state: GoldenSession, tr: Any) -> None:
    run = state.run
    if run is None:
        return
    tr.write_sep(
        "=",
        f"goldeval: {run.get('datasetVersion')} ({run.get('configuration', {}).get('goldenMode')})",
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
        tr.write_line(
            f"  baseline: {cmp.get('decision')}"
            + (f" vs {run.get('baselinePath')}" if run.get("baselinePath") else "")
        )
        for reason in cmp.get("invalidReasons") or []:
            tr.write_line(f"    {reason}")
    for run_doc in getattr(state, "benchmark", None) or []:
        tr.write_line(f"  model {run_doc.get('model')}:")
        for line in report_md.summary_table(run_doc):
            tr.write_line("  " + line)
    recorded = getattr(state, "recorded", None)
    if recorded:
        for kind in ("new", "changed"):
            if recorded[kind]:
                tr.write_line(
                    f"  fixtures {kind}: {', '.join(recorded[kind])} — read them before committing"
                )
        if recorded["kept"]:
            tr.write_line(
                f"  fixtures differing but kept (pass --golden-overwrite-fixtures): "
                f"{', '.join(recorded['kept'])}"
            )
    run_dir = getattr(state, "run_dir", None)
    if run_dir is not None:
        tr.write_line(f"  artifacts: {run_dir}")
    for note in run.get("notes") or []:
        tr.write_line(f"  note: {note}")
    decision = run.get("exitDecision") or {}
    line = f"goldeval decision: exit {decision.get('code')} — {decision.get('reason')}"
    ok = decision.get("code") == 0
    tr.write_line(line, green=ok, red=not ok, bold=True)
