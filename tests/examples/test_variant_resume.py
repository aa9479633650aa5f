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
