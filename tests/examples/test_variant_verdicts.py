"""One verdict for a variant session on every surface (issue 35), on examples/prompt-ab in
fixture mode: the session's exit status, each variant's run.json and `goldeval gate` on each
variant's run folder (and on the latest run) agree, and nothing the pair did not weigh turns
into a pass.

Each case below was a false green or a disagreement before:
- a `-k` selection that takes some cases of one side only: the candidate's FAILs on the
  unselected control cases were weighed by nothing, and the pair said NON_INFERIOR (exit 0);
- ERROR attempts of the candidate: the session exited 4, the control's run said 0 and
  `goldeval gate` on the latest run (the control's) said GATE PASS;
- a variant outside the compared pair failing every row: the session exited 0;
- both variants failing one row: the session exited 0 and `goldeval gate` on either run
  folder exited 1 (it applied the manifest's thresholds the session does not apply to a
  variant without a baseline of its own).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.examples.test_examples import copy_example
from tests.examples.test_variant_baselines import _latest_runs
from tests.helpers import run_cli

SOLD_OUT = ("stock-blue-hour", "stock-night-trains", "stock-wild-thyme")
FIXTURES = "golden/faq-ab/fixtures"


def _gates(project: Path) -> dict[str, int]:
    """`goldeval gate` on each variant's run folder, and on the latest run."""
    codes = {}
    for run_json in (project / ".goldeval/runs").glob("*/run.json"):
        name = json.loads(run_json.read_text(encoding="utf-8"))["variant"]
        codes[name] = run_cli("gate", str(run_json.parent), cwd=project).returncode
    codes["LATEST"] = run_cli("gate", cwd=project).returncode
    return codes


def _recorded(project: Path) -> dict[str, int]:
    return {name: run["exitDecision"]["code"] for name, run in _latest_runs(project).items()}


@pytest.mark.parametrize("args", [[], ["-n", "2"]], ids=["serial", "xdist2"])
def test_a_selection_of_one_side_only_is_never_green(
    pytester: pytest.Pytester, args: list[str]
) -> None:
    project = copy_example("prompt-ab", pytester)
    for case in SOLD_OUT:
        (project / FIXTURES / "concise" / f"{case}.out.md").write_text("sold out\n")
    whole = pytester.runpytest("--golden=faq-ab-v1", *args)
    assert whole.ret == 1, whole.stdout.str()  # INCONCLUSIVE on the 40 cases
    picked = " or ".join(SOLD_OUT)
    # The candidate's three FAILs are selected; the control's three cases are not.
    result = pytester.runpytest("--golden=faq-ab-v1", "-k", f"not (({picked}) and control)", *args)
    assert result.ret == 1, result.stdout.str()
    cmp = _latest_runs(project)["concise"]["variantComparison"]
    assert cmp["decision"] == "INCONCLUSIVE"
    assert cmp["unpaired"] == 3
    assert "did not grade the same selection (3 case(s) graded by one side only)" in cmp["reason"]
    assert set(_recorded(project).values()) == {1}
    assert set(_gates(project).values()) == {1}


def test_an_uneven_attempt_selection_is_never_green(pytester: pytest.Pytester) -> None:
    """Two attempts per case, the control's second attempt of three cases left out."""
    project = copy_example("prompt-ab", pytester)
    picked = " or ".join(SOLD_OUT)
    result = pytester.runpytest(
        "--golden=faq-ab-v1",
        "--golden-attempts=2",
        "-k",
        f"not (({picked}) and attempt2 and control)",
    )
    cmp = _latest_runs(project)["concise"]["variantComparison"]
    assert cmp["unevenCases"] == 3 and cmp["unpaired"] == 0
    assert cmp["decision"] == "INCONCLUSIVE", cmp["reason"]
    assert result.ret == 1, result.stdout.str()


def test_error_attempts_of_one_side_leave_no_green_run(pytester: pytest.Pytester) -> None:
    project = copy_example("prompt-ab", pytester)
    for case in SOLD_OUT[:2]:
        (project / FIXTURES / "concise" / f"{case}.out.json").write_text('{"toolCalls": [')
    result = pytester.runpytest("--golden=faq-ab-v1")
    assert result.ret == 4, result.stdout.str()  # a broken fixture: CONFIG_ERROR attempts
    runs = _latest_runs(project)
    assert runs["concise"]["variantComparison"]["ungradedAttempts"] == {
        "control": 0,
        "candidate": 2,
    }
    assert runs["control"]["variantComparison"]["decision"] == "INCONCLUSIVE"
    recorded, gates = _recorded(project), _gates(project)
    assert 0 not in recorded.values(), recorded
    assert 0 not in gates.values(), gates


def test_a_variant_outside_the_pair_is_weighed_by_no_pair(pytester: pytest.Pytester) -> None:
    """A third variant fails every row: its FAIL attempts stay failed tests (exit 1), on
    every surface; the pair's NON_INFERIOR is the pair's."""
    project = copy_example("prompt-ab", pytester)
    manifest = project / "golden/faq-ab/dataset.yaml"
    text = manifest.read_text(encoding="utf-8")
    control = "  - {name: control}"
    assert control in text
    third = "  - {name: alt, options: {temperature: 0.9}}"  # sorts first: written first
    manifest.write_text(text.replace(control, control + "\n" + third, 1), encoding="utf-8")
    alt = project / FIXTURES / "alt"
    alt.mkdir()
    for path in (project / FIXTURES / "concise").glob("*.out.md"):
        (alt / path.name).write_text("sold out\n")
    result = pytester.runpytest("--golden=faq-ab-v1")
    assert result.ret == 1, result.stdout.str()
    runs = _latest_runs(project)
    assert runs["concise"]["variantComparison"]["decision"] == "NON_INFERIOR"
    recorded, gates = _recorded(project), _gates(project)
    assert recorded["alt"] == 1 and gates["alt"] == 1
    assert recorded["concise"] == gates["concise"] == 0
    # LATEST names the run that decided the session, not the last one written (control's)
    assert gates["LATEST"] == 1


def test_goldeval_gate_decides_a_variant_run_as_its_session_did(
    pytester: pytest.Pytester,
) -> None:
    """Both variants fail one row: the pair is NON_INFERIOR and neither variant has a
    baseline of its own, so the session exits 0 without the manifest's thresholds; `goldeval
    gate` on either run folder says the same."""
    project = copy_example("prompt-ab", pytester)
    for name in ("control", "concise"):
        (project / FIXTURES / name / "stock-blue-hour.out.md").write_text("sold out\n")
    result = pytester.runpytest("--golden=faq-ab-v1")
    assert result.ret == 0, result.stdout.str()
    gates: dict[str, Any] = _gates(project)
    assert gates == {"control": 0, "concise": 0, "LATEST": 0}, gates


def test_a_variant_session_finishes_its_run_hook_once_with_the_session_s_decision(
    pytester: pytest.Pytester,
) -> None:
    """`pytest_goldeval_run_finished` fires for a variant session too (it never did): the
    `--junitxml` global properties say the session's exit code."""
    import xml.etree.ElementTree as ET

    project = copy_example("prompt-ab", pytester)
    for case in SOLD_OUT:
        (project / FIXTURES / "concise" / f"{case}.out.md").write_text("sold out\n")
    result = pytester.runpytest(
        "--golden=faq-ab-v1", "-o", "golden_junit_properties=true", "--junitxml=j.xml"
    )
    assert result.ret == 1, result.stdout.str()
    suite = ET.parse(project / "j.xml").getroot().find("testsuite")
    assert suite is not None
    props = suite.find("properties")
    assert props is not None
    values = [(p.get("name"), p.get("value")) for p in props.iter("property")]
    assert ("golden.exitCode", "1") in values
    assert [name for name, _ in values].count("golden.exitCode") == 1
