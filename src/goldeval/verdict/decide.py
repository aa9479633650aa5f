"""One verdict path: comparison → gate → exit decision, for pytest and for the CLI alike.

``decide()`` takes everything it needs as arguments (the run document, the baseline document
or none, the gate policy, what the user asked for) and returns a :class:`Verdict`. The pytest
controller (``pytest_plugin.decision``) finds the baseline and the policy from its options and
the dataset; ``goldeval gate`` / ``goldeval compare`` find them from a saved run and the project.
Both then call this function, so a saved run gated later gets the same exit code and reason as
the run did when it finished.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from goldeval.core.errors import GoldevalError
from goldeval.dataset.manifest import Manifest, check_gate_policy, find_manifest, read_manifest
from goldeval.graders.contract import ContractGrader
from goldeval.graders.registry import builtin_graders
from goldeval.results.documents import RunDocument
from goldeval.results.run_json import RunJson
from goldeval.verdict.comparison import (
    ComparisonResult,
    Decision,
    attempt_counts,
    compare,
    grader_names,
    run_mode,
)
from goldeval.verdict.exit_codes import GATE_FAILED, OK, ExitDecision, decide_exit
from goldeval.verdict.gate import GatePolicy, GateResult, attach_gate, evaluate
from goldeval.verdict.outcome import RunOutcome

NO_GATE_NOTE = "--golden-no-gate: metrics reported, exit status not gated"
CAPTURE_NOTE = "capture run: the gate is not applied when saving a baseline"


@dataclass
class Verdict:
    """What a finished run comes to: its comparison, its gate and its exit decision."""

    code: int
    reason: str
    comparison: ComparisonResult | None = None
    gate: GateResult | None = None
    #: Lines to add to the run's notes, in order.
    notes: list[str] = field(default_factory=list)
    #: What the decision weighed; re-ask :func:`decide_exit` with facts learnt later
    #: (``verdict.redecide(finalisation=...)``).
    outcome: RunOutcome = field(default_factory=RunOutcome)

    def with_reason(self, reason: str) -> Verdict:
        """The same decision said more precisely (a capture names where it was saved)."""
        return Verdict(
            self.code, reason, self.comparison, self.gate, list(self.notes), self.outcome
        )

    def redecide(self, **facts: Any) -> Verdict:
        """This verdict with facts learnt after it (a store error, a finalisation fault)."""
        outcome = self.outcome.with_(**facts)
        code, reason = decide_exit(outcome)
        return Verdict(code, reason, self.comparison, self.gate, list(self.notes), outcome)

    @property
    def exit_decision(self) -> ExitDecision:
        return ExitDecision(self.code, self.reason)

    def run_fields(self) -> RunJson:
        """The fields this verdict writes into the run document (JSON names of run.json)."""
        fields: RunJson = {}
        if self.comparison is not None:
            fields["comparison"] = self.comparison.dump()
        if self.gate is not None:
            fields["qualityGate"] = self.gate.dump()
        fields["exitDecision"] = {"code": self.code, "reason": self.reason}
        return fields


def baseline_rejected(reason: str) -> Verdict:
    """A baseline that cannot be used (unreadable, tampered): the comparison is invalid."""
    comparison = ComparisonResult(decision=Decision.COMPARISON_INVALID, invalid_reasons=[reason])
    outcome = RunOutcome(comparison=comparison, cases_total=1)
    code, _ = decide_exit(outcome)
    return Verdict(code, reason, None, None, [], outcome)


def policy_from_manifest(manifest: Manifest, live: bool) -> GatePolicy | None:
    """The gate policy a dataset manifest sets for a mode (None: not gated in this mode).

    Live runs are always gated against their baseline (allowed regression 0) even when the
    manifest names no live policy; fixture runs only when the manifest has one.
    """
    gate = manifest.gate
    if gate is None:
        return None
    mode_policy = gate.live if live else gate.fixture
    if mode_policy is None:
        return GatePolicy(allowed_regression=0.0) if live else None
    return GatePolicy(
        thresholds=dict(mode_policy.thresholds), allowed_regression=mode_policy.allowed_regression
    )


def capture_summary(run: RunDocument) -> str:
    """``10 cases, 2 FAIL (12 attempts: 10 PASS, 2 FAIL)`` for the capture lines."""
    counts = attempt_counts(run)
    cases = run.cases_total or 0
    failed_cases = run.cases_failed or 0
    parts = [f"{counts.passed} PASS", f"{counts.failed} FAIL"]
    if counts.skipped:
        parts.append(f"{counts.skipped} SKIPPED")
    return (
        f"{cases} case{'s' if cases != 1 else ''}, {failed_cases} FAIL "
        f"({counts.total} attempt{'s' if counts.total != 1 else ''}: {', '.join(parts)})"
    )


def decide(
    run: RunDocument,
    *,
    baseline: RunDocument | None,
    policy: GatePolicy | None,
    live: bool,
    gate_enabled: bool = True,
    capture: bool = False,
    pytest_status: int | None = None,
    other_failures: bool = False,
    comparison: ComparisonResult | None = None,
    **facts: Any,
) -> Verdict:
    """The verdict on ``run``.

    ``baseline``: the baseline document compared against (None: no comparable baseline).
    ``comparison``: pass it when the caller already compared ``baseline`` with ``run`` (the
    default lookup compares to pick the first comparable file); computed otherwise.
    ``policy``: the manifest's gate policy for this mode (:func:`policy_from_manifest`).
    ``gate_enabled``: False for ``--golden-no-gate`` / ``--no-gate`` (reported, not gated: an
    incomparable baseline is reported, not fatal). ``capture``: a baseline capture run (not
    gated; FAILs are recorded as they are). ``pytest_status``: pytest's own exit status (None:
    the run's recorded ``pytestStatus``, else 0; the CLI passes 1 when the run has FAIL attempts
    and records none); ``other_failures``: a test that is not a golden
    item failed, which no gate may turn into a pass. ``facts``: more of
    :class:`~goldeval.verdict.outcome.RunOutcome` (a signal, a store error, ...) known to the
    caller; the run document's own facts are read from it.
    """
    notes: list[str] = []
    if comparison is None and baseline is not None:
        comparison = compare(baseline, run)
    gate: GateResult | None = None
    if capture:
        notes.append(CAPTURE_NOTE)
    elif gate_enabled and (policy is not None or live):
        # A run cut short (-x, a plugin's stop) is gated as incomplete: its stored gate said
        # PASS while the run exited 1 (the session records the stop after this decision).
        cut = facts.get("stopped_early") is not None and not run.incomplete
        gated = run.model_copy(update={"incomplete": True}) if cut else run
        gate = evaluate(gated, policy, baseline, comparison, live=live)
        if comparison is not None:
            comparison = attach_gate(comparison, gate)
    elif not gate_enabled:
        notes.append(NO_GATE_NOTE)
    if pytest_status is not None:
        facts["pytest_status"] = pytest_status
    outcome = RunOutcome.from_run(
        run,
        comparison,
        gate,
        gate_enabled=gate_enabled,
        capture=capture,
        other_failures=other_failures,
        capture_summary=capture_summary(run) if capture else None,
        **facts,
    )
    code, reason = decide_exit(outcome)
    if capture and code != 0:
        notes.append(f"baseline not saved: {reason}")
    return Verdict(code, reason, comparison, gate, notes, outcome)


# ---- a saved run against a baseline: `goldeval gate` / `goldeval compare` and the service


def run_dataset_id(run: RunDocument) -> str | None:
    """The run's dataset id (``protocol.datasetId``, else ``datasetVersion``): the manifest
    whose gate policy applies to it."""
    value = run.protocol.dataset_id if run.protocol is not None else None
    return value or run.dataset_version or None


def saved_run_policy(run: RunDocument, dataset_dir: Path) -> GatePolicy | None:
    """The gate policy of the manifest in ``dataset_dir`` for ``run``'s mode (None: the
    manifest gates nothing in this mode).

    A grader threshold must name a grader this run has a rate for, or a built-in one: outside
    pytest the project's own registered graders are not known.
    """
    manifest_path = find_manifest(dataset_dir)
    if manifest_path is None:
        raise GoldevalError("no dataset.yaml or dataset.json", path=dataset_dir)
    manifest = read_manifest(manifest_path)
    if manifest.gate is not None:
        names = set(grader_names(run)) | {g.name for g in [ContractGrader(), *builtin_graders()]}
        check_gate_policy(manifest.gate, manifest_path, names)
    return policy_from_manifest(manifest, run_mode(run) == "LIVE")


def decide_pair(
    run: RunDocument,
    baseline: RunDocument | None,
    *,
    dataset_dir: Path | None,
    gate_enabled: bool = True,
    comparison_asked: bool = False,
) -> Verdict:
    """The verdict on a saved ``run`` against ``baseline``, with the gate policy of the
    manifest in ``dataset_dir`` (the run's dataset): what ``goldeval compare``, ``goldeval
    gate``, the service's compare endpoint and its run page all report.

    ``dataset_dir`` may be None only with ``gate_enabled`` False: without the manifest the
    policy is unknown, and gating with none would be a silent NO_REGRESSION for any regressed
    run. As in pytest, a FAIL attempt is a failed test, which only a gate may weigh.
    ``comparison_asked``: the comparison is the command's product (``goldeval compare``, the
    compare endpoint): an incomparable pair is 65 with ``--no-gate`` too.
    """
    policy: GatePolicy | None = None
    # A variant's run with no baseline of its own was weighed by its session's paired
    # comparison alone (no manifest policy, no live-baseline rule: the pair saw the same rows
    # the same day); decided here the same way, so `goldeval gate` agrees with the session.
    # Only a run that holds its pair's comparison: a single-variant run is gated like any run.
    pair_alone = run.variant is not None and run.variant_comparison is not None and baseline is None
    if gate_enabled and not pair_alone:
        if dataset_dir is None:
            raise GoldevalError(
                "no gate policy: the run's dataset manifest was not found",
                hint="give the project that holds the dataset, or report without gating",
            )
        policy = saved_run_policy(run, dataset_dir)
    # The session's own pytestStatus when the run recorded it (RunOutcome reads it); else as
    # in pytest: a FAIL attempt is a failed test, which only a gate may weigh.
    session: dict[str, Any] = {}
    if "pytest_status" not in run.model_fields_set:
        session["pytest_status"] = GATE_FAILED if attempt_counts(run).failed else OK
    return decide(
        run,
        baseline=baseline,
        policy=policy,
        live=run_mode(run) == "LIVE" and not pair_alone,
        gate_enabled=gate_enabled,
        other_failures=bool(run.other_failures),
        comparison_asked=comparison_asked,
        **session,
    )
