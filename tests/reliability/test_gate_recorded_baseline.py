"""``goldeval gate`` decides a saved run against the baseline it was compared with when it
ran. It looked only in the default place (baselines/): a run gated against
``--golden-baseline=elsewhere.json`` that failed a delta rule (exit 1) was gated again on its
thresholds alone and passed (exit 0). Now the recorded baseline is found (its path, else its
run id) or the gate refuses (4): never a silent drop of the rules that failed the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import RunFiles, make_bot_dataset, run_cli


@pytest.fixture
def bot(pytester: pytest.Pytester) -> Path:
    make_bot_dataset(
        pytester.path, "    thresholds:\n      overallPassRate: 0.5\n    allowedRegression: 0.0\n"
    )
    pytester.makeini("[pytest]\n")
    return pytester.path


def test_gate_uses_the_baseline_the_run_was_compared_with(
    pytester: pytest.Pytester, bot: Path
) -> None:
    saved = pytester.runpytest(
        "-p", "no:cacheprovider", "--golden=bot-v1", "--golden-save-baseline=elsewhere/b.json"
    )
    assert saved.ret == 0, saved.stdout.str()
    (bot / "golden/bot/fixtures/greeting.out.md").write_text("Goodbye.\n", encoding="utf-8")
    ran = pytester.runpytest(
        "-p", "no:cacheprovider", "--golden=bot-v1", "--golden-baseline=elsewhere/b.json"
    )
    assert ran.ret == 1, ran.stdout.str()  # a new failure against the baseline
    gate = run_cli("gate", cwd=bot)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    assert "overallPassRate.delta" in gate.stdout
    # The baseline gone, and its run id naming nothing here: refused, not gated without it.
    (bot / "elsewhere/b.json").unlink()
    run_json = RunFiles(bot).latest_dir() / "run.json"
    doc = json.loads(run_json.read_text(encoding="utf-8"))
    doc["comparison"]["baselineRunId"] = "no-such-run"
    run_json.write_text(json.dumps(doc), encoding="utf-8")
    refused = run_cli("gate", cwd=bot)
    assert refused.returncode == 4, refused.stdout + refused.stderr
    assert "compared with a baseline when it ran" in refused.stderr
    assert "GATE PASS" not in refused.stdout
    # Asked for by name, or no gate at all: as the user says (no gate: the FAIL stays a 1).
    assert run_cli("gate", "--no-gate", cwd=bot).returncode == 1
