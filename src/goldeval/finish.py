"""Controller side: fold reports into the run, then metrics → comparison → gate → exit.

Registered only in the controller process (serial run or xdist controller), so the exit
status and the artifacts are decided exactly once.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from goldeval import artifacts, report_md
from goldeval.errors import GoldevalError
from goldeval.models import Mode
from goldeval.run import build_run, config_fingerprint, git_commit, new_run_id
from goldeval.session import PAYLOAD_ATTR, GoldenSession

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
        #: The pre-flight refused the run before any item ran: nothing to record or decide.
        self.refused = False
        self.preflown = False

    # -- pre-flight (goldeval.decide): refused before the first model call ------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from goldeval.decide import preflight_baseline_file
        from goldeval.errors import BaselineError, ConfigError

        try:
            preflight_baseline_file(self.state)
        except ConfigError as exc:
            raise pytest.UsageError(str(exc)) from None
        except BaselineError as exc:
            if exc.message.startswith("comparison invalid"):
                self._refuse(session.config, 65, f"{exc.message} (baseline {exc.path})")
            self._refuse(session.config, 65, f"baseline rejected: {exc}")

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # Serial runs only: an xdist controller does not collect (see the hook below).
        from goldeval.item_fixtures import param_of

        params = [param_of(item) for item in session.items]
        self._preflight(session.config, sorted({p.case.id for p in params if p is not None}))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # Called before xdist schedules anything; the first worker's list is the selection.
        selected: set[str] | None = set()
        for nodeid in ids:
            if "::test_golden[" not in nodeid:
                continue
            match = _PARAM_ID.search(nodeid)
            if match is None or selected is None:
                selected = None
                continue
            selected.add(match["case"])
        self._preflight(node.config, None if selected is None else sorted(selected))

    def _preflight(self, config: pytest.Config, selected: list[str] | None) -> None:
        if self.preflown or config.option.collectonly:
            return
        self.preflown = True
        from goldeval.decide import preflight
        from goldeval.errors import BaselineError, ConfigError, DatasetError

        try:
            reason = preflight(self.state, selected)
        except (ConfigError, DatasetError) as exc:
            self.refused = True
            raise pytest.UsageError(str(exc)) from None
        except BaselineError as exc:
            self._refuse(config, 65, f"baseline rejected: {exc}")
        if reason is not None:
            self._refuse(config, 65, reason)

    def _refuse(self, config: pytest.Config, code: int, reason: str) -> None:
        self.refused = True
        line = f"goldeval decision: exit {code} — {reason} (refused before any item ran)"
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line, red=True, bold=True)
        pytest.exit(reason, returncode=code)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        payload = getattr(report, PAYLOAD_ATTR, None)
        if report.failed and "::test_golden[" not in report.nodeid:
            self.state.other_failures += 1
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

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.refused:
            self.state.close()
            return
        finish_session(self.state, session)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        print_summary(self.state, terminalreporter)


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


def finish_session(state: GoldenSession, session: pytest.Session) -> None:
    state.close()
    status = session.exitstatus
    if session.config.option.collectonly:
        return  # listing items is not a run: nothing recorded, exit status untouched
    if status in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR):
        return
    if not len(state.collector) and status == pytest.ExitCode.INTERRUPTED:
        return  # collection errors: nothing ran, nothing to record
    if state.dataset is None:
        try:
            state.load()  # an xdist controller does not collect: load identity here
        except GoldevalError:
            return
    interrupted = status == pytest.ExitCode.INTERRUPTED or bool(session.shouldstop)
    live = state.settings.mode is not Mode.FIXTURE
    merge_previous(state)
    if state.settings.mode is Mode.RECORD:
        state.recorded = record_fixtures(state)
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
            write_run(state, run, run_dir)
            state.benchmark.append(run)
            codes.append(verdict.code)
        code = max(codes)
        state.exit_reason = f"{len(models)} models side by side, worst exit {code}"
        state.run = {
            **state.benchmark[0],
            "exitDecision": {"code": code, "reason": state.exit_reason},
        }
        if code != int(status) and status not in KEEP_STATUSES:
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
    if recorder is not None:
        recorder.flush()
        if recorder.error and decision.code not in (65,):
            # What was graded is kept (run folder); the run is not a complete record.
            run["status"] = "INTERRUPTED"
            reason = f"{recorder.error}; the run is incomplete, retry it"
            run.setdefault("notes", []).append(reason)
            run["exitDecision"] = {"code": 75, "reason": reason}
            decision.code, decision.reason = 75, reason
    write_run(state, run, run_dir)
    if recorder is not None:
        recorder.finish(run, state.artifact_inventory)
    if decision.save_baseline:
        decision = save_requested_baseline(state, run, run_dir / "run.json", decision)
        run.update(decision.run_fields)
    state.run = run
    state.exit_reason = decision.reason
    if decision.code != int(status) and (status not in KEEP_STATUSES or resumed_all):
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
    if run.get("status") in ("COMPLETED", "INCOMPLETE"):
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
