"""Gate policy checks of the manifest (issue 15 item 2): pure, no pytest run."""

from __future__ import annotations

from pathlib import Path

import pytest

from goldeval.core.errors import DatasetError
from goldeval.dataset.manifest import GATE_RATE_NAMES, check_gate_policy, read_manifest
from goldeval.verdict.gate import ABSOLUTE_METRICS, NEVER_GATED
from tests.helpers import assert_manifest_refused


def test_manifest_knows_exactly_the_gate_rate_names() -> None:
    assert set(GATE_RATE_NAMES) == set(ABSOLUTE_METRICS) | set(NEVER_GATED)


def _manifest(tmp_path: Path, gate: str) -> Path:
    path = tmp_path / "dataset.yaml"
    # The reference rates belong to the java-autotest profile (a generic dataset refuses them).
    path.write_text(f"version: x-v1\nprofile: java-autotest\ngate:\n{gate}", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "gate,field,fragment",
    [
        (
            "  fixture: {thresholds: {overallPasRate: 1.0}}\n",
            "gate.fixture.thresholds.overallPasRate",
            "did you mean 'overallPassRate'?",
        ),
        (
            "  live: {thresholds: {ragAcuracy: 0.5}}\n",
            "gate.live.thresholds.ragAcuracy",
            "did you mean 'ragAccuracy'?",
        ),
        (
            "  fixture: {thresholds: {'grader.': 1.0}}\n",
            "gate.fixture.thresholds.grader.",
            "names no grader",
        ),
        (
            "  fixture: {thresholds: {overallPassRate: 60}}\n",
            "gate.fixture.thresholds.overallPassRate",
            "write 0.6 for 60%",
        ),
        (
            "  fixture: {thresholds: {overallPassRate: .nan}}\n",
            "gate.fixture.thresholds.overallPassRate",
            "outside [0, 1]",
        ),
        (
            "  fixture: {thresholds: {hallucinationRate: 1.5}}\n",
            "gate.fixture.thresholds.hallucinationRate",
            "outside [0, 1]",
        ),
        ("  fixture: {allowedRegression: -0.1}\n", "gate.fixture.allowedRegression", "outside"),
        (
            "  fixture: {thresholds: {overallPassRate: '0.8'}}\n",
            "gate.fixture.thresholds.overallPassRate",
            "valid number",
        ),
        (
            "  fixture: {treshold: {overallPassRate: 0.8}}\n",
            "gate.fixture.treshold",
            "did you mean 'thresholds'?",
        ),
        (
            "  fixture: {allowedregression: 0.1}\n",
            "gate.fixture.allowedregression",
            "did you mean 'allowedRegression'?",
        ),
    ],
)
def test_bad_gate_policy_names_file_and_field(
    tmp_path: Path, gate: str, field: str, fragment: str
) -> None:
    path = _manifest(tmp_path, gate)
    assert_manifest_refused(path, field, fragment)


def test_good_gate_policy_reads(tmp_path: Path) -> None:
    path = _manifest(
        tmp_path,
        "  fixture: {thresholds: {overallPassRate: 1, hallucinationRate: 0.0, judgeAcceptRate: 0.5,"
        " grader.cites: 1.0}}\n  live: {allowedRegression: 0.05}\n",
    )
    manifest = read_manifest(path)
    assert manifest.gate is not None and manifest.gate.fixture is not None
    assert manifest.gate.fixture.thresholds["overallPassRate"] == 1.0


def test_grader_names_checked_once_known(tmp_path: Path) -> None:
    path = _manifest(tmp_path, "  fixture: {thresholds: {grader.citez: 1.0}}\n")
    manifest = read_manifest(path)  # the registered graders are not known to the reader
    assert manifest.gate is not None
    check_gate_policy(manifest.gate, path, {"citez"})
    expected = r"grader\.citez: no grader 'citez'.*did you mean 'cites'"
    with pytest.raises(DatasetError, match=expected):
        check_gate_policy(manifest.gate, path, {"cites", "json_schema"})
