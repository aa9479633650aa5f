"""Record/replay keeps what the graders read besides the text (issue 17).

Recorded against the real fake model server on 127.0.0.1, replayed in fixture mode: tool
calls, finish reason and usage travel in the sidecar ``fixtures/<id>.out.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# Imported here, before pytester's in-process runs, so that every run sees one Status enum
# (pytester drops modules first imported during a run).
from goldeval.core.models import Status
from goldeval.testing.llm_server import FakeLLMServer, RecordedRequest, Reply
from tests.helpers import RunFiles

ROWS = [
    {
        "id": "weather",
        "prompt": "Weather in Paris?",
        "expect": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
    },
    {
        "id": "clock",
        "prompt": "What time is it in Tokyo?",
        "expect": {"tool_calls": [{"name": "get_time", "arguments": {"tz": "Asia/Tokyo"}}]},
    },
    {
        "id": "flight",
        "prompt": "Book me a flight to Rome",
        "expect": {"tool_calls": [{"name": "book_flight"}]},
    },
    {
        "id": "chat",
        "prompt": "Tell me a joke",
        "expect": {"tool_calls": [], "tool_calls_order": "exact"},
    },
]

REPLIES = {
    "Weather in Paris?": Reply(
        None, tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris"}}]
    ),
    "What time is it in Tokyo?": Reply(
        "Let me check.", tool_calls=[{"name": "get_time", "arguments": {"tz": "Asia/Tokyo"}}]
    ),
    # wrong tool: a FAIL live and replayed
    "Book me a flight to Rome": Reply(None, tool_calls=[{"name": "search_web", "arguments": {}}]),
    # a tool call where none was expected: a FAIL live; without the sidecar the replayed
    # text-only answer would pass
    "Tell me a joke": Reply("Why did...", tool_calls=[{"name": "tell_joke", "arguments": {}}]),
}


def respond(request: RecordedRequest) -> Reply:
    return REPLIES[request.last_user_message or ""]


@pytest.fixture
def tools_project(pytester: pytest.Pytester) -> Path:
    ds = pytester.path / "golden" / "tools"
    ds.mkdir(parents=True)
    (ds / "dataset.yaml").write_text(
        "version: tools-v1\nname: tools\npack: none\n", encoding="utf-8"
    )
    (ds / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    pytester.makeini("[pytest]\n")
    return pytester.path


@pytest.fixture
def server() -> FakeLLMServer:
    with FakeLLMServer() as srv:
        srv.responder = respond
        yield srv


def _statuses(run: dict) -> dict[str, str]:
    return {c["caseId"]: c["status"] for c in run["cases"]}


def _record(pytester: pytest.Pytester, server: FakeLLMServer, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(
        "--golden=tools-v1",
        "--golden-mode=record",
        "--golden-model=fake",
        f"--golden-base-url={server.base_url}",
        "--golden-no-gate",
        "-p",
        "no:cacheprovider",
        *extra,
    )


def test_replay_of_recorded_tool_calls_scores_what_the_live_run_scored(
    pytester: pytest.Pytester,
    tools_project: Path,
    server: FakeLLMServer,
    plugin_args: list[str],
) -> None:
    live = _record(pytester, server, *plugin_args)
    live.assert_outcomes(passed=2, failed=2)
    files = RunFiles(tools_project)
    live_run = files.latest()
    assert live_run["metrics"]["graders"]["tool_calls"]["hits"] == 2
    assert "recordedAnswer" not in (files.latest_dir() / "run.json").read_text()

    fixtures = tools_project / "golden" / "tools" / "fixtures"
    sidecar = fixtures / "weather.out.json"
    data = json.loads(sidecar.read_text())
    assert data["toolCalls"] == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    assert data["finishReason"] == "stop"  # Ollama's done_reason
    assert data["inputTokens"] > 0 and data["outputTokens"] >= 0
    # readable diffs: sorted keys, indented, one final newline
    assert sidecar.read_text() == json.dumps(data, sort_keys=True, indent=2) + "\n"

    server.reset()
    server.responder = lambda req: "the server must not be called in fixture mode"
    replay = pytester.runpytest(
        "--golden=tools-v1", "--golden-no-gate", "-p", "no:cacheprovider", *plugin_args
    )
    replay.assert_outcomes(passed=2, failed=2)
    replay_run = files.latest()
    assert replay_run["protocol"]["mode"] == "DETERMINISTIC"  # fixture mode
    assert server.requests == []
    assert (
        replay_run["metrics"]["graders"]["tool_calls"]
        == live_run["metrics"]["graders"]["tool_calls"]
    )
    assert (
        _statuses(replay_run)
        == _statuses(live_run)
        == {
            "weather": Status.PASS.value,
            "clock": Status.PASS.value,
            "flight": Status.FAIL.value,
            "chat": Status.FAIL.value,
        }
    )
    # the recorded usage is replayed too
    assert (
        replay_run["metrics"]["tokens"]["totalTokens"]
        == live_run["metrics"]["tokens"]["totalTokens"]
    )


def test_openai_finish_reason_is_recorded(
    pytester: pytest.Pytester, tools_project: Path, server: FakeLLMServer
) -> None:
    result = pytester.runpytest(
        "--golden=tools-v1",
        "--golden-mode=record",
        "--golden-provider=openai",
        "--golden-model=fake",
        f"--golden-base-url={server.openai_base_url}",
        "--golden-no-gate",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=2, failed=2)
    fixtures = tools_project / "golden" / "tools" / "fixtures"
    assert json.loads((fixtures / "weather.out.json").read_text())["finishReason"] == "tool_calls"


def test_rerecorded_text_answer_drops_the_stale_sidecar(
    pytester: pytest.Pytester, tools_project: Path, server: FakeLLMServer
) -> None:
    _record(pytester, server)
    fixtures = tools_project / "golden" / "tools" / "fixtures"
    assert (fixtures / "chat.out.json").is_file()
    # the model now answers with text only: the sidecar must lose the old tool call
    server.responder = lambda req: Reply("plain text")
    kept = _record(pytester, server)
    kept.stdout.fnmatch_lines(["*differing but kept*"])
    assert (fixtures / "chat.out.json").is_file()  # never silently overwritten
    _record(pytester, server, "--golden-overwrite-fixtures")
    assert (fixtures / "chat.out.md").read_text() == "plain text"
    assert json.loads((fixtures / "chat.out.json").read_text()).get("toolCalls") is None
    replay = pytester.runpytest("--golden=tools-v1", "--golden-no-gate")
    # text-only answers: the exact "no tool call" row passes, the others fail
    replay.assert_outcomes(passed=1, failed=3)


def test_broken_sidecar_names_the_file_and_field(
    pytester: pytest.Pytester, tools_project: Path, server: FakeLLMServer
) -> None:
    _record(pytester, server)
    fixtures = tools_project / "golden" / "tools" / "fixtures"
    (fixtures / "weather.out.json").write_text('{"toolCalls": "get_weather"}\n')
    (fixtures / "clock.out.json").write_text('{"toolCalls": [\n')
    result = pytester.runpytest("--golden=tools-v1", "--golden-no-gate")
    out = result.stdout.str()
    assert result.ret == 4  # a broken file: rerunning will not help
    assert "fixtures/weather.out.json: field toolCalls must be a list" in out
    assert "fixtures/clock.out.json line 2: not valid JSON" in out
    assert "Traceback" not in out


def test_recording_from_the_response_cache_keeps_the_sidecar(
    pytester: pytest.Pytester, tools_project: Path, server: FakeLLMServer
) -> None:
    _record(pytester, server, "--golden-cache=cache")
    fixtures = tools_project / "golden" / "tools" / "fixtures"
    before = {p.name: p.read_text() for p in fixtures.glob("*.out.json")}
    assert len(before) == 4
    server.reset()
    _record(pytester, server, "--golden-cache=cache", "--golden-overwrite-fixtures")
    assert server.requests == []  # every answer came from the cache
    assert {p.name: p.read_text() for p in fixtures.glob("*.out.json")} == before
