"""The opt-in ``golden_llm_server`` fixture (goldeval.pytest_plugin.testing), used the way a
project would: a conftest asks for the plugin, a test talks to the server over real HTTP."""

from __future__ import annotations

import pytest

USING_TEST = """
import httpx

def test_chat(golden_llm_server):
    golden_llm_server.reply_map({"2+2?": "4"})
    body = {"model": "m", "stream": False, "messages": [{"role": "user", "content": "2+2?"}]}
    answer = httpx.post(golden_llm_server.base_url + "/api/chat", json=body).json()
    assert answer["message"]["content"] == "4"
    assert golden_llm_server.base_url.startswith("http://127.0.0.1:")
    assert golden_llm_server.requests[0].last_user_message == "2+2?"

def test_fresh_server_per_test(golden_llm_server):
    assert golden_llm_server.requests == []
"""


def test_fixture_serves_when_the_plugin_is_asked_for(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["goldeval.pytest_plugin.testing"]\n')
    pytester.makepyfile(test_it=USING_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:goldeval")
    result.assert_outcomes(passed=2)


def test_fixture_is_inert_unless_asked_for(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_it=USING_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:goldeval")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*fixture 'golden_llm_server' not found*"])


def test_fixture_from_the_command_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_it=USING_TEST)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:goldeval", "-p", "goldeval.pytest_plugin.testing"
    )
    result.assert_outcomes(passed=2)
