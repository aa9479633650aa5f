"""Integers no float can hold are refused where outside JSON is parsed (a probe: a
4,000-digit count in run.json or a baseline crashed gate, compare, show and site with
OverflowError; ``expect.number: 1<400 zeros>`` was an INTERNALERROR at collection)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goldeval.core.json_numbers import HugeInteger
from goldeval.core.limits import loads_json
from tests.helpers import make_bot_dataset, run_cli

HUGE = "1" + "0" * 400


def test_a_huge_integer_literal_is_malformed_json() -> None:
    for text in (f'{{"hits": {HUGE}}}', f"[-{HUGE}]", f'{{"hits": {HUGE}}}'.encode()):
        with pytest.raises(HugeInteger, match="401 digits"):
            loads_json(text)
    with pytest.raises(ValueError):  # what every caller already handles
        loads_json(f"[{HUGE}]")


def test_what_a_float_holds_and_digits_in_strings_are_kept() -> None:
    big = "9" * 308
    assert loads_json(f"[{big}]") == [int(big)]
    assert loads_json(json.dumps({"text": HUGE, "n": 3})) == {"text": HUGE, "n": 3}
    assert loads_json("[1e400]")[0] == float("inf")  # floats were never the problem


def test_a_row_with_a_huge_expected_number_is_a_collection_error(
    pytester: pytest.Pytester,
) -> None:
    make_bot_dataset(pytester.path, "    thresholds:\n      overallPassRate: 0.5\n")
    rows = pytester.path / "golden/bot/bot.jsonl"
    rows.write_text(
        rows.read_text() + f'{{"id": "n", "prompt": "p", "expect": {{"number": {HUGE}}}}}\n'
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=bot-v1")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret not in (0, 3), out[-2000:]
    assert "bot.jsonl:3" in out and "401 digits" in out
    assert "INTERNALERROR" not in out and "OverflowError" not in out


def test_gate_refuses_a_run_json_with_a_huge_count(pytester: pytest.Pytester) -> None:
    make_bot_dataset(pytester.path, "    thresholds:\n      overallPassRate: 0.5\n")
    assert pytester.runpytest("-p", "no:cacheprovider", "--golden=bot-v1").ret == 0
    run_dir = Path((pytester.path / ".goldeval/runs/LATEST").read_text().strip())
    text = (run_dir / "run.json").read_text()
    doc = json.loads(text)
    doc["metrics"]["latency"]["avgMs"] = 1  # placeholder replaced by the literal below
    edited = pytester.path / "edited.json"
    edited.write_text(json.dumps(doc).replace('"avgMs": 1', f'"avgMs": {HUGE}'))
    for command in (["gate", str(edited)], ["show", str(edited)]):
        proc = run_cli(*command, cwd=pytester.path)
        assert proc.returncode == 65, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr and "401 digits" in proc.stdout + proc.stderr


def test_a_deeply_nested_last_session_is_no_traceback(pytester: pytest.Pytester) -> None:
    make_bot_dataset(pytester.path, "    thresholds:\n      overallPassRate: 0.5\n")
    assert pytester.runpytest("-p", "no:cacheprovider", "--golden=bot-v1").ret == 0
    (pytester.path / ".goldeval/runs/LAST_SESSION").write_text("[" * 5000 + "]" * 5000)
    for command in ("gate", "show"):
        proc = run_cli(command, cwd=pytester.path)
        assert "Traceback" not in proc.stderr and "RecursionError" not in proc.stderr, proc.stderr
        assert proc.returncode in (0, 4), proc.stdout + proc.stderr
