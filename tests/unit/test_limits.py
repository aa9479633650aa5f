"""The budget module (issue 32): JSON depth, sizes, deadlines, and the docs table of limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goldeval.core.limits import (
    LIMITS,
    Deadline,
    LimitExceeded,
    check_size,
    describe_bytes,
    estimate_tokens,
    json_depth_exceeds,
    loads_json,
    markdown_table,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@given(st.integers(min_value=1, max_value=200_000))
def test_json_depth_never_escapes_as_recursion_error(depth: int) -> None:
    text = _nested(depth)
    if depth <= 64:
        assert loads_json(text) is not None
    else:
        with pytest.raises(LimitExceeded) as info:
            loads_json(text, what="the body")
        assert info.value.limit == "json_depth"
        assert "the body is nested deeper than 64 levels" in str(info.value)


@given(st.integers(min_value=1, max_value=300), st.integers(min_value=1, max_value=300))
def test_depth_check_agrees_with_a_recursive_count(depth: int, limit: int) -> None:
    value = json.loads('{"a":' * depth + "1" + "}" * depth)
    assert json_depth_exceeds(value, limit) is (depth > limit)


def test_malformed_json_stays_a_value_error() -> None:
    with pytest.raises(ValueError):
        loads_json("{not json")


def test_sizes_and_estimates() -> None:
    check_size(10, 10, what="x", name="file_bytes")
    with pytest.raises(LimitExceeded, match="x is 2 MiB, over the limit of 1 MiB"):
        check_size(2 << 20, 1 << 20, what="x", name="file_bytes")
    assert describe_bytes(1536) == "1536 bytes"
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcde") == 2


def test_deadline_with_a_fake_clock() -> None:
    now = [100.0]
    deadline = Deadline(5, clock=lambda: now[0])
    assert deadline.remaining() == 5
    now[0] = 106
    assert deadline.expired() and deadline.remaining() == 0
    with pytest.raises(TimeoutError):
        deadline.check(lambda: TimeoutError("late"))
    assert Deadline(None).remaining() is None
    assert Deadline.earliest(None, Deadline(None), deadline) is deadline


def test_docs_table_is_the_generated_one() -> None:
    """docs/reliability.md's table is markdown_table()'s output (regenerate it after a change:
    python -c "from goldeval.core.limits import markdown_table; print(markdown_table())")."""
    text = DOC.read_text(encoding="utf-8")
    table = text.split("<!-- limits-table:start -->")[1].split("<!-- limits-table:end -->")[0]
    assert table.strip() == markdown_table()


def test_every_named_setting_exists(pytester: pytest.Pytester) -> None:
    named = [
        word.strip("`,()")
        for spec in LIMITS
        for word in spec.setting.split()
        if word.strip("`,()").startswith(("--golden", "golden_"))
    ]
    if not named:
        return
    result = pytester.runpytest_subprocess("--help")
    for name in named:
        assert name in result.stdout.str(), f"{name} is not a pytest option or ini key"
