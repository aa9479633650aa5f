"""The fake LLM server, exercised over real HTTP with httpx (no patching)."""

from __future__ import annotations

import http.client
import json
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from goldeval.testing import llm_server
from goldeval.testing.llm_server import (
    FakeLLMServer,
    Fault,
    RecordedRequest,
    Reply,
    embed_text,
    fixture_responder,
)

OLLAMA_BODY: dict[str, Any] = {
    "model": "llama3.2:1b",
    "stream": False,
    "options": {"temperature": 0, "seed": 7},
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is the capital of France?"},
    ],
}
OPENAI_BODY: dict[str, Any] = {
    "model": "gpt-4o-mini",
    "temperature": 0,
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is the capital of France?"},
    ],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


@pytest.fixture
def client(server: FakeLLMServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=5.0) as c:
        yield c


def ollama(text: str, **extra: Any) -> dict[str, Any]:
    return {**OLLAMA_BODY, "messages": [{"role": "user", "content": text}], **extra}


def openai(text: str, **extra: Any) -> dict[str, Any]:
    return {**OPENAI_BODY, "messages": [{"role": "user", "content": text}], **extra}


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


# --------------------------------------------------------------------------- lifecycle


def test_base_url_and_lifecycle() -> None:
    srv = FakeLLMServer()
    with pytest.raises(RuntimeError):
        _ = srv.base_url
    srv.start()
    try:
        assert srv.base_url.startswith("http://127.0.0.1:")
        assert srv.port > 0
        assert srv.openai_base_url == srv.base_url + "/v1"
        assert srv.url("api/tags") == srv.base_url + "/api/tags"
        with pytest.raises(RuntimeError):
            srv.start()
        assert httpx.get(srv.url("/")).text == "Ollama is running"
    finally:
        srv.stop()
    srv.stop()  # idempotent
    assert not srv.running
    with pytest.raises(httpx.ConnectError):
        httpx.get(srv.url("/api/tags"), timeout=1.0)


def test_keep_alive_serves_several_requests_on_one_connection(server: FakeLLMServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        for i in range(3):
            body = json.dumps(ollama(f"question {i}"))
            conn.request("POST", "/api/chat", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            assert resp.status == 200
            assert int(resp.getheader("Content-Length", "-1")) == len(data)
            assert json.loads(data)["message"]["content"] == "ok"
            assert not resp.will_close
    finally:
        conn.close()
    assert server.request_count == 3


# --------------------------------------------------------------------------- Ollama


def test_ollama_chat_shape_and_recording(server: FakeLLMServer, client: httpx.Client) -> None:
    body = {**OLLAMA_BODY, "tools": TOOLS}
    r = client.post("/api/chat", json=body, headers={"Authorization": "Bearer secret-token"})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    data = r.json()
    assert data["model"] == "llama3.2:1b"
    assert isinstance(data["created_at"], str) and data["created_at"].endswith("Z")
    assert data["message"] == {"role": "assistant", "content": "ok"}
    assert data["done"] is True
    assert isinstance(data["prompt_eval_count"], int) and data["prompt_eval_count"] > 0
    assert data["eval_count"] == 1

    [req] = server.requests
    assert isinstance(req, RecordedRequest)
    assert (req.method, req.path) == ("POST", "/api/chat")
    assert req.headers["authorization"] == "Bearer secret-token"
    assert req.headers["content-type"] == "application/json"
    assert req.json == body
    assert req.tools == TOOLS
    assert req.last_user_message == "What is the capital of France?"
    assert req.protocol == "ollama" and req.model == "llama3.2:1b"
    assert abs(req.received_at - time.time()) < 60
    assert "secret-token" not in repr(req)


def test_ollama_chat_tool_calls(server: FakeLLMServer, client: httpx.Client) -> None:
    server.reply_with(
        Reply(
            content=None,
            tool_calls=[{"name": "get_weather", "arguments": {"city": "Paris"}}],
            prompt_tokens=11,
            completion_tokens=3,
        )
    )
    data = client.post("/api/chat", json={**OLLAMA_BODY, "tools": TOOLS}).json()
    assert data["message"]["content"] == ""
    assert data["message"]["tool_calls"] == [
        {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    ]
    assert (data["prompt_eval_count"], data["eval_count"]) == (11, 3)


def test_ollama_chat_streams_ndjson_unless_stream_false(
    server: FakeLLMServer, client: httpx.Client
) -> None:
    server.reply_with("Paris is the capital of France.")
    body = {k: v for k, v in OLLAMA_BODY.items() if k != "stream"}
    r = client.post("/api/chat", json=body)
    assert r.headers["content-type"] == "application/x-ndjson"
    chunks = [json.loads(line) for line in r.text.splitlines()]
    assert len(chunks) > 2
    assert "".join(c["message"]["content"] for c in chunks) == "Paris is the capital of France."
    assert [c["done"] for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1]["eval_count"] == 6


def test_ollama_tags(server: FakeLLMServer, client: httpx.Client) -> None:
    server.models = ["llama3.2:1b", "nomic-embed-text"]
    data = client.get("/api/tags").json()
    assert [m["name"] for m in data["models"]] == ["llama3.2:1b", "nomic-embed-text"]


def test_ollama_embed(client: httpx.Client) -> None:
    one = client.post("/api/embed", json={"model": "e", "input": "the cat sat"}).json()
    assert len(one["embeddings"]) == 1 and len(one["embeddings"][0]) == 64
    many = client.post(
        "/api/embed",
        json={
            "model": "e",
            "input": ["the cat sat", "The cat sat!", "quantum chromodynamics lecture"],
        },
    ).json()
    a, b, c = many["embeddings"]
    assert a == one["embeddings"][0]
    assert cosine(a, b) == pytest.approx(1.0)
    assert cosine(a, c) < 0.3
    assert math.sqrt(sum(x * x for x in a)) == pytest.approx(1.0)
    legacy = client.post("/api/embeddings", json={"model": "e", "prompt": "the cat sat"}).json()
    assert legacy["embedding"] == a


def test_embed_text_similarity() -> None:
    base = embed_text("refunds are processed within five business days")
    assert cosine(base, embed_text("Refunds are processed within five business days.")) == (
        pytest.approx(1.0)
    )
    related = cosine(base, embed_text("refunds are processed within ten days"))
    unrelated = cosine(base, embed_text("the weather in Oslo is cold"))
    assert unrelated < 0.3 < related < 1.0
    assert len(embed_text("", dim=16)) == 16 and embed_text("")[0] == 1.0


# --------------------------------------------------------------------------- OpenAI


def test_openai_chat_shape(server: FakeLLMServer, client: httpx.Client) -> None:
    server.reply_with("Paris.")
    r = client.post(
        "/v1/chat/completions", json=OPENAI_BODY, headers={"Authorization": "Bearer sk-test"}
    )
    assert r.status_code == 200
    data = r.json()
    assert data["object"] == "chat.completion"
    assert data["id"].startswith("chatcmpl-")
    assert data["model"] == "gpt-4o-mini"
    [choice] = data["choices"]
    assert choice == {
        "index": 0,
        "message": {"role": "assistant", "content": "Paris."},
        "finish_reason": "stop",
    }
    usage = data["usage"]
    assert usage["completion_tokens"] == 1
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert server.requests[0].protocol == "openai"


def test_openai_chat_tool_calls(server: FakeLLMServer, client: httpx.Client) -> None:
    server.reply_with(
        Reply(
            tool_calls=[
                {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
                {"id": "call_x", "name": "raw", "arguments": '{"broken": '},
            ]
        )
    )
    data = client.post("/v1/chat/completions", json={**OPENAI_BODY, "tools": TOOLS}).json()
    message = data["choices"][0]["message"]
    assert message["content"] is None
    first, second = message["tool_calls"]
    assert first["type"] == "function" and first["id"].startswith("call_")
    assert first["function"]["name"] == "get_weather"
    assert json.loads(first["function"]["arguments"]) == {"city": "Paris"}
    assert second["id"] == "call_x" and second["function"]["arguments"] == '{"broken": '
    assert data["choices"][0]["finish_reason"] == "tool_calls"


def test_openai_chat_stream(server: FakeLLMServer, client: httpx.Client) -> None:
    server.reply_with("one two three four")
    body = {**OPENAI_BODY, "stream": True, "stream_options": {"include_usage": True}}
    r = client.post("/v1/chat/completions", json=body)
    assert r.headers["content-type"] == "text/event-stream"
    events = [line[6:] for line in r.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "one two three four"
    assert chunks[-1]["usage"]["completion_tokens"] == 4


def test_openai_embeddings_and_models(server: FakeLLMServer, client: httpx.Client) -> None:
    data = client.post(
        "/v1/embeddings", json={"model": "text-embedding-3-small", "input": ["a b", "c d"]}
    ).json()
    assert data["model"] == "text-embedding-3-small"
    assert [d["index"] for d in data["data"]] == [0, 1]
    assert data["data"][0]["embedding"] == embed_text("a b")
    single = client.post("/v1/embeddings", json={"model": "m", "input": "a b"}).json()
    assert single["data"][0]["embedding"] == embed_text("a b")
    # No list of models given: no list offered (a client may use any name), as a server
    # without one; offered once asked for, or once models are given.
    assert client.get("/v1/models").status_code == 404
    server.list_models = True
    models = client.get("/v1/models").json()
    assert [m["id"] for m in models["data"]] == list(llm_server.DEFAULT_MODELS)
    assert [r.path for r in server.listings] == ["/v1/models", "/v1/models"]
    assert all(r.path != "/v1/models" for r in server.requests)


def test_model_lists_are_served_apart_and_any_model_answers(client: httpx.Client) -> None:
    with FakeLLMServer(models=["only-model"]) as srv, httpx.Client(base_url=srv.base_url) as c:
        srv.set_fault(Fault.status(500))
        srv.latency = 5.0
        start = time.monotonic()
        assert [m["name"] for m in c.get("/api/tags").json()["models"]] == ["only-model"]
        assert time.monotonic() - start < 2  # no latency, no fault, no slot for the list
        srv.set_fault(None)
        srv.latency = 0.0
        srv.served_model = "only-model"
        body = {**OPENAI_BODY, "model": "gpt-9-nonexistent"}
        answer = c.post("/v1/chat/completions", json=body).json()
        assert answer["model"] == "only-model"  # any name is answered, by the one it serves
        srv.list_models = False
        assert c.get("/v1/models").status_code == 404


# --------------------------------------------------------------------------- answers


def test_reply_map_uses_last_user_message(server: FakeLLMServer, client: httpx.Client) -> None:
    server.reply_map({"q1": "a1", "q2": Reply("a2", completion_tokens=9)}, default="dunno")
    body = {
        **OLLAMA_BODY,
        "messages": [
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "q2"},
        ],
    }
    data = client.post("/api/chat", json=body).json()
    assert (data["message"]["content"], data["eval_count"]) == ("a2", 9)
    assert client.post("/api/chat", json=ollama("q1")).json()["message"]["content"] == "a1"
    assert client.post("/api/chat", json=ollama("??")).json()["message"]["content"] == "dunno"
    # OpenAI list-of-parts content is matched by its text.
    parts = {
        **OPENAI_BODY,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "q1"}]}],
    }
    data = client.post("/v1/chat/completions", json=parts).json()
    assert data["choices"][0]["message"]["content"] == "a1"


def test_replay_fixtures_matches_templated_prompts(
    server: FakeLLMServer, client: httpx.Client
) -> None:
    server.replay_fixtures({"What is 2+2?": "4", "What is 2+2? Explain.": "4, because."})
    templated = "Context: arithmetic.\n\nQuestion: What is 2+2? Explain.\nAnswer briefly."
    assert client.post("/api/chat", json=ollama(templated)).json()["message"]["content"] == (
        "4, because."
    )
    assert client.post("/api/chat", json=ollama("What is 2+2?")).json()["message"]["content"] == "4"
    assert client.post("/api/chat", json=ollama("unknown")).json()["message"]["content"] == "ok"


def test_custom_responder_sees_the_request(server: FakeLLMServer, client: httpx.Client) -> None:
    server.responder = lambda req: f"{req.model}:{req.last_user_message}"
    assert client.post("/api/chat", json=ollama("hi")).json()["message"]["content"] == (
        "llama3.2:1b:hi"
    )


def test_responder_exception_becomes_500(server: FakeLLMServer, client: httpx.Client) -> None:
    def boom(_req: RecordedRequest) -> str:
        raise RuntimeError("kaput")

    server.responder = boom
    r = client.post("/v1/chat/completions", json=OPENAI_BODY)
    assert r.status_code == 500
    assert "kaput" in r.json()["error"]["message"]
    assert [type(e) for e in server.errors] == [RuntimeError]


def test_reply_fields_raw_error_status_headers_delay(
    server: FakeLLMServer, client: httpx.Client
) -> None:
    server.script(
        [
            Reply(raw_body=b"not json"),
            Reply(error="model crashed"),
            Reply(status=500, error={"message": "boom"}),
            Reply("fine", headers={"X-Trace": "abc"}),
            Reply("slow", delay=0.2),
        ]
    )
    assert client.post("/api/chat", json=OLLAMA_BODY).content == b"not json"
    r = client.post("/api/chat", json=OLLAMA_BODY)
    assert (r.status_code, r.json()) == (200, {"error": "model crashed"})
    r = client.post("/api/chat", json=OLLAMA_BODY)
    assert (r.status_code, r.json()) == (500, {"error": {"message": "boom"}})
    r = client.post("/api/chat", json=OLLAMA_BODY)
    assert r.headers["x-trace"] == "abc" and r.json()["message"]["content"] == "fine"
    start = time.monotonic()
    assert client.post("/api/chat", json=OLLAMA_BODY).json()["message"]["content"] == "slow"
    assert time.monotonic() - start >= 0.18


def test_invalid_requests_get_400_and_unknown_paths_404(
    server: FakeLLMServer, client: httpx.Client
) -> None:
    server.script([Fault.status(503)])
    r = client.get("/api/nope")
    assert r.status_code == 404
    assert len(server.faults) == 1  # unknown paths do not consume the script
    server.script([])
    r = client.post("/api/chat", json={"messages": []})
    assert r.status_code == 400 and r.json() == {"error": "model is required"}
    r = client.post("/v1/chat/completions", content=b"{oops", headers={"Content-Type": "x"})
    assert r.status_code == 400 and "message" in r.json()["error"]
    assert server.requests[-1].json is None and server.requests[-1].body == b"{oops"
    r = client.post("/api/embed", json={"model": "e"})
    assert r.status_code == 400


# --------------------------------------------------------------------------- faults


def test_script_status_with_retry_after_then_ok(
    server: FakeLLMServer, client: httpx.Client
) -> None:
    server.script([Fault.status(429, retry_after=1), Fault.status(503), "scripted"])
    r1 = client.post("/api/chat", json=OLLAMA_BODY)
    assert r1.status_code == 429
    assert r1.headers["retry-after"] == "1"
    assert r1.json() == {"error": "too many requests"}
    r2 = client.post("/api/chat", json=OLLAMA_BODY)
    assert r2.status_code == 503 and "retry-after" not in r2.headers
    r3 = client.post("/api/chat", json=OLLAMA_BODY)
    assert r3.json()["message"]["content"] == "scripted"
    r4 = client.post("/api/chat", json=OLLAMA_BODY)
    assert r4.json()["message"]["content"] == "ok"
    assert server.request_count == 4


def test_status_fault_bodies(server: FakeLLMServer, client: httpx.Client) -> None:
    server.script(
        [
            Fault.status(429, retry_after="Wed, 21 Oct 2015 07:28:00 GMT"),
            Fault.status(400, body={"error": {"message": "context length exceeded"}}),
            Fault.status(502, body=b"<html>bad gateway</html>"),
        ]
    )
    r = client.post("/v1/chat/completions", json=OPENAI_BODY)
    assert r.headers["retry-after"] == "Wed, 21 Oct 2015 07:28:00 GMT"
    assert r.json()["error"]["type"] == "rate_limit_error"
    r = client.post("/v1/chat/completions", json=OPENAI_BODY)
    assert (r.status_code, r.json()["error"]["message"]) == (400, "context length exceeded")
    r = client.post("/v1/chat/completions", json=OPENAI_BODY)
    assert (r.status_code, r.content) == (502, b"<html>bad gateway</html>")
    with pytest.raises(ValueError):
        Fault.status(99)


def test_persistent_fault_and_script_precedence(
    server: FakeLLMServer, client: httpx.Client
) -> None:
    server.set_fault(Fault.status(503, retry_after=2))
    server.faults.append("from script")
    assert client.post("/api/chat", json=OLLAMA_BODY).json()["message"]["content"] == (
        "from script"
    )
    for _ in range(3):
        r = client.post("/api/chat", json=OLLAMA_BODY)
        assert (r.status_code, r.headers["retry-after"]) == (503, "2")
    assert client.get("/").status_code == 503
    # The model lists are served apart from the calls: no fault, no script, no latency
    # (404 here: no list of models was given, so none is offered).
    assert client.get("/api/tags").status_code == 404
    server.set_fault(None)
    assert client.post("/api/chat", json=OLLAMA_BODY).status_code == 200


def test_hang_causes_read_timeout(server: FakeLLMServer, client: httpx.Client) -> None:
    server.script([Fault.hang(0.8)])
    start = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        client.post("/api/chat", json=OLLAMA_BODY, timeout=0.2)
    assert time.monotonic() - start < 0.7
    # The server keeps serving other requests meanwhile.
    assert client.post("/api/chat", json=OLLAMA_BODY).status_code == 200


def test_hang_shorter_than_timeout_still_answers(
    server: FakeLLMServer, client: httpx.Client
) -> None:
    server.script([Fault.hang(0.2)])
    assert client.post("/api/chat", json=OLLAMA_BODY, timeout=2.0).status_code == 200


def test_stop_interrupts_a_hang() -> None:
    srv = FakeLLMServer().start()
    with httpx.Client(base_url=srv.base_url) as c:
        srv.set_fault(Fault.hang(30))
        errors: list[BaseException] = []

        def call() -> None:
            try:
                c.get("/", timeout=10)
            except httpx.HTTPError as exc:
                errors.append(exc)

        t = threading.Thread(target=call)
        t.start()
        while srv.in_flight == 0:
            time.sleep(0.01)
        start = time.monotonic()
        srv.stop()
        t.join(5)
        assert time.monotonic() - start < 2
        assert len(errors) == 1 and isinstance(errors[0], httpx.TransportError)


def test_drop_gives_connection_error(server: FakeLLMServer, client: httpx.Client) -> None:
    server.script([Fault.drop()])
    with pytest.raises(httpx.TransportError):
        client.post("/v1/chat/completions", json=OPENAI_BODY)
    assert server.request_count == 1
    assert client.post("/v1/chat/completions", json=OPENAI_BODY).status_code == 200


def test_invalid_json(server: FakeLLMServer, client: httpx.Client) -> None:
    server.script([Fault.invalid_json()])
    r = client.post("/api/chat", json=OLLAMA_BODY)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    with pytest.raises(json.JSONDecodeError):
        r.json()


def test_empty_content(server: FakeLLMServer, client: httpx.Client) -> None:
    server.reply_with(Reply("text", tool_calls=[{"name": "f", "arguments": {}}]))
    server.script([Fault.empty_content(), Fault.empty_content(), Fault.empty_content()])
    data = client.post("/api/chat", json=OLLAMA_BODY).json()
    assert data["message"] == {"role": "assistant", "content": ""} and data["eval_count"] == 0
    data = client.post("/v1/chat/completions", json=OPENAI_BODY).json()
    assert data["choices"][0]["message"] == {"role": "assistant", "content": ""}
    assert client.post("/api/embed", json={"model": "e", "input": "x"}).json()["embeddings"] == []


def test_error_field(server: FakeLLMServer, client: httpx.Client) -> None:
    server.script([Fault.error_field("model 'x' not found, try pulling it first")])
    r = client.post("/api/chat", json=OLLAMA_BODY)
    assert r.status_code == 200
    assert r.json() == {"error": "model 'x' not found, try pulling it first"}


def test_latency_fault_and_global_latency(server: FakeLLMServer, client: httpx.Client) -> None:
    server.script([Fault.latency(0.2)])
    start = time.monotonic()
    assert client.post("/api/chat", json=OLLAMA_BODY).status_code == 200
    assert time.monotonic() - start >= 0.18
    server.latency = 0.2
    start = time.monotonic()
    assert client.get("/").status_code == 200
    assert time.monotonic() - start >= 0.18


def test_reset(server: FakeLLMServer, client: httpx.Client) -> None:
    server.reply_with("x")
    server.latency = 0.05
    server.set_fault(Fault.status(500))
    server.script([Fault.drop()])
    with pytest.raises(httpx.TransportError):
        client.get("/")
    server.reset()
    assert server.request_count == 0 and server.requests == [] and server.max_in_flight == 0
    assert server.fault is None and len(server.faults) == 0 and server.latency == 0
    assert client.post("/api/chat", json=OLLAMA_BODY).json()["message"]["content"] == "ok"
    assert server.request_count == 1


# --------------------------------------------------------------------------- concurrency


def test_parallel_requests_overlap(server: FakeLLMServer) -> None:
    server.latency = 0.2
    limits = httpx.Limits(max_connections=50)
    with httpx.Client(base_url=server.base_url, timeout=10.0, limits=limits) as c:

        def call(i: int) -> str:
            r = c.post("/api/chat", json=ollama(f"q{i}"))
            r.raise_for_status()
            return str(r.json()["message"]["content"])

        start = time.monotonic()
        with ThreadPoolExecutor(max_workers=20) as pool:
            answers = list(pool.map(call, range(20)))
        elapsed = time.monotonic() - start
    assert answers == ["ok"] * 20
    assert elapsed < 2.0, elapsed  # sequential would take 20 x 0.2 = 4 s
    assert server.max_in_flight >= 10
    assert server.request_count == 20
    assert server.in_flight == 0


def test_64_requests_in_flight_at_once(server: FakeLLMServer) -> None:
    # Every handler blocks until 64 are inside at the same time: proves real concurrency.
    barrier = threading.Barrier(64, timeout=10)

    def responder(_req: RecordedRequest) -> str:
        barrier.wait()
        return "together"

    server.responder = responder
    limits = httpx.Limits(max_connections=100)
    with httpx.Client(base_url=server.base_url, timeout=15.0, limits=limits) as c:

        def call(i: int) -> int:
            return c.post("/v1/chat/completions", json=openai(f"q{i}")).status_code

        with ThreadPoolExecutor(max_workers=64) as pool:
            statuses = list(pool.map(call, range(64)))
    assert statuses == [200] * 64
    assert server.max_in_flight == 64


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    rows = [
        {"id": "capital", "prompt": "What is the capital of France?", "expect": {}},
        {"id": "math", "prompt": "What is 2+2?", "expect": {}},
    ]
    (tmp_path / "core.jsonl").write_text(
        "\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8"
    )
    (tmp_path / "calibration.jsonl").write_text(
        json.dumps({"id": "cal", "prompt": "Calibrate me"}) + "\n", encoding="utf-8"
    )
    (tmp_path / "extra.jsonl").write_text(
        json.dumps({"id": "nofile", "prompt": "No fixture for me"}) + "\n", encoding="utf-8"
    )
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    (fixtures / "capital.out.md").write_text("Paris is the capital.\n", encoding="utf-8")
    (fixtures / "math.out.md").write_text("**4**\n", encoding="utf-8")
    (fixtures / "cal.out.md").write_text("calibrated\n", encoding="utf-8")
    return tmp_path


def test_fixture_responder_in_process(
    server: FakeLLMServer, client: httpx.Client, dataset: Path
) -> None:
    server.responder = fixture_responder(dataset)
    assert client.post("/api/chat", json=OLLAMA_BODY).json()["message"]["content"] == (
        "Paris is the capital.\n"
    )
    templated = "Use the context.\n\nQuestion: What is 2+2?"
    data = client.post("/v1/chat/completions", json=openai(templated)).json()
    assert data["choices"][0]["message"]["content"] == "**4**\n"
    # calibration.jsonl is not a source of prompts; unknown prompts fail loudly.
    for prompt in ("Calibrate me", "No fixture for me"):
        r = client.post("/api/chat", json=ollama(prompt))
        assert r.status_code == 404 and "no fixture" in r.json()["error"]
    server.responder = fixture_responder(dataset, default="n/a")
    assert client.post("/api/chat", json=ollama("??")).json()["message"]["content"] == "n/a"
    server.replay_fixtures(dataset)
    assert client.post("/api/chat", json=ollama("What is 2+2?")).json()["message"]["content"] == (
        "**4**\n"
    )


def test_fixture_responder_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        fixture_responder(tmp_path / "missing")
    (tmp_path / "bad.jsonl").write_text("{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:1"):
        fixture_responder(tmp_path)


# --------------------------------------------------------------------------- CLI


def _cli(*args: str) -> subprocess.Popen[str]:
    src = Path(llm_server.__file__).resolve().parents[3]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "goldeval.testing.llm_server", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_cli_serves_fixtures(dataset: Path) -> None:
    with _cli("--fixtures", str(dataset), "--latency", "0.05") as proc:
        try:
            assert proc.stdout is not None
            base_url = proc.stdout.readline().strip()
            assert base_url.startswith("http://127.0.0.1:")
            r = httpx.post(base_url + "/api/chat", json=OLLAMA_BODY, timeout=5)
            assert r.json()["message"]["content"] == "Paris is the capital.\n"
        finally:
            proc.terminate()
        assert proc.wait(timeout=5) == 0


def test_cli_fail_all() -> None:
    with _cli("--fail-all", "503", "--retry-after", "3") as proc:
        try:
            assert proc.stdout is not None
            base_url = proc.stdout.readline().strip()
            r = httpx.post(base_url + "/v1/chat/completions", json=OPENAI_BODY, timeout=5)
            assert (r.status_code, r.headers["retry-after"]) == (503, "3")
        finally:
            proc.terminate()
        proc.wait(timeout=5)


def test_cli_load_modes() -> None:
    with _cli("--rate-limit", "1", "--capacity", "1", "--stream-interval", "0.01") as proc:
        try:
            assert proc.stdout is not None
            base_url = proc.stdout.readline().strip()
            codes = [
                httpx.post(base_url + "/api/chat", json=OLLAMA_BODY, timeout=5).status_code
                for _ in range(2)
            ]
            assert codes == [200, 429]
        finally:
            proc.terminate()
        proc.wait(timeout=5)


# --------------------------------------------------------------------------- load modes


def _chat(url: str, client: httpx.Client) -> httpx.Response:
    return client.post(url + "/api/chat", json=OLLAMA_BODY, timeout=10)


def test_capacity_mode_serves_c_at_a_time_and_queues_the_rest() -> None:
    with FakeLLMServer(latency=0.2, capacity=2) as srv, httpx.Client() as client:
        start = time.monotonic()
        with ThreadPoolExecutor(max_workers=6) as pool:
            responses = list(pool.map(lambda _: _chat(srv.base_url, client), range(6)))
        elapsed = time.monotonic() - start
        assert all(r.status_code == 200 for r in responses)
        assert elapsed >= 0.55  # three rounds of two, not one round of six
        waits = sorted(srv.queue_waits)
        assert len(waits) == 6 and waits[0] < 0.1 and waits[-1] >= 0.35


def test_rate_limit_mode_answers_429_with_retry_after_above_r_per_second() -> None:
    with FakeLLMServer(rate_limit=3) as srv, httpx.Client() as client:
        responses = [_chat(srv.base_url, client) for _ in range(5)]
        assert [r.status_code for r in responses] == [200, 200, 200, 429, 429]
        wait = float(responses[3].headers["retry-after"])
        assert 0 < wait <= 1.0
        assert int(responses[3].headers["retry-after-ms"]) >= 1
        assert srv.rejected == 2
        time.sleep(wait + 0.05)
        assert _chat(srv.base_url, client).status_code == 200


def test_paced_stream_arrives_in_pieces() -> None:
    body = {**OLLAMA_BODY, "stream": True}
    with FakeLLMServer(stream_interval=0.15) as srv, httpx.Client() as client:
        srv.reply_with("one two three four five six")
        arrivals = []
        start = time.monotonic()
        with client.stream("POST", srv.base_url + "/api/chat", json=body) as response:
            for line in response.iter_lines():
                if line:
                    arrivals.append(time.monotonic() - start)
        assert arrivals[0] < 0.1 and arrivals[-1] >= 0.28
        srv.reset()
        assert srv.stream_interval == 0 and srv.capacity is None and srv.rate_limit is None
