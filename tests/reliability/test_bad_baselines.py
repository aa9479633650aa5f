"""A baseline that cannot be trusted is never compared with: exit 65 with its reason, no pass.

Black-box: the committed generation-v1 baseline is damaged in the pytester project the way a
hand edit, a bad merge or a partial write would damage it, then ``pytest --golden=...`` runs.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers import RunFiles

BASELINE = "baselines/generation-v1.json"


def _edit(mutate: Callable[[dict], object]) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        doc = json.loads(path.read_text(encoding="utf-8"))
        mutate(doc)
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")

    return apply


def _hand_edited_metric(doc: dict) -> None:
    doc["metrics"]["overallPassRate"]["hits"] -= 1
    doc["metrics"]["overallPassRate"]["rate"] = 0.9


def _counters_off(doc: dict) -> None:
    doc["casesFailed"] += 1


def _attempt_counters_off(doc: dict) -> None:
    doc["attemptsPassed"] -= 1


def _case_removed(doc: dict) -> None:
    doc["cases"].pop()


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


SCENARIOS: dict[str, tuple[Callable[[Path], None], list[str], str]] = {
    # name: (damage, extra pytest args, reason fragment on the "goldeval decision" line)
    "hand-edited-metric": (
        _edit(_hand_edited_metric),
        [],
        "metrics.overallPassRate: stored 9/10 but the attempts give 10/10",
    ),
    "case-counters": (
        _edit(_counters_off),
        [],
        "casesTotal: case counters do not add up to casesTotal",
    ),
    "attempt-counters": (
        _edit(_attempt_counters_off),
        [],
        "attemptsTotal: attempt counters do not add up to attemptsTotal",
    ),
    "case-removed": (
        _edit(_case_removed),
        [],
        "cases: 9 cases listed but casesTotal is 10",
    ),
    "other-dataset-protocol": (
        lambda p: None,
        ["--golden-baseline=baselines/holdout-v1.json"],
        "comparison invalid: datasetId mismatch: baseline holdout-v1 vs candidate generation-v1",
    ),
    "truncated": (_truncate, [], "invalid JSON"),
    "non-object": (lambda p: p.write_text("[1, 2, 3]\n"), [], "a baseline must be a JSON object"),
    "empty-file": (lambda p: p.write_bytes(b""), [], "invalid JSON: Expecting value"),
    "not-utf8": (lambda p: p.write_bytes(b"\xff\xfe{\x00}"), [], "not valid UTF-8"),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_bad_baseline_gives_65_and_its_reason(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, scenario: str
) -> None:
    damage, extra, reason = SCENARIOS[scenario]
    damage(golden_project / BASELINE)
    before_history = _history(golden_project)
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1", *extra)
    out = result.stdout.str()
    assert result.ret == 65, out
    decision = [ln for ln in result.stdout.lines if ln.startswith("goldeval decision:")]
    assert len(decision) == 1, out
    assert decision[0].startswith("goldeval decision: exit 65 — ")
    assert reason in decision[0], decision[0]
    if scenario != "other-dataset-protocol":
        assert str(golden_project / BASELINE) in decision[0]  # the file is named
    assert "GATE PASS" not in out and "NO_REGRESSION" not in out
    assert "Traceback" not in out
    # Refused before any item ran (issue 15): nothing graded, nothing recorded.
    assert "refused before any item ran" in decision[0]
    _assert_nothing_recorded(golden_project, before_history)


def test_bug_incomparable_baseline_run_is_recorded_as_gate_pass(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--golden=generation-v1",
        "--golden-baseline=baselines/holdout-v1.json",
    )
    assert result.ret == 65
    # Since issue 15 the incomparable baseline is refused before any item runs: no history line
    # at all, so none can say PASS.
    assert _history(golden_project) == []


def test_bad_baseline_under_xdist(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    _edit(_hand_edited_metric)(golden_project / BASELINE)
    before_history = _history(golden_project)
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1", "-n", "2")
    assert result.ret == 65, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["goldeval decision: exit 65 — baseline rejected: *metrics.overallPassRate: stored 9/10*"]
    )
    _assert_nothing_recorded(golden_project, before_history)


def _history(project: Path) -> list[dict]:
    path = project / ".goldeval" / "runs" / "history.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _assert_nothing_recorded(project: Path, before_history: list[dict]) -> None:
    """The run was refused before any item ran: no run folder, history line or stored run.

    (Before issue 15 the whole run was graded first and recorded with exit 65; a baseline that
    cannot be compared with is now known before the first model call.)
    """
    runs = project / ".goldeval" / "runs"
    assert not (runs / "LATEST").exists()
    assert not any(p.is_dir() for p in runs.glob("*")) if runs.is_dir() else True
    assert _history(project)[len(before_history) :] == []
    db = project / ".goldeval" / "goldeval.sqlite3"
    if db.exists():
        with contextlib.closing(sqlite3.connect(db)) as conn:
            assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 0
