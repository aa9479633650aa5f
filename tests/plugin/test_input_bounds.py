"""Inputs whose size an option or a row decides, refused before collection with a usage
error (exit 4), never an hour of collection or gigabytes of items."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goldeval.dataset.row_fields import SAFE_ID
from goldeval.dataset.variants import NAME_PATTERN
from tests.helpers import run_cli


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("1001", "*at most 1000 (the attempts_per_case limit*"),
        ("２", "*is not a whole number (digits 0-9)*"),  # int() took any Unicode digit
    ],
)
def test_attempts_are_bounded(
    pytester: pytest.Pytester, golden_project: Path, value: str, message: str
) -> None:
    result = pytester.runpytest("--golden=generation-v1", f"--golden-attempts={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


@pytest.mark.parametrize(
    "option",
    ["--golden-deadline", "--golden-timeout", "--golden-call-timeout"],
)
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0"])
def test_a_duration_that_is_no_number_of_seconds_is_refused(
    pytester: pytest.Pytester, golden_project: Path, option: str, value: str
) -> None:
    """``nan`` passed the ``<= 0`` check: the whole run went on and ended "retry the run"
    (75) or every model call timed out ``within nans``; ``inf`` is no bound."""
    result = pytester.runpytest("--golden=generation-v1", f"{option}={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"*{option}*must be a finite number of seconds above 0*"])


@pytest.mark.parametrize(
    "option", ["--body-timeout=nan", "--header-timeout=nan", "--header-timeout=-1", "--lease=inf"]
)
def test_cli_durations_are_finite(tmp_path: Path, option: str) -> None:
    done = run_cli("serve" if "lease" not in option else "worker", option, cwd=tmp_path)
    assert done.returncode == 4 and "finite number of seconds" in done.stderr, done.stderr


def test_a_name_or_id_with_a_final_newline_is_refused(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    """``$`` matches before a final newline: "a\\n" passed as a variant name or a row id
    (a fixture folder and item ids with a newline in them)."""
    assert NAME_PATTERN.match("a\n") is None and NAME_PATTERN.match("a") is not None
    assert SAFE_ID.match("a\n") is None and SAFE_ID.match("a-1") is not None
    rows = golden_project / "golden/generation/golden-generation.jsonl"
    row = {"id": "zz\n", "prompt": "p", "expect": {"contains": ["x"]}}
    with rows.open("a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")
    result = pytester.runpytest("--golden=generation-v1")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERRUPTED), out
    assert "golden-generation.jsonl:" in out and "id" in out
