"""A key cut by an excerpt is still masked (found by a probe).

A tool call whose arguments are not JSON was reported with an 80-character excerpt cut before
the run's masker saw it: the key the model echoed at the cut showed 18 of its 19 characters
(``'{xxx…xsk-PROBE-7c1e9f2a4…'``) in the terminal, junit.xml, run.json, report.md, the case
files and the store. The masker now also masks a secret's start before an excerpt's cut mark
(or its end after one), whatever cut it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from goldeval.testing.llm_server import FakeLLMServer, Reply
from tests.helpers import make_bot_dataset

KEY = "sk-PROBE-7c1e9f2a4b"
GATE = "    thresholds:\n      overallPassRate: 0.5\n"


def _tool_call_echoing_the_key(request: Any) -> Reply:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": "{" + "x" * 60 + KEY + "}"},
    }
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": None, "tool_calls": [call]},
        "finish_reason": "tool_calls",
    }
    return Reply(raw_body=json.dumps({"model": "m", "choices": [choice]}).encode())


def test_a_key_cut_in_an_excerpt_of_tool_call_arguments_is_masked(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    make_bot_dataset(pytester.path, GATE)
    with FakeLLMServer() as srv:
        srv.responder = _tool_call_echoing_the_key
        result = pytester.runpytest(
            "-p",
            "no:cacheprovider",
            "--golden=bot-v1",
            "--golden-mode=live",
            "--golden-provider=openai",
            "--golden-model=m",
            f"--golden-base-url={srv.openai_base_url}",
            "--golden-retries=0",
            "--golden-no-gate",
            "--golden-artifacts=always",
            "--junitxml=junit.xml",
        )
    out = result.stdout.str() + result.stderr.str()
    assert "PARSER_ERROR" in out and "not JSON" in out, out
    assert "***" in out
    fragment = KEY[:8]  # any 8 characters of its start: more than its public prefix
    assert fragment not in out, out
    seen = [
        path
        for path in Path(pytester.path).rglob("*")
        if path.is_file() and fragment.encode() in path.read_bytes()
    ]
    assert seen == [], seen
