"""The exit status of ``goldeval calibrate``: a judge calibration's outcome as a code.

``goldeval.judge.calibration.judge_calibration`` decides what was measured against the
manifest's bar; this maps the outcome to the project's exit codes, as every other verdict is.
"""

from __future__ import annotations

from goldeval.judge.calibration import CalibrationOutcome, CalibrationVerdict
from goldeval.verdict.exit_codes import CONFIG_ERROR, GATE_FAILED, INFRA, OK, USAGE, ExitDecision


def calibration_exit(verdict: CalibrationVerdict) -> ExitDecision:
    """0 only for a calibration that cleared its bar; 1 below it (the judge is not to be
    trusted, like a failed gate); 4 when nothing was measured (the judge's replies or the
    corpus must change); 75 when live judge calls failed and another try may fix them (4 when
    they cannot)."""
    outcome = verdict.outcome
    if outcome is CalibrationOutcome.PASSED:
        return ExitDecision(OK, f"calibration passed: {verdict.reason}")
    if outcome is CalibrationOutcome.BELOW_BAR:
        return ExitDecision(GATE_FAILED, f"calibration below the bar: {verdict.reason}")
    if outcome is CalibrationOutcome.NOTHING_MEASURED:
        return ExitDecision(USAGE, f"calibration measured nothing: {verdict.reason}")
    code = INFRA if verdict.retryable else CONFIG_ERROR
    return ExitDecision(code, f"calibration incomplete: {verdict.reason}")
