"""Tests of the json_keys_snake_case grader: unit tests, then black-box runs with pytester."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from snake_case_grader import SnakeCaseKeysGrader, bad_keys

from goldeval import Answer, GoldenCase, GradeContext

EXAMPLE = Path(__file__).resolve().parent.parent
CASE = GoldenCase(id="c1", prompt="p", expect={"json_keys_snake_case": True})


def grade(text: str | None) -> list[str]:
    ctx = GradeContext(case=CASE, answer=Answer(text=text), retrieved=[], pack=None)
    outcome = SnakeCaseKeysGrader().grade(ctx)
    assert outcome.passed is (not outcome.violations)
    return [v.reason for v in outcome.violations]


def test_snake_case_keys_pass() -> None:
    assert grade('{"order_id": 1, "items": [{"unit_price": 2}]}') == []


def test_bad_keys_are_named_with_their_path() -> None:
    assert grade('{"orderId": 1, "items": [{"UnitPrice": 2}]}') == [
        "key $.orderId is not snake_case",
        "key $.items[0].UnitPrice is not snake_case",
    ]
    assert list(bad_keys({"a": {"bB": 1}})) == ["$.a.bB"]


@pytest.mark.parametrize("text", [None, "", "no json here", "```json\n{broken\n```"])
def test_malformed_answers_fail_without_raising(text: str | None) -> None:
    assert grade(text) == ["no JSON value in the answer"]


def test_false_is_rejected_at_collection() -> None:
    assert SnakeCaseKeysGrader().validate_expect({"json_keys_snake_case": False})


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    for name in ("golden", "conftest.py", "snake_case_grader.py", "pytest.ini"):
        src = EXAMPLE / name
        if src.is_dir():
            shutil.copytree(src, pytester.path / name)
        else:
            shutil.copy(src, pytester.path / name)
    return pytester.path


@pytest.mark.parametrize("args", [[], ["-n", "2"]], ids=["serial", "xdist2"])
def test_dataset_passes(pytester: pytest.Pytester, project: Path, args: list[str]) -> None:
    result = pytester.runpytest_subprocess("--golden=api-payloads-v1", *args)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*grader json_keys_snake_case*100.0% (4 / 4)*",
                                 "*goldeval decision: exit 0*"])


def test_camel_case_answer_fails_the_gate(pytester: pytest.Pytester, project: Path) -> None:
    fixture = project / "golden" / "api-payloads" / "fixtures" / "customer.out.md"
    fixture.write_text('{"customerId": 7}\n', encoding="utf-8")
    result = pytester.runpytest_subprocess("--golden=api-payloads-v1")
    assert result.ret == 1, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*?NAMING/HIGH? json_keys_snake_case: key $.customerId is not snake_case*",
        "*GATE FAIL: overallPassRate (0.750 < 1.000), grader.json_keys_snake_case*",
    ])


def test_misspelt_key_is_a_collection_error(pytester: pytest.Pytester, project: Path) -> None:
    rows = project / "golden" / "api-payloads" / "payloads.jsonl"
    rows.write_text(rows.read_text(encoding="utf-8").replace(
        '"json_keys_snake_case": true}}', '"json_keys_snakecase": true}}', 1), encoding="utf-8")
    result = pytester.runpytest_subprocess("--golden=api-payloads-v1")
    assert result.ret == 2, result.stdout.str()
    result.stdout.fnmatch_lines(["*expect.json_keys_snakecase: unknown expect key*"])
