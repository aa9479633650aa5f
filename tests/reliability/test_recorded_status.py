"""A run whose recorded status is no whole end is never gated 0 (found by a probe).

- ``goldeval gate`` passed a run.json whose ``status`` said INCOMPLETE, FAILED, QUEUED or an
  unknown word (the baseline side refused them, the candidate side did not): the exit
  table's RUNNING rule now covers every status but COMPLETED/INTERRUPTED that has no cause
  of its own recorded.
- A run key's later session, killed after it began recording, leaves the store row RUNNING
  over the first session's COMPLETED document: ``goldeval gate --run-key`` and ``show`` read
  that document's gate PASS and exit 0. The row's status wins now.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goldeval.store import open_store
from tests.helpers import app_provider_conftest, make_bot_dataset, run_cli

GATE = "    thresholds:\n      overallPassRate: 0.5\n"
INFRA = 75


@pytest.fixture
def passed_run(pytester: pytest.Pytester) -> Path:
    make_bot_dataset(pytester.path, GATE)
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=bot-v1", "--golden-run-key=K")
    assert result.ret == 0, result.stdout.str()[-2000:]
    latest = (pytester.path / ".goldeval" / "runs" / "LATEST").read_text().strip()
    return Path(latest) / "run.json"


@pytest.mark.parametrize("status", ["INCOMPLETE", "FAILED", "QUEUED"])
def test_a_run_json_of_another_status_is_not_gated_zero(
    passed_run: Path, pytester: pytest.Pytester, status: str
) -> None:
    doc = json.loads(passed_run.read_text(encoding="utf-8"))
    doc["status"] = status
    edited = pytester.path / f"{status}.json"
    edited.write_text(json.dumps(doc), encoding="utf-8")
    gate = run_cli("gate", str(edited), cwd=pytester.path)
    assert gate.returncode == INFRA, gate.stdout + gate.stderr
    assert f"the run document says {status!r}" in gate.stdout
    compare = run_cli("compare", str(passed_run), str(edited), "--no-gate", cwd=pytester.path)
    assert compare.returncode != 0, compare.stdout + compare.stderr


def test_the_unedited_run_still_passes(passed_run: Path, pytester: pytest.Pytester) -> None:
    gate = run_cli("gate", str(passed_run), cwd=pytester.path)
    assert gate.returncode == 0, gate.stdout + gate.stderr


def test_a_killed_later_session_of_the_run_key_is_not_gated_on_the_first(
    passed_run: Path, pytester: pytest.Pytester
) -> None:
    before = run_cli("gate", "--run-key", "K", cwd=pytester.path)
    assert before.returncode == 0, before.stdout + before.stderr
    store = open_store(pytester.path / ".goldeval" / "goldeval.sqlite3")
    try:
        row = store.get_run("K")
        assert row is not None and row.status == "COMPLETED"
        # What a resumed session does as it records its first attempt; then it is killed
        # (SIGKILL: nothing of it runs again).
        store.begin_run(
            "later-session",
            run_key="K",
            dataset_id=row.dataset_id,
            dataset_hash=row.dataset_hash,
            mode=row.mode,
            protocol=row.protocol,
            configuration=row.configuration,
        )
    finally:
        store.close()
    gate = run_cli("gate", "--run-key", "K", cwd=pytester.path)
    assert gate.returncode == INFRA, gate.stdout + gate.stderr
    show = run_cli("show", "K", cwd=pytester.path)
    assert show.returncode == 0, show.stderr
    assert "Status: RUNNING" in show.stdout and "Exit status 0" not in show.stdout
    assert "the store run is RUNNING but the last finished session recorded COMPLETED" in (
        show.stdout
    )


def test_report_md_shows_the_gate_word_every_surface_shows(pytester: pytest.Pytester) -> None:
    """A gate that passed its rules beside an ERROR attempt: report.md said "Quality gate
    **PASS**" while the run exits 75 (the run page and JUnit said "PASS, but the run exits
    75")."""
    make_bot_dataset(pytester.path, GATE)
    pytester.makeconftest(app_provider_conftest("golden/bot/fixtures", "order-number", '"fail"'))
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=bot-v1")
    assert result.ret == INFRA, result.stdout.str()[-2000:]
    latest = Path((pytester.path / ".goldeval" / "runs" / "LATEST").read_text().strip())
    if not (latest / "report.md").is_file():  # a run exiting 75 does not move LATEST
        latest = max((pytester.path / ".goldeval" / "runs").glob("20*"))
    report = (latest / "report.md").read_text(encoding="utf-8")
    assert "**PASS, but the run exits 75**" in report
    assert "**PASS**" not in report


def test_a_status_goldeval_never_writes_is_no_run_to_gate(
    passed_run: Path, pytester: pytest.Pytester
) -> None:
    doc = json.loads(passed_run.read_text(encoding="utf-8"))
    doc["status"] = "foo"
    edited = pytester.path / "foo.json"
    edited.write_text(json.dumps(doc), encoding="utf-8")
    gate = run_cli("gate", str(edited), cwd=pytester.path)
    assert gate.returncode == 65, gate.stdout + gate.stderr
    assert "status:" in gate.stderr and "'INCOMPLETE'" in gate.stderr  # the field, refused
    assert "Traceback" not in gate.stderr


@pytest.mark.parametrize("status", ["RUNNING", "FAILED", "INCOMPLETE"])
def test_show_and_site_never_say_pass_for_a_run_that_is_not_whole(
    passed_run: Path, pytester: pytest.Pytester, status: str
) -> None:
    """A re-probe: `goldeval show` and the site printed "Quality gate **PASS**" for a run.json
    whose status said it did not end whole (gate itself exits 75 there)."""
    doc = json.loads(passed_run.read_text(encoding="utf-8"))
    doc["status"] = status
    edited = pytester.path / "edited" / "run.json"
    edited.parent.mkdir()
    edited.write_text(json.dumps(doc), encoding="utf-8")
    show = run_cli("show", str(edited), cwd=pytester.path)
    assert f"**PASS, but the run is {status}**" in show.stdout, show.stdout
    assert "**PASS**" not in show.stdout
