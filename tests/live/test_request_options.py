"""Request options, templates and conversation rows on the wire, against a real local server
(both protocols); finish_reason / done_reason ``length`` marks the attempt TRUNCATED."""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import goldeval.pipeline.attempt  # noqa: F401  (loaded once, outside pytester's runs)
from goldeval.testing.llm_server import FakeLLMServer, RecordedRequest, Reply
from tests.helpers import ROOT, RunFiles

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "order_status",
            "description": "Look an order up",
            "parameters": {"type": "object", "properties": {"order": {"type": "integer"}}},
        },
    }
]
SCHEMA = {"type": "object", "required": ["sql"], "properties": {"sql": {"type": "string"}}}
MANIFEST = {
    "version": "bot-v1",
    "prompt": {"system": "You are the shop bot for {{ shop }}."},
    "request": {
        "temperature": 0.3,
        "top_p": 0.9,
        "max_tokens": 50,
        "seed": 7,
        "stop": ["END"],
        "tools": TOOLS,
        "tool_choice": "auto",
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": SCHEMA},
        },
    },
}
ROWS = [
    {
        "id": "plain",
        "prompt": "Hello",
        "vars": {"shop": "Books"},
        "request": {"max_tokens": 20},
        "expect": {"contains_any": ["ok"]},
    },
    {
        "id": "talk",
        "vars": {"shop": "Books"},
        "messages": [
            {"role": "user", "content": "Where is order 42?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"name": "order_status", "arguments": {"order": 42}, "id": "c1"}],
            },
            {
                "role": "tool",
                "content": '{"status": "shipped"}',
                "tool_call_id": "c1",
                "name": "order_status",
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "And this one?"},
                    {"type": "image", "path": "parcel.png"},
                ],
            },
        ],
        "expect": {"contains_any": ["ok"]},
    },
]


def _project(root: Path, manifest: dict, rows: list[dict]) -> None:
    ds = root / "golden" / "bot"
    ds.mkdir(parents=True)
    (ds / "dataset.json").write_text(json.dumps(manifest), "utf-8")
    (ds / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", "utf-8")
    (ds / "parcel.png").write_bytes(PNG)
    (root / "tox.ini").write_text("[pytest]\n", "utf-8")


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        srv.responder = lambda _r: Reply(content="ok")
        yield srv


def _live(pytester: pytest.Pytester, srv: FakeLLMServer, provider: str) -> pytest.RunResult:
    return pytester.runpytest(
        "--golden=bot-v1",
        "--golden-mode=live",
        "--golden-model=fake-llm:latest",
        f"--golden-provider={provider}",
        f"--golden-base-url={srv.base_url}",
        "--golden-no-gate",
    )


def _bodies(srv: FakeLLMServer) -> dict[str, dict]:
    out = {}
    for r in srv.requests:
        if r.json and "messages" in r.json:
            text = json.dumps(r.json["messages"])
            out["talk" if "order 42" in text else "plain"] = r.json
    return out


def test_openai_sends_options_templates_and_conversations(
    pytester: pytest.Pytester, server: FakeLLMServer
) -> None:
    _project(pytester.path, MANIFEST, ROWS)
    result = _live(pytester, server, "openai")
    assert result.ret == 0, result.stdout.str()
    bodies = _bodies(server)
    plain, talk = bodies["plain"], bodies["talk"]
    assert plain["temperature"] == 0.3 and plain["top_p"] == 0.9 and plain["seed"] == 7
    assert plain["max_tokens"] == 20 and talk["max_tokens"] == 50  # the row's over the dataset's
    assert plain["stop"] == ["END"] and plain["tool_choice"] == "auto"
    assert plain["tools"] == TOOLS
    assert plain["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA},
    }
    assert plain["messages"] == [
        {"role": "system", "content": "You are the shop bot for Books."},
        {"role": "user", "content": "Hello"},
    ]
    msgs = talk["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "user"]
    assert msgs[2]["tool_calls"] == [
        {
            "id": "c1",
            "type": "function",
            "function": {"name": "order_status", "arguments": '{"order": 42}'},
        }
    ]
    assert msgs[3]["tool_call_id"] == "c1"
    image = msgs[4]["content"][1]
    assert image["type"] == "image_url"
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()


def test_ollama_sends_options_templates_and_conversations(
    pytester: pytest.Pytester, server: FakeLLMServer
) -> None:
    _project(pytester.path, MANIFEST, ROWS)
    result = _live(pytester, server, "ollama")
    assert result.ret == 0, result.stdout.str()
    bodies = _bodies(server)
    plain, talk = bodies["plain"], bodies["talk"]
    assert plain["options"] == {
        "temperature": 0.3,
        "top_p": 0.9,
        "num_predict": 20,
        "seed": 7,
        "stop": ["END"],
    }
    assert talk["options"]["num_predict"] == 50
    assert plain["tools"] == TOOLS and plain["format"] == SCHEMA
    msgs = talk["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "user"]
    assert msgs[0]["content"] == "You are the shop bot for Books."
    assert msgs[2]["tool_calls"] == [
        {"function": {"name": "order_status", "arguments": {"order": 42}}}
    ]
    assert msgs[4]["content"] == "And this one?"
    assert msgs[4]["images"] == [base64.b64encode(PNG).decode()]


def _truncated_reply(request: RecordedRequest) -> Reply:
    if request.protocol == "openai":
        body = {
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "length",
                    "message": {"role": "assistant", "content": "ok and then"},
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 20},
        }
    else:
        body = {
            "model": "fake-llm:latest",
            "done": True,
            "done_reason": "length",
            "message": {"role": "assistant", "content": "ok and then"},
        }
    return Reply(raw_body=json.dumps(body).encode())


@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_length_finish_is_a_hard_truncated_failure(
    pytester: pytest.Pytester, server: FakeLLMServer, provider: str
) -> None:
    rows = [{"id": "plain", "prompt": "Hello", "expect": {"contains_any": ["ok"]}}]
    _project(pytester.path, {"version": "bot-v1", "request": {"max_tokens": 20}}, rows)
    server.responder = _truncated_reply
    result = _live(pytester, server, provider)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*TRUNCATED*finish_reason length*"])
    attempt = RunFiles(pytester.path).latest()["cases"][0]["attempts"][0]
    assert attempt["status"] == "FAIL" and attempt["finishReason"] == "length"


def test_truncated_soft_in_the_manifest_only_reports_it(
    pytester: pytest.Pytester, server: FakeLLMServer
) -> None:
    rows = [{"id": "plain", "prompt": "Hello", "expect": {"contains_any": ["ok"]}}]
    _project(pytester.path, {"version": "bot-v1", "truncated": "soft"}, rows)
    server.responder = _truncated_reply
    result = _live(pytester, server, "openai")
    result.assert_outcomes(passed=1)
    run = RunFiles(pytester.path).latest()
    graders = run["cases"][0]["attempts"][0]["graders"]
    assert {"grader": "truncated", "passed": False, "hard": False} == {
        k: graders[-1][k] for k in ("grader", "passed", "hard")
    }


def test_template_error_at_run_time_is_an_error_not_a_verdict(
    pytester: pytest.Pytester, server: FakeLLMServer
) -> None:
    # `vars.shop.name` exists as a name (collection passes) but has no attribute `name`
    manifest = {"version": "bot-v1", "prompt": {"system": "Shop {{ shop.name.first }}"}}
    rows = [
        {
            "id": "plain",
            "prompt": "Hello",
            "vars": {"shop": "Books"},
            "expect": {"contains_any": ["ok"]},
        }
    ]
    _project(pytester.path, manifest, rows)
    result = _live(pytester, server, "openai")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*TEMPLATE_ERROR*prompt.system*plain*"])
    assert "retrying will not help" in result.stdout.str()
    assert not [r for r in server.requests if r.json and "messages" in r.json]


def test_generic_dataset_sends_no_reference_system_prompt(
    pytester: pytest.Pytester, server: FakeLLMServer
) -> None:
    # A project with the reference's pack/ folder: a generic dataset must not pick it up, and
    # its model gets the row's prompt only (no 6,000-character Java-QA system prompt).
    rows = [{"id": "plain", "prompt": "Hello", "expect": {"contains_any": ["ok"]}}]
    _project(pytester.path, {"version": "bot-v1"}, rows)
    shutil.copytree(ROOT / "pack", pytester.path / "pack")
    result = _live(pytester, server, "ollama")
    assert result.ret == 0, result.stdout.str()
    (body,) = [r.json for r in server.requests if r.json and "messages" in r.json]
    assert body["messages"] == [{"role": "user", "content": "Hello"}]
    assert body["options"] == {"temperature": 0}
    assert "tools" not in body and "format" not in body
