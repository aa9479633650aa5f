"""Grader time budget for user regexes (issue 16 item 7): unit tests plus one black-box run.

A pathological pattern must end as an ERROR attempt (errorKind GRADER_TIMEOUT) within about
the budget, never hang the run; every grader that evaluates a user pattern is covered.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from goldeval.core.errors import ProviderError, is_retryable
from goldeval.dataset.case import GoldenCase
from goldeval.dataset.domain import ContractConfig
from goldeval.dataset.manifest import Manifest
from goldeval.graders import budget
from goldeval.graders.base import GradeContext
from goldeval.graders.cites import CitesGrader
from goldeval.graders.contract import ContractChecker
from goldeval.graders.json_schema import JsonSchemaGrader
from goldeval.graders.regex import RegexGrader
from goldeval.graders.registry import builtin_graders
from goldeval.pipeline.attempt import NoRetriever, Pipeline
from goldeval.providers.base import Answer
from tests.helpers import RunFiles

#: Catastrophic for the backtracking engine of `re` AND for the `regex` engine.
EVIL = r"(a|aa)+$"
EVIL_TEXT = "a" * 64 + "!"
#: The issue's example: hangs `re`; the budgeted engine answers it at once (no match).
ISSUE = r"^(\w+\s?)*$"
ISSUE_TEXT = "a" * 40 + "!"
SHORT = 0.3


@pytest.fixture(autouse=True)
def _short_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(budget.ENV_GRADER_TIMEOUT, str(SHORT))


def _ctx(expect: dict, text: str, options: dict | None = None) -> GradeContext:
    case = GoldenCase("c1", "p", expect)
    return GradeContext(
        case=case, answer=Answer(text=text), retrieved=[], pack=None, options=options or {}
    )


def test_budget_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert budget.grader_timeout() == SHORT
    for bad in ("", "0", "-1", "nan", "inf", "soon"):
        monkeypatch.setenv(budget.ENV_GRADER_TIMEOUT, bad)
        assert budget.grader_timeout() == budget.DEFAULT_GRADER_TIMEOUT


def test_search_over_budget_raises_grader_timeout_quickly() -> None:
    start = time.monotonic()
    with pytest.raises(budget.GraderTimeout) as info, budget.budget("regex"):
        budget.search(EVIL, EVIL_TEXT, grader="regex")
    assert time.monotonic() - start < 10
    assert info.value.grader == "regex" and EVIL in str(info.value)
    assert budget.ENV_GRADER_TIMEOUT in str(info.value)


def test_the_issue_pattern_is_answered_not_hung() -> None:
    start = time.monotonic()
    assert budget.search(ISSUE, ISSUE_TEXT, grader="regex") is None
    assert budget.search(ISSUE, "word and words", grader="regex") is not None
    assert time.monotonic() - start < 5


def test_budget_is_shared_by_a_grader_call() -> None:
    with budget.budget("regex", 0.0), pytest.raises(budget.GraderTimeout):
        budget.search("a", "a", grader="regex")  # nothing left: not even a cheap pattern


def test_re_semantics_are_kept() -> None:
    assert budget.search(r"(?i)HELLO\s+\w+", "say hello world", grader="r").group(0) == (
        "hello world"
    )
    assert budget.search(r"\d{3}", "HTTP 404", grader="r").group(0) == "404"
    assert [m.group(1) for m in budget.finditer(r"\[(\w+)\]", "[a] [b]", grader="c")] == ["a", "b"]
    assert budget.pattern_error("(unclosed") is not None
    assert budget.pattern_error(r"^\w+$") is None


@pytest.mark.parametrize(
    "grader,expect,options",
    [
        (RegexGrader(), {"regex": EVIL}, None),
        (RegexGrader(), {"not_regex": [r"^ok$", EVIL]}, None),
        (
            JsonSchemaGrader(),
            {
                "json_schema": {
                    "type": "object",
                    "properties": {"s": {"type": "string", "pattern": EVIL}},
                }
            },
            None,
        ),
        (CitesGrader(), {"cites": ["x"]}, {"cites": {"pattern": EVIL}}),
    ],
    ids=["regex", "not_regex", "json_schema-pattern", "cites-pattern"],
)
def test_every_grader_with_a_user_pattern_is_budgeted(grader, expect, options) -> None:  # type: ignore[no-untyped-def]
    text = json.dumps({"s": EVIL_TEXT}) if "json_schema" in expect else EVIL_TEXT
    assert grader.validate_expect(expect) == []
    start = time.monotonic()
    with pytest.raises(budget.GraderTimeout), budget.budget(grader.name):
        grader.grade(_ctx(expect, text, options))
    assert time.monotonic() - start < 10


def test_contract_tests_class_pattern_is_budgeted() -> None:
    checker = ContractChecker(ContractConfig(tests_class_pattern=EVIL))
    with pytest.raises(budget.GraderTimeout), budget.budget("ContractGrader"):
        checker.grade("c1", {"layer": "api"}, [], EVIL_TEXT, ["r1"], ["r1"])


def test_pipeline_turns_an_over_budget_grader_into_grader_timeout() -> None:
    case = GoldenCase("c1", "p", {"regex": EVIL})
    dataset = SimpleNamespace(
        pack=None, manifest=Manifest(version="x-v1"), grader_modes={}, cases=[case]
    )
    pipe = Pipeline(dataset, builtin_graders(), NoRetriever())  # type: ignore[arg-type]
    with pytest.raises(ProviderError) as info:
        pipe.grade(case, 1, Answer(text=EVIL_TEXT), "m")
    assert info.value.kind == "GRADER_TIMEOUT" and not info.value.retryable
    assert not is_retryable("GRADER_TIMEOUT")


# --------------------------------------------------------------------------- black box


@pytest.fixture
def evil_project(pytester: pytest.Pytester) -> Path:
    ds = pytester.path / "golden" / "evil"
    (ds / "fixtures").mkdir(parents=True)
    (ds / "dataset.yaml").write_text("version: evil-v1\nname: evil\npack: none\n", encoding="utf-8")
    rows = [
        {"id": "ok", "prompt": "say ok", "expect": {"regex": "^ok$"}},
        {"id": "issue", "prompt": "words", "expect": {"regex": ISSUE}},
        {"id": "evil", "prompt": "many a", "expect": {"regex": EVIL}},
    ]
    (ds / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    for case_id, text in {"ok": "ok", "issue": ISSUE_TEXT, "evil": EVIL_TEXT}.items():
        (ds / "fixtures" / f"{case_id}.out.md").write_text(text, encoding="utf-8")
    pytester.makeini("[pytest]\n")
    return pytester.path


def test_a_catastrophic_row_regex_ends_as_grader_timeout(
    pytester: pytest.Pytester,
    evil_project: Path,
    plugin_args: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(budget.ENV_GRADER_TIMEOUT, "0.5")
    start = time.monotonic()
    result = pytester.runpytest("--golden=evil-v1", "-p", "no:cacheprovider", *plugin_args)
    assert time.monotonic() - start < 60
    out = result.stdout.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    run = RunFiles(evil_project).latest()
    by_id = {c["caseId"]: c["attempts"][0] for c in run["cases"]}
    assert by_id["ok"]["status"] == "PASS"
    assert by_id["issue"]["status"] == "FAIL"  # answered (no match), not hung
    assert (by_id["evil"]["status"], by_id["evil"]["errorKind"]) == ("ERROR", "GRADER_TIMEOUT")
    assert "time budget" in by_id["evil"]["errorMessage"]
    result.stdout.fnmatch_lines(["*ERROR GRADER_TIMEOUT*"])
    assert result.ret == 4  # a pattern that explodes explodes again on a rerun: not 75


# ------------------------------------------------------------ what a pattern compiles to

BOMB = "(?:(?:a{1000}){1000}){1000}"


@pytest.mark.parametrize(
    "pattern", [BOMB, r"(?:[^\W\d]{5000}){400}", r"(?:a{1000}){101}", r"\p{L}{1000}{1000}"]
)
def test_a_pattern_that_would_compile_huge_is_refused_before_compiling(pattern: str) -> None:
    """The regex engine writes exact repeat counts out: the first took 2.8 GB and a
    MemoryError (INTERNALERROR at collection); refused by its counts, at once."""
    started = time.monotonic()
    problem = budget.pattern_error(pattern)
    assert problem is not None and "pattern_units" in problem, problem
    assert time.monotonic() - started < 1


def test_patterns_within_the_units_limit_still_compile() -> None:
    for pattern in (r"(?:a{1000}){100}", r"\d{3}-\d{4}", r"a{1,100000}", r"(?:\w+\s?){1,50}"):
        assert budget.pattern_error(pattern) is None, pattern


def _bomb_project(root: Path) -> None:
    ds = root / "golden" / "bomb"
    (ds / "fixtures").mkdir(parents=True)
    (ds / "dataset.yaml").write_text("version: bomb-v1\nname: bomb\npack: none\n", "utf-8")
    schema = {"type": "string", "format": "regex"}
    rows = [{"id": "answer", "prompt": "a regex", "expect": {"json_schema": schema}}]
    (ds / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (ds / "fixtures" / "answer.out.md").write_text(json.dumps(BOMB), encoding="utf-8")


def test_an_answer_that_is_a_huge_pattern_fails_format_regex(pytester: pytest.Pytester) -> None:
    """``format: regex`` on an answer compiling to 10^9 units was GRADER_ERROR MemoryError
    (exit 75, "retry the run"): the answer is not a usable pattern, a FAIL."""
    _bomb_project(pytester.path)
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest("--golden=bomb-v1", "-p", "no:cacheprovider")
    out = result.stdout.str()
    assert "MemoryError" not in out and "INTERNALERROR" not in out, out
    attempt = RunFiles(pytester.path).latest()["cases"][0]["attempts"][0]
    assert attempt["status"] == "FAIL", attempt
    assert result.ret == 1


def test_a_row_pattern_that_would_compile_huge_is_a_row_error(pytester: pytest.Pytester) -> None:
    _bomb_project(pytester.path)
    rows = pytester.path / "golden" / "bomb" / "rows.jsonl"
    rows.write_text(json.dumps({"id": "answer", "prompt": "p", "expect": {"regex": BOMB}}) + "\n")
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest("--golden=bomb-v1", "-p", "no:cacheprovider")
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    assert "rows.jsonl:1" in out and "pattern_units" in out, out
    assert result.ret == 2  # a collection error naming the row, as any invalid row pattern
