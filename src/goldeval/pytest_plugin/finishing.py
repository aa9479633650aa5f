"""The end of a session: build the run (or one per model), decide its exit from the one
verdict, write and record it; roll back what this process wrote when that fails.

:func:`finish_session` reads as the sequence of steps; each step is a function here or in
goldeval.pytest_plugin.run_writing / record_mode.
"""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from goldeval.core.errors import BaselineError, GoldevalError
from goldeval.core.models import Mode
from goldeval.pytest_plugin.config_keys import is_listing, resumed_everything
from goldeval.pytest_plugin.decision import (
    Found,
    decide,
    find_baseline,
    save_requested_baseline,
)
from goldeval.pytest_plugin.ending import (
    SessionEnding,
    apply_exit,
    record_ending,
    selection_left_out,
    session_ending,
)
from goldeval.pytest_plugin.record_mode import record_fixtures
from goldeval.pytest_plugin.recording import begin_recording
from goldeval.pytest_plugin.run_writing import build_for, point_latest, write_run
from goldeval.pytest_plugin.state import GoldenSession
from goldeval.results.attempt_payloads import EXCERPT_CHARS
from goldeval.results.documents import VariantComparisonDoc, typed_run
from goldeval.results.run_folder import ArtifactError
from goldeval.results.run_json import RunJson
from goldeval.results.variant_answers import side_by_side
from goldeval.results.variant_comparison import compare_variants
from goldeval.results.variant_costs import case_figures, case_figures_of_file, pareto_table
from goldeval.results.variant_curves import pass_at_k_curves
from goldeval.results.variant_matrix import variant_matrix
from goldeval.results.variant_pairs import variant_pairs
from goldeval.verdict.exit_codes import ExitDecision, decide_exit, worst
from goldeval.verdict.outcome import FinalisationFault, RunOutcome
from goldeval.verdict.variants import decide_variants

if TYPE_CHECKING:
    from goldeval.pytest_plugin.controller import Controller


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
        # A variant session's attempt is the variant's (its store column), not its model's.
        variant = attempt.pop("variant", None)
        key = (attempt["caseId"], variant or attempt.get("model") or "", int(attempt["index"]))
        info = infos.get(attempt["caseId"])
        if key in have or info is None:
            continue
        state.collector.add({"case": info, "attempt": attempt, "variant": variant})


def finish_session(
    state: GoldenSession, session: pytest.Session, controller: Controller | None = None
) -> None:
    """Build, decide, write and record the run; set the exit status from the one verdict."""
    state.close()
    try:
        _finish(state, session, controller)
    finally:
        state.collector.close()  # the attempts spooled to disk (goldeval.results.text_spool)


def _finish(state: GoldenSession, session: pytest.Session, controller: Controller | None) -> None:
    if not _is_a_run(session):
        return
    ending = _ending_of(state, session, controller)
    if _stopped_before_any_attempt(state, session, ending, controller):
        return
    if not _dataset_loaded(state):
        return
    merge_previous(state)
    selection_left_out(state, ending)
    if state.adaptive is not None:  # before anything reads the collector's attempts out
        state.adaptive.count_ran(state.collector.attempts)
    if state.settings.mode is Mode.RECORD:
        state.recorded = record_fixtures(state)
    models = state.collector.models()
    stored_decides = _stored_run_decides(state, ending)
    run_ending = ending
    if stored_decides:  # "no tests" was this session's, not the runs'
        run_ending = dataclasses.replace(ending, pytest_status=pytest.ExitCode.OK)
    # A compared pair both selected is weighed even when one side recorded nothing (-k):
    # its comparison is then INCONCLUSIVE, never an ordinary green run of the other side.
    compared = state.variants is not None and state.variants.compared() is not None
    if len(models) > 1 or (compared and models):
        finish_side_by_side(state, session, run_ending, models)
    else:
        finish_one_run(state, session, run_ending, models[0] if models else None)
    if stored_decides and not resumed_everything(state.config, ending.pytest_status):
        # Its -k / -m / node ids selected nothing: the session keeps pytest's 5.
        kept = decide_exit(RunOutcome(pytest_status=ending.pytest_status, **ending.outcome_facts()))
        apply_exit(session, kept)
        state.unrecorded_decision = (kept.code, f"{kept.reason}: this session selected nothing")


def _stored_run_decides(state: GoldenSession, ending: SessionEnding) -> bool:
    """pytest's "no tests" (5) in a run key's session whose run has stored attempts: the runs
    are decided and rewritten on those attempts as an OK session's would be. When the run key
    itself left every selected attempt out as graded (``resumed_everything``), that decision
    is the session's; when ``-k`` / ``-m`` / node ids selected nothing, the session keeps 5
    and the runs keep their own record."""
    recorder = state.recorder
    return (
        ending.pytest_status == pytest.ExitCode.NO_TESTS_COLLECTED
        and recorder is not None
        and recorder.resumed
        and len(state.collector) > 0
    )


def _is_a_run(session: pytest.Session) -> bool:
    """Listing items is not a run (nothing recorded, exit status untouched), nor is a session
    pytest ended with a usage or internal error."""
    if is_listing(session.config.option):
        return False
    return session.exitstatus not in (
        pytest.ExitCode.USAGE_ERROR,
        pytest.ExitCode.INTERNAL_ERROR,
    )


def _ending_of(
    state: GoldenSession, session: pytest.Session, controller: Controller | None
) -> SessionEnding:
    return session_ending(
        state,
        session,
        interrupt=controller.interrupt if controller is not None else None,
        expected=controller.expected if controller is not None else None,
        duplicates=list(controller.duplicates) if controller is not None else [],
        selected=controller.selected_cases if controller is not None else None,
    )


def _stopped_before_any_attempt(
    state: GoldenSession,
    session: pytest.Session,
    ending: SessionEnding,
    controller: Controller | None,
) -> bool:
    """Collection errors, or stopped before any attempt: nothing to record. A signal before
    any attempt was graded is still infrastructure (retry): its exit status is set here."""
    if len(state.collector) or session.exitstatus != pytest.ExitCode.INTERRUPTED:
        return False
    nothing_to_record = (
        ending.interrupted
        or controller is None
        or controller.expected is None
        or controller.collection_errors
    )
    if not nothing_to_record:
        return False
    if ending.signal:
        outcome = RunOutcome(pytest_status=ending.pytest_status, **ending.outcome_facts())
        decision = decide_exit(outcome)
        apply_exit(session, decision)
        state.unrecorded_decision = (decision.code, decision.reason)
    return True


def _dataset_loaded(state: GoldenSession) -> bool:
    """An xdist controller does not collect: the run's identity is loaded here."""
    if state.dataset is None:
        try:
            state.load()
        except GoldevalError:
            return False
    return True


def weigh_store(state: GoldenSession, ending: SessionEnding) -> None:
    """What the store could not keep becomes a fact the verdict weighs, for a single run and
    side by side alike: a conflict (another process created the key's run under another
    protocol after the pre-flight) or an error (a run key's earlier attempts unread, this
    session's unrecorded). What was graded is kept (run folder); the run is no complete record."""
    recorder = state.recorder
    if recorder is None:
        return
    recorder.flush()
    if recorder.conflict:
        ending.facts["store_conflict"] = recorder.conflict
    elif recorder.error:
        ending.facts["store_error"] = recorder.error


def finish_side_by_side(
    state: GoldenSession, session: pytest.Session, ending: SessionEnding, models: list[str]
) -> None:
    """Several models (or variants) side by side: one run per model, reported together.

    With the manifest's ``gate.compare`` and both of its variants run, every run carries the
    paired comparison and the verdict gates on it. A variant with a baseline of its own (or
    saving one) is decided as a single run against it as well; models are never gated on a
    baseline."""
    decisions = []
    state.benchmark = []
    weigh_store(state, ending)
    built = [(model, *build_for(state, model, ending.interrupted, multi=True)) for model in models]
    comparison = _variant_comparison(
        state, {model: (run, run_dir) for model, run, run_dir in built}
    )
    for model, run, run_dir in built:
        name = state.variant_name(model)
        if name is not None:
            run["variant"] = name
        own, found = _own_baseline(state, run, name) if name is not None else (False, None)
        baseline = "its own baseline" if own else "no baseline"
        if comparison is not None:
            run["variantComparison"] = comparison
            run.setdefault("notes", []).append(
                f"variants side by side: gated on {comparison['candidate']} vs "
                f"{comparison['control']} (non-inferiority), {baseline}"
            )
        elif state.variants is not None:
            run.setdefault("notes", []).append(
                f"variants side by side: no gate.compare pair ran in this session, {baseline}"
                + ("" if own else ", no gate")
            )
        else:
            run.setdefault("notes", []).append(
                "models side by side (--golden-models): no baseline, no gate"
            )
        if own:
            decision = _decide_with_own_baseline(state, run, run_dir, ending, name, found)
        else:
            outcome = RunOutcome.from_run(
                typed_run(run),
                pytest_status=ending.pytest_status,
                gate_enabled=state.settings.gate,
                **ending.outcome_facts(),
            )
            decision = decide_exit(outcome)
            record_ending(run, ending, decision)
            write_run(state, run, run_dir)
        state.benchmark.append(run)
        decisions.append(decision)
    overall = worst(decisions, "variants side by side" if state.variants else "models side by side")
    # LATEST names the run that decided the session (`goldeval gate` with no run regates it),
    # not whichever variant was written last: that one may have passed on its own.
    top = next(i for i, d in enumerate(decisions) if d.code == overall.code)
    if top != len(decisions) - 1:
        point_latest(state, state.benchmark[top], built[top][2])
    state.run_dir = built[top][2]  # the session's run, as LAST_SESSION names it
    state.exit_reason = overall.reason
    state.run = {**state.benchmark[0], "exitDecision": overall._asdict()}
    apply_exit(session, overall)
    # Once per session, as for a single run: the first run's document with the session's
    # decision (each variant's own run.json is in its folder).
    state.config.hook.pytest_goldeval_run_finished(
        config=state.config, run=state.run, document=typed_run(state.run)
    )


def _own_baseline(
    state: GoldenSession, run: RunJson, name: str | None
) -> tuple[bool, Found | None]:
    """Whether a variant's run is gated like a single run, and the baseline found for it:
    it has one of its own (typed with ``{variant}``, or found by the default lookup: its
    protocol names the variant), or the session saves one per variant. A baseline that
    cannot be read is its own too: the verdict then refuses it (exit 65) rather than
    passing over it."""
    if state.settings.save_baseline is not None:
        return True, None
    live = state.settings.mode is not Mode.FIXTURE
    try:
        found = find_baseline(state, typed_run(run), live, name)
    except BaselineError:
        return True, None  # decide() meets the error again and refuses the baseline
    return found[1] is not None, found


def _decide_with_own_baseline(
    state: GoldenSession,
    run: RunJson,
    run_dir: Path,
    ending: SessionEnding,
    name: str | None,
    found: Found | None,
) -> ExitDecision:
    """A variant's run decided as a single run is (gate policy, its own baseline or its
    capture) and written; the paired comparison it carries is part of the same verdict."""
    decision = decide(
        state,
        typed_run(run),
        ending.pytest_status,
        live=state.settings.mode is not Mode.FIXTURE,
        variant=name,
        found=found,
        **ending.outcome_facts(),
    )
    run.update(decision.run_fields)
    record_ending(run, ending, decision.exit)
    write_run(state, run, run_dir)
    if decision.save_baseline:
        decision = save_requested_baseline(state, run_dir / "run.json", decision, name)
        run.update(decision.run_fields)
    return decision.exit


def _variant_comparison(
    state: GoldenSession, runs: dict[str, tuple[RunJson, Path]]
) -> dict[str, Any] | None:
    """``variantComparison`` when the manifest compares two variants this session ran (the
    figures from goldeval.results, the label and reason from goldeval.verdict)."""
    variants = state.variants
    compare = variants.compared() if variants is not None else None
    if variants is None or compare is None:
        return None
    # The runs are keyed by variant name (the collector's key in a variant session). A side
    # that recorded nothing (deselected, or stopped before it ran) pairs no case.
    control, candidate = compare.control, compare.candidate
    # Each run typed once: the pair's comparison and the Pareto table read the same documents.
    typed = {name: typed_run(run) for name, (run, _) in runs.items()}
    cases_files = state.finalisation.cases_files
    read_figures = {
        name: case_figures_of_file(cases_files[runs[name][1]]) if name in runs else case_figures([])
        for name in (control, candidate)
    }
    figures = compare_variants(
        typed.get(control),
        typed.get(candidate),
        control=control,
        candidate=candidate,
        margin=compare.non_inferiority,
        rule=compare.outcome,
        # The full cases: the runs in memory keep passing cases without latency and tokens.
        figures=(read_figures[control], read_figures[candidate]),
    )
    # Every variant the session ran, not only the pair, in the order selected.
    named = [(name, typed[name]) for name in variants.names if name in typed]
    figures["pareto"] = pareto_table(named)
    per_variant = {
        name: read_figures[name]
        if name in read_figures
        else case_figures_of_file(cases_files[runs[name][1]])
        for name, _ in named
    }
    collector = state.collector
    figures["matrix"] = variant_matrix(
        named,
        per_variant,
        [*figures["flippedWorse"], *figures["flippedBetter"]],
        excerpt=collector.excerpt,
    )
    figures["answers"] = side_by_side(
        figures["flippedWorse"],
        figures["flippedBetter"],
        collector.excerpt,
        control=control,
        candidate=candidate,
        excerpt_chars=EXCERPT_CHARS,
    )
    figures["passAtK"] = pass_at_k_curves(named)
    # Every selected variant, also one that recorded nothing (it pairs no case).
    figures["pairs"] = variant_pairs(
        [(name, typed.get(name)) for name in variants.names],
        control=control,
        candidate=candidate,
        mode=compare.pairs,
        margin=compare.non_inferiority,
        rule=compare.outcome,
    )
    result = decide_variants(VariantComparisonDoc.model_validate(figures))
    return {**figures, "decision": result.decision.value, "reason": result.reason}


def finish_one_run(
    state: GoldenSession, session: pytest.Session, ending: SessionEnding, model: str | None
) -> None:
    """One run: built, decided (with the store's facts), written, recorded, maybe saved."""
    run, run_dir = build_for(state, model, ending.interrupted, multi=False)
    variant = state.variant_name(model)
    if variant is not None:  # one variant picked (--golden-variants=A): no pair to compare
        run["variant"] = variant
    recorder = state.recorder
    weigh_store(state, ending)
    live = state.settings.mode is not Mode.FIXTURE
    decision = decide(
        state,
        typed_run(run),  # the run typed once, where it enters the verdict
        ending.pytest_status,
        live=live,
        variant=variant,
        **ending.outcome_facts(),
    )
    run.update(decision.run_fields)
    record_ending(run, ending, decision.exit)
    if state.other_failures:
        run["otherFailures"] = state.other_failures
    write_run(state, run, run_dir)
    if recorder is not None:
        recorder.finish(run, state.artifact_inventory)
    if decision.save_baseline:
        decision = save_requested_baseline(state, run_dir / "run.json", decision, variant)
        run.update(decision.run_fields)
    state.run = run
    state.exit_reason = decision.reason
    apply_exit(session, decision.exit)
    state.config.hook.pytest_goldeval_run_finished(
        config=state.config, run=run, document=typed_run(run, run_dir / "run.json")
    )


def finalisation_failed(state: GoldenSession, session: pytest.Session, exc: BaseException) -> str:
    """Roll back this process's records of the run (marked FAILED/INTERRUPTED), set the exit
    status the verdict gives a finalisation fault (75; 4 for an artifact path goldeval refuses
    to write through; pytest's 2/3/4 never downgraded) and return the one-line reason."""
    fin = state.finalisation
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
        state.run["finalisationFault"] = {"reason": reason, "pathRefused": path_refused}
    state.exit_reason = reason
    apply_exit(session, ExitDecision(code, reason))
    return reason
