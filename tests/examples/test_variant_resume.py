"""A variant session resumed with ``--golden-run-key`` (issue 35), on examples/prompt-ab in
fixture mode, serially and under xdist: a later session runs only what the key's stored run
does not hold, per variant, and every variant's run is built from all its attempts."""

from __future__ import annotations

import pytest

from goldeval.store import open_store
from tests.examples.test_examples import copy_example
from tests.examples.test_variant_baselines import _latest_runs

KEY = "--golden-run-key=ab-1"


@pytest.mark.parametrize("args", [[], ["-n", "2"]], ids=["serial", "xdist2"])
def test_a_resumed_variant_session_runs_only_what_is_missing(
    pytester: pytest.Pytester, args: list[str]
) -> None:
    project = copy_example("prompt-ab", pytester)
    first = pytester.runpytest("--golden=faq-ab-v1", KEY, "-k", "price", *args)
    # (-k's deselection is counted by the workers under xdist: only what ran is compared)
    assert first.parseoutcomes().get("passed") == 40
    assert first.ret == 1  # 20 paired cases cannot show a 10-point margin: INCONCLUSIVE

    second = pytester.runpytest("--golden=faq-ab-v1", KEY, *args)
    # the price rows were graded before: only the other 20 rows × 2 variants run
    assert second.parseoutcomes().get("passed") == 40
    assert second.ret == 0, second.stdout.str()
    runs = _latest_runs(project)
    for name in ("control", "concise"):
        assert runs[name]["attemptsTotal"] == 40
        assert runs[name]["variantComparison"]["cases"] == 40
    assert runs["concise"]["variantComparison"]["decision"] == "NON_INFERIOR"
    assert runs["concise"]["runId"] != runs["control"]["runId"]

    third = pytester.runpytest("--golden=faq-ab-v1", KEY, *args)
    assert third.ret == 0, third.stdout.str()  # every attempt graded before: not "no tests"
    assert "passed" not in third.parseoutcomes()
    assert _latest_runs(project)["control"]["attemptsTotal"] == 40

    with open_store(project / ".goldeval/goldeval.sqlite3") as store:
        row = store.get_run("ab-1")
        assert row is not None
        attempts = store.attempts(row.run_id)
    assert len(attempts) == 80
    assert sorted({a["variant"] for a in attempts}) == ["concise", "control"]


def test_a_store_that_fails_during_a_variant_session_is_no_green(
    pytester: pytest.Pytester,
) -> None:
    """Session 2 of a run key cannot read what session 1 stored (a real SQLite failure: the
    cases table is gone): its 40 new attempts alone would be NON_INFERIOR, but a run whose
    earlier attempts could not be read exits 75, as a single run does, never 0."""
    import sqlite3

    project = copy_example("prompt-ab", pytester)
    first = pytester.runpytest("--golden=faq-ab-v1", KEY, "-k", "price")
    assert first.parseoutcomes().get("passed") == 40
    conn = sqlite3.connect(project / ".goldeval/goldeval.sqlite3")
    conn.execute("ALTER TABLE run_cases RENAME TO run_cases_gone")
    conn.commit()
    conn.close()
    second = pytester.runpytest("--golden=faq-ab-v1", KEY)
    assert second.ret == 75, second.stdout.str()
    runs = _latest_runs(project)
    assert runs["concise"]["exitDecision"]["code"] == 75


def test_a_variant_session_s_stored_run_is_never_regated_as_one_run(
    pytester: pytest.Pytester,
) -> None:
    """The stored run holds both variants' attempts together: `goldeval gate --run-key`
    refuses it (exit 4, naming the variants) instead of a verdict that is not the
    session's; each variant's run folder is gated on its own."""
    from tests.helpers import run_cli

    project = copy_example("prompt-ab", pytester)
    session = pytester.runpytest("--golden=faq-ab-v1", KEY)
    assert session.ret == 0, session.stdout.str()
    gated = run_cli("gate", "--run-key", "ab-1", cwd=project)
    assert gated.returncode == 4, gated.stdout + gated.stderr
    assert "is a variant session (concise, control side by side)" in gated.stderr
    for run_json in (project / ".goldeval/runs").glob("*/run.json"):
        folder = run_cli("gate", str(run_json.parent), cwd=project)
        assert folder.returncode == 0, folder.stdout + folder.stderr
