"""Adaptive attempts (issue 35, ``--golden-attempts=auto:MAX``) against the real fake model
server on 127.0.0.1: extra attempts go only to the cases whose variants disagree or whose
outcome is mixed, until the paired comparison decides or MAX is reached; the attempts the
rule leaves out are skipped before any call and are no attempts of the run."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from goldeval.testing.llm_server import FakeLLMServer
from tests.helpers import chat_calls
from tests.live.test_variants import _live

VARIANTS = """
variants:
  - {name: control, model: m-good}
  - {name: candidate, model: m-bad}
"""
CASES = 10


def _manifest(project: Path, margin: float) -> None:
    path = project / "golden/generation/dataset.yaml"
    text = path.read_text(encoding="utf-8") + VARIANTS
    compare = f"  compare: {{control: control, candidate: candidate, nonInferiority: {margin}}}\n"
    path.write_text(text.replace("\ngate:\n", "\ngate:\n" + compare, 1), encoding="utf-8")


def _runs(project: Path) -> dict[str, dict[str, Any]]:
    runs = [json.loads(p.read_text()) for p in (project / ".goldeval/runs").glob("*/run.json")]
    return {r["variant"]: r for r in runs}


def _calls_by_model(server: FakeLLMServer) -> Counter[str]:
    return Counter(
        r.model for r in server.requests if r.path in ("/api/chat", "/v1/chat/completions")
    )


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_only_unsettled_cases_get_more_attempts(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    golden_project: Path,
    xdist: tuple[str, ...],
) -> None:
    """Two rows fail for the candidate every time: every case gets a second attempt (one
    agreeing attempt settles nothing), then only those two cases get attempts 3..4 (the
    comparison stays undecided at a 30-point margin on 10 cases); the eight others, where
    both variants pass twice, stay at two."""
    _manifest(golden_project, 0.3)
    replay = llm_server.responder
    broken: set[str] = set()

    lock = threading.Lock()  # the server answers calls of two workers at once (-n 2)

    def responder(req: Any) -> Any:
        prompt = req.last_user_message or ""
        with lock:
            if req.model == "m-bad" and (prompt in broken or len(broken) < 2):
                broken.add(prompt)
                return "broken"
        return replay(req)

    llm_server.responder = responder
    result = pytester.runpytest(*_live(llm_server, "--golden-attempts=auto:4", "-rs", *xdist))
    runs = _runs(golden_project)
    cmp = runs["candidate"]["variantComparison"]
    adaptive = runs["candidate"]["adaptiveAttempts"]
    assert adaptive == runs["control"]["adaptiveAttempts"]
    assert adaptive["rule"] == "auto:4" and adaptive["decidedAfterRound"] is None
    # Rounds 1-2: every case on both sides; rounds 3-4: the two broken cases on both sides.
    assert adaptive["attemptsByRound"] == {"1": 2 * CASES, "2": 2 * CASES, "3": 4, "4": 4}
    assert adaptive["notNeeded"] == 2 * (CASES - 2) * 2
    assert chat_calls(llm_server) == 4 * CASES + 2 * 4
    per_case = {c["caseId"]: len(c["attempts"]) for c in runs["candidate"]["cases"]}
    assert sorted(per_case.values()) == [2] * (CASES - 2) + [4, 4]
    assert sorted(cmp["flippedWorse"]) == sorted(c for c, n in per_case.items() if n == 4)
    assert runs["candidate"]["protocol"]["attemptsRule"] == "auto:4"
    assert runs["candidate"]["protocol"]["attempts"] == 4
    assert "selectedAttempts" not in runs["candidate"]["protocol"]
    # The left-out attempts are no SKIPPED attempts of the run.
    statuses = [a["status"] for c in runs["candidate"]["cases"] for a in c["attempts"]]
    assert "SKIPPED" not in statuses and "stoppedEarly" not in runs["candidate"]
    result.stdout.fnmatch_lines(["*not needed: both variants agree on*(settled before round 3;*"])
    assert "settled before round 4" in result.stdout.str()
    assert cmp["decision"] == "INCONCLUSIVE" and result.ret == 1


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_decided_comparison_stops_every_extra_attempt(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    golden_project: Path,
    xdist: tuple[str, ...],
) -> None:
    """A candidate broken on every row is INFERIOR after round 1: no attempt after it."""
    _manifest(golden_project, 0.05)
    replay = llm_server.responder
    llm_server.responder = lambda req: "broken" if req.model == "m-bad" else replay(req)
    result = pytester.runpytest(*_live(llm_server, "--golden-attempts=auto:5", "-rs", *xdist))
    assert result.ret == 1, result.stdout.str()
    # Every later round names the round the comparison decided after, not the one before it.
    result.stdout.fnmatch_lines(["*not needed: the comparison decided (FAIL) after round 1 *"])
    assert "after round 2" not in result.stdout.str()
    adaptive = _runs(golden_project)["candidate"]["adaptiveAttempts"]
    assert adaptive["decidedAfterRound"] == 1
    assert adaptive["attemptsByRound"] == {"1": 2 * CASES}
    assert adaptive["notNeeded"] == 4 * CASES * 2
    assert _calls_by_model(llm_server) == Counter({"m-good": CASES, "m-bad": CASES})
    assert _runs(golden_project)["candidate"]["variantComparison"]["decision"] == "INFERIOR"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--golden-attempts=auto:1",), "*auto:MAX needs a MAX of at least 2*"),
        (("--golden-attempts=auto:x",), "*'x' is not a whole number*"),
        (("--golden-attempts=auto:21",), "*at most auto:20*"),
        (
            ("--golden-attempts=auto:3", "-n", "2", "--dist=loadscope"),
            "*its own scheduler, built on --dist=load*leave out --dist=loadscope*",
        ),
        (("--golden-attempts=auto:3", "-n", "2", "-k", "not attempt2"), "*whole cases*1, 3*"),
        (
            ("--golden-attempts=auto:3", "--tx", "ssh=nohost.invalid//python=python3", "-d"),
            "*remote xdist workers (--tx ssh=nohost.invalid*) cannot read*",
        ),
        (("--golden-attempts=auto:3", "--golden-run-key=k"), "*cannot resume a run key*"),
        (("--golden-attempts=auto:3", "-k", "not attempt2"), "*takes whole cases*1, 3*"),
        (("--golden-attempts=auto:3", "-k", "control"), "*takes whole cases*variant candidate*"),
        (
            ("--golden-attempts=auto:3", "--golden-variants=control"),
            "*needs a dataset whose manifest has `variants:` and `gate.compare`*",
        ),
    ],
)
def test_auto_attempts_refused_where_its_rule_cannot_work(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    golden_project: Path,
    extra: tuple[str, ...],
    message: str,
) -> None:
    _manifest(golden_project, 0.05)
    result = pytester.runpytest(*_live(llm_server, *extra))
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([message])
    assert not llm_server.requests


def test_a_stopped_xdist_session_leaves_later_rounds_unplanned_and_never_green(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    """``-x`` under ``-n 2``: the first FAIL stops the session in round 1; an item of round 2
    a worker already held runs without a plan (skipped as never planned, no call) and the
    run is incomplete; the session ends at once with pytest's failure, never green."""
    _manifest(golden_project, 0.05)
    replay = llm_server.responder
    llm_server.responder = lambda req: "broken" if req.model == "m-bad" else replay(req)
    result = pytester.runpytest(*_live(llm_server, "--golden-attempts=auto:4", "-x", "-n", "2"))
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "INTERNALERROR" not in out and "GATE PASS" not in out
    adaptive = _runs(golden_project)["candidate"]["adaptiveAttempts"]
    assert set(adaptive["attemptsByRound"]) == {"1"}  # round 2 was never released
    assert chat_calls(llm_server) <= 2 * CASES  # no call of a later round


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_stop_in_a_later_round_counts_only_the_attempts_that_ran(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    golden_project: Path,
    xdist: tuple[str, ...],
) -> None:
    """``-x`` stops in round 2 (the candidate fails its second call of a prompt): run.json's
    ``attemptsByRound`` counts the attempts the run holds, not the rounds planned, and no
    round is planned or called after the stop."""
    _manifest(golden_project, 0.01)
    replay = llm_server.responder
    seen: Counter[str] = Counter()
    lock = threading.Lock()

    def responder(req: Any) -> Any:
        if req.model == "m-bad":
            with lock:
                seen[req.last_user_message or ""] += 1
                if seen[req.last_user_message or ""] == 2:
                    return "broken"
        return replay(req)

    llm_server.responder = responder
    result = pytester.runpytest(*_live(llm_server, "--golden-attempts=auto:3", "-x", *xdist))
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    runs = _runs(golden_project)
    adaptive = runs["candidate"]["adaptiveAttempts"]
    held = sum(len(c["attempts"]) for r in runs.values() for c in r["cases"])
    assert sum(adaptive["attemptsByRound"].values()) == held
    assert adaptive["attemptsByRound"]["1"] == 2 * CASES
    assert "3" not in adaptive["attemptsByRound"]  # round 3 never planned after the stop
    assert chat_calls(llm_server) < 4 * CASES  # round 2 was cut short
