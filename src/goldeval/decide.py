"""Baseline lookup → comparison → gate → exit status, for one finished run (controller only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goldeval.baseline import (
    default_candidates,
    first_comparable,
    load_baseline,
    save_baseline,
)
from goldeval.comparison import ComparisonResult, compare
from goldeval.errors import BaselineError
from goldeval.exitcodes import COMPARISON_INVALID, GATE_FAILED, ExitDecision, decide_exit
from goldeval.gate import GatePolicy, GateResult, attach_gate, evaluate
from goldeval.manifest import Manifest

if TYPE_CHECKING:
    from goldeval.session import GoldenSession


@dataclass
class Decision:
    code: int
    reason: str
    run_fields: dict[str, Any] = field(default_factory=dict)
    #: The run should be saved as a baseline once run.json is on disk.
    save_baseline: bool = False


def policy_for(state: GoldenSession, live: bool) -> GatePolicy | None:
    return policy_from_manifest(state.load().manifest, live)


def policy_from_manifest(manifest: Manifest, live: bool) -> GatePolicy | None:
    """The gate policy a dataset manifest sets for a mode (pytest and the CLI share it)."""
    gate = manifest.gate
    if gate is None:
        return None
    mode_policy = gate.live if live else gate.fixture
    if mode_policy is None:
        return GatePolicy(allowed_regression=0.0) if live else None
    return GatePolicy(
        thresholds=dict(mode_policy.thresholds), allowed_regression=mode_policy.allowed_regression
    )


def find_baseline(
    state: GoldenSession, run: dict[str, Any], live: bool
) -> tuple[Path | None, dict[str, Any] | None, ComparisonResult | None]:
    """Explicit ``--golden-baseline``, else the first comparable file of the default lookup."""
    explicit = state.settings.baseline
    if explicit:
        path = Path(explicit)
        if not path.is_absolute():
            path = Path(state.config.invocation_params.dir) / path
        doc = load_baseline(path)
        return path, doc, compare(doc, run)
    found = first_comparable(
        default_candidates(state.project_root / "baselines", state.load().id, live), run
    )
    return found if found is not None else (None, None, None)


def decide(
    state: GoldenSession, run: dict[str, Any], pytest_status: int, *, live: bool
) -> Decision:
    fields: dict[str, Any] = {}
    # Notes already on the run (build_for's judge self-preference warning, ...) are kept:
    # fields["notes"] replaces the run's list, so it must start from it.
    notes: list[str] = list(run.get("notes") or [])
    comparison: ComparisonResult | None = None
    gate: GateResult | None = None
    baseline: dict[str, Any] | None = None
    capture = state.settings.save_baseline is not None
    try:
        path, baseline, comparison = (
            (None, None, None) if capture else find_baseline(state, run, live)
        )
    except BaselineError as exc:
        reason = f"baseline rejected: {exc}"
        fields["exitDecision"] = {"code": COMPARISON_INVALID, "reason": reason}
        fields["notes"] = [*notes, reason]
        return Decision(COMPARISON_INVALID, reason, fields)
    if path is not None:
        fields["baselinePath"] = str(path)
    policy = policy_for(state, live)
    if capture:
        notes.append("capture run: the gate is not applied when saving a baseline")
    elif state.settings.gate and (policy is not None or live):
        gate = evaluate(run, policy, baseline, comparison, live=live)
        if comparison is not None:
            comparison = attach_gate(comparison, gate)
    elif not state.settings.gate:
        notes.append("--golden-no-gate: metrics reported, exit status not gated")
    if comparison is not None:
        fields["comparison"] = comparison.dump()
    if gate is not None:
        fields["qualityGate"] = gate.dump()
    run_view = {**run, **fields}
    if (gate is not None or capture) and pytest_status == 1 and not state.other_failures:
        # Failed golden items are what the gate weighs: with a gate, it decides, not pytest's
        # "some test failed"; a capture run records FAILs as they are (a live baseline with red
        # rows expects them). The user's own failing tests still give 1.
        pytest_status = 0
    exit_decision: ExitDecision = decide_exit(
        run_view,
        # --golden-no-gate is report-only: an incomparable baseline is reported, not fatal.
        comparison if state.settings.gate else None,
        gate,
        pytest_status=pytest_status,
    )
    code, reason = exit_decision.code, exit_decision.reason
    if capture and code != 0:
        notes.append(f"baseline not saved: {reason}")
    fields["notes"] = notes
    fields["exitDecision"] = {"code": code, "reason": reason}
    return Decision(code, reason, fields, save_baseline=capture and code == 0)


def save_requested_baseline(
    state: GoldenSession, run: dict[str, Any], run_json: Path, decision: Decision
) -> Decision:
    """Save the just-written run.json (full cases) as the requested baseline."""
    import json

    save_path = Path(state.settings.save_baseline or "")
    if not save_path.is_absolute():
        save_path = Path(state.config.invocation_params.dir) / save_path
    notes = list(run.get("notes") or [])
    code, reason = decision.code, decision.reason
    try:
        full = json.loads(run_json.read_text(encoding="utf-8"))
        save_baseline(full, save_path, force=state.settings.force_save_baseline)
        notes.append(f"baseline saved to {save_path}")
    except BaselineError as exc:
        code, reason = GATE_FAILED, f"baseline not saved: {exc}"
        notes.append(reason)
    fields = {"notes": notes, "exitDecision": {"code": code, "reason": reason}}
    return Decision(code, reason, fields)
