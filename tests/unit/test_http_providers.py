"""The Ollama and OpenAI HTTP providers against a real local fake server (no patching)."""

from __future__ import annotations

import base64
import email.utils
import random
import socket
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from goldeval.core.errors import ConfigError, ProviderError
from goldeval.core.settings import ProviderSettings
from goldeval.dataset.case import GoldenCase
from goldeval.providers.base import Answer, ProviderRequest, ToolCall
from goldeval.providers.http import (
    HTTPProvider,
    OllamaProvider,
    OpenAIProvider,
    make_http_provider,
    parse_retry_after,
)
from goldeval.testing.llm_server import FakeLLMServer, Fault, Reply

PASSWORD = "s3cr3t-pw"
API_KEY = "sk-test-SECRET"
BASIC_TOKEN = base64.b64encode(f"u:{PASSWORD}".encode()).decode()
SECRETS = (PASSWORD, API_KEY, BASIC_TOKEN)
PROTOCOLS = ("ollama", "openai")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
CASE = GoldenCase(id="c1", prompt="What is 2+2?", expect={})


class Sleeps(list[float]):
    """An injectable ``sleep`` that records the delays instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture(scope="module")
def _server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def srv(_server: FakeLLMServer) -> FakeLLMServer:
    """One real server per module (starting one per test costs more than the tests)."""
    _server.reset()
    return _server


Factory = Callable[..., HTTPProvider]


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def make(srv: FakeLLMServer, sleeps: Sleeps) -> Iterator[Factory]:
    """Build a provider for a protocol pointed at ``srv``; every provider is closed after."""
    made: list[HTTPProvider] = []

    def factory(protocol: str, **overrides: Any) -> HTTPProvider:
        values: dict[str, Any] = {
            "name": protocol,
            "model": "fake-llm:latest",
            "base_url": srv.base_url if protocol == "ollama" else srv.openai_base_url,
            "connect_timeout": 2.0,
            "read_timeout": 5.0,
            "retries": 2,
            "backoff_base": 0.5,
            "backoff_max": 30.0,
        }
        if protocol == "ollama":
            values.update(user="u", password=PASSWORD)
        else:
            values.update(api_key=API_KEY)
        values.update(overrides)
        provider = make_http_provider(
            ProviderSettings(**values), sleep=sleeps, rng=random.Random(1234)
        )
        assert isinstance(provider, HTTPProvider)
        made.append(provider)
        return provider

    yield factory
    for provider in made:
        provider.close()


def request(
    user: str = "What is 2+2?", system: str = "Be brief.", **options: Any
) -> ProviderRequest:
    return ProviderRequest(
        case=CASE,
        attempt=1,
        system=system,
        user=user,
        model=None,
        retrieved=[],
        options=dict(options),
    )


def fail(provider: HTTPProvider, req: ProviderRequest | None = None) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        provider.complete(req or request())
    return info.value


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def assert_no_secret(err: BaseException) -> None:
    """No secret in the message, str, repr, args or anything chained to the error."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [err]
    while todo:
        exc = todo.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        texts = [str(exc), repr(exc), *map(str, exc.args), str(getattr(exc, "message", ""))]
        for text in texts:
            for secret in SECRETS:
                assert secret not in text, f"secret leaked in {type(exc).__name__}: {text}"
        todo += [exc.__cause__, exc.__context__]


# --------------------------------------------------------------------------- construction


def test_factory_picks_the_protocol_and_rejects_unknown_names() -> None:
    ollama = make_http_provider(ProviderSettings(name="ollama", base_url="http://x:1"))
    openai = make_http_provider(ProviderSettings(name="OpenAI", base_url="http://x:1"))
    try:
        assert isinstance(ollama, OllamaProvider) and ollama.thread_safe
        assert isinstance(openai, OpenAIProvider) and openai.thread_safe
    finally:
        ollama.close()
        openai.close()
    with pytest.raises(ConfigError):
        make_http_provider(ProviderSettings(name="bard"))


def test_client_is_pooled_with_explicit_timeouts() -> None:
    settings = ProviderSettings(base_url="http://127.0.0.1:1", connect_timeout=2, read_timeout=7)
    with OllamaProvider(settings) as p:
        timeout = p._client.timeout
        assert (timeout.connect, timeout.read) == (2, 7)
        assert timeout.write is not None and timeout.pool is not None
        pool = p._client._transport._pool  # type: ignore[attr-defined]
        assert pool._max_connections == 64
        assert pool._max_keepalive_connections == 64


@pytest.mark.parametrize(
    ("base", "endpoint"),
    [
        ("http://h:1", "http://h:1/v1/chat/completions"),
        ("http://h:1/", "http://h:1/v1/chat/completions"),
        ("http://h:1/v1", "http://h:1/v1/chat/completions"),
        ("http://h:1/v1/", "http://h:1/v1/chat/completions"),
        ("h:1/proxy", "http://h:1/proxy/v1/chat/completions"),
    ],
)
def test_openai_endpoint_does_not_double_v1(base: str, endpoint: str) -> None:
    with OpenAIProvider(ProviderSettings(name="openai", base_url=base)) as p:
        assert p.endpoint == endpoint


# --------------------------------------------------------------------------- wire formats


def test_ollama_request_body_and_basic_auth(make: Factory, srv: FakeLLMServer) -> None:
    srv.reply_with(Reply(content="4", prompt_tokens=12, completion_tokens=1))
    answer = make("ollama").complete(request())
    assert answer.text == "4"
    assert (answer.input_tokens, answer.output_tokens) == (12, 1)
    assert answer.tries == 1 and answer.model == "fake-llm:latest"
    assert answer.duration_ms >= 1 and answer.cost is None
    (rec,) = srv.requests
    assert rec.path == "/api/chat"
    assert rec.json == {
        "model": "fake-llm:latest",
        "stream": False,
        "options": {"temperature": 0},
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is 2+2?"},
        ],
    }
    assert rec.headers["authorization"] == f"Basic {BASIC_TOKEN}"
    assert rec.headers["content-type"] == "application/json"


def test_openai_request_body_and_bearer(make: Factory, srv: FakeLLMServer) -> None:
    srv.reply_with(Reply(content="4", prompt_tokens=20, completion_tokens=2))
    answer = make("openai").complete(request())
    assert answer.text == "4"
    assert (answer.input_tokens, answer.output_tokens) == (20, 2)
    (rec,) = srv.requests
    assert rec.path == "/v1/chat/completions"
    assert rec.json == {
        "model": "fake-llm:latest",
        "temperature": 0,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is 2+2?"},
        ],
    }
    assert rec.headers["authorization"] == f"Bearer {API_KEY}"


def test_openai_base_without_v1(make: Factory, srv: FakeLLMServer) -> None:
    make("openai", base_url=srv.base_url).complete(request())
    assert srv.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_empty_system_prompt_is_omitted_and_request_model_wins(
    make: Factory, srv: FakeLLMServer, protocol: str
) -> None:
    req = request(system="")
    req.model = "other-model"
    answer = make(protocol).complete(req)
    rec = srv.requests[0]
    assert rec.messages == [{"role": "user", "content": "What is 2+2?"}]
    assert rec.model == "other-model" and answer.model == "other-model"


@pytest.mark.parametrize(
    ("user", "password", "api_key"),
    [("", PASSWORD, None), ("  ", PASSWORD, None), ("u", None, None), (None, None, "  ")],
)
def test_no_auth_header_without_complete_credentials(
    make: Factory, srv: FakeLLMServer, user: str | None, password: str | None, api_key: str | None
) -> None:
    protocol = "openai" if api_key is not None else "ollama"
    make(protocol, user=user, password=password, api_key=api_key).complete(request())
    assert "authorization" not in srv.requests[0].headers


def test_empty_password_still_sends_basic_auth(make: Factory, srv: FakeLLMServer) -> None:
    make("ollama", password="").complete(request())
    token = base64.b64encode(b"u:").decode()
    assert srv.requests[0].headers["authorization"] == f"Basic {token}"


def test_userinfo_in_base_url_becomes_basic_auth(make: Factory, srv: FakeLLMServer) -> None:
    base = srv.base_url.replace("http://", f"http://u:{PASSWORD}@")
    provider = make("ollama", base_url=base, user=None, password=None)
    assert PASSWORD not in provider.base_url and PASSWORD not in repr(provider)
    provider.complete(request())
    assert srv.requests[0].headers["authorization"] == f"Basic {BASIC_TOKEN}"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_tools_are_sent_and_tool_calls_parsed(
    make: Factory, srv: FakeLLMServer, protocol: str
) -> None:
    srv.reply_with(
        Reply(
            content=None,
            tool_calls=[
                {"name": "get_weather", "arguments": {"city": "Paris"}},
                {"function": {"name": "get_time", "arguments": '{"tz": "UTC"}'}},
                {"name": "noop"},
            ],
        )
    )
    answer = make(protocol).complete(request(tools=TOOLS))
    assert srv.requests[0].tools == TOOLS
    assert answer.tool_calls == [
        ToolCall("get_weather", {"city": "Paris"}),
        ToolCall("get_time", {"tz": "UTC"}),
        ToolCall("noop", {}),
    ]
    assert answer.text == ""


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_no_tools_key_without_tools(make: Factory, srv: FakeLLMServer, protocol: str) -> None:
    make(protocol).complete(request(tools=[]))
    assert "tools" not in srv.requests[0].json


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unparseable_tool_arguments_are_a_parser_error(
    make: Factory, srv: FakeLLMServer, protocol: str
) -> None:
    srv.reply_with(Reply(tool_calls=[{"name": "f", "arguments": "{not json"}]))
    err = fail(make(protocol))
    assert err.kind == "PARSER_ERROR" and err.tries == 1
    assert "'f'" in err.message


@pytest.mark.parametrize(
    ("protocol", "body"),
    [
        ("ollama", b'{"message": {"content": "hi"}, "prompt_eval_count": "7", "eval_count": 2.5}'),
        ("ollama", b'{"message": {"content": "hi"}, "prompt_eval_count": true}'),
        ("openai", b'{"choices": [{"message": {"content": "hi"}}]}'),
        (
            "openai",
            b'{"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": "x"}}',
        ),
    ],
)
def test_non_numeric_or_missing_tokens_are_unknown(
    make: Factory, srv: FakeLLMServer, protocol: str, body: bytes
) -> None:
    srv.reply_with(Reply(raw_body=body))
    answer = make(protocol, price_per_1k_input=1.0, price_per_1k_output=1.0).complete(request())
    assert answer.text == "hi"
    assert answer.input_tokens is None and answer.output_tokens is None
    assert answer.cost is None


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_cost_from_prices_and_tokens(make: Factory, srv: FakeLLMServer, protocol: str) -> None:
    srv.reply_with(Reply(content="ok", prompt_tokens=2000, completion_tokens=500))
    answer = make(protocol, price_per_1k_input=0.5, price_per_1k_output=2.0).complete(request())
    assert answer.cost == pytest.approx(2000 / 1000 * 0.5 + 500 / 1000 * 2.0)


def test_openai_content_parts_are_joined(make: Factory, srv: FakeLLMServer) -> None:
    body = b'{"choices": [{"message": {"content": [{"type": "text", "text": "a"}, "b"]}}]}'
    srv.reply_with(Reply(raw_body=body))
    assert make("openai").complete(request()).text == "ab"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_duration_is_the_round_trip(make: Factory, srv: FakeLLMServer, protocol: str) -> None:
    srv.script([Fault.latency(0.05)])
    answer = make(protocol).complete(request())
    assert 50 <= answer.duration_ms < 5000


# --------------------------------------------------------------------------- retries


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_429_retry_after_is_honoured_then_success(
    make: Factory, srv: FakeLLMServer, sleeps: Sleeps, protocol: str
) -> None:
    srv.script([Fault.status(429, retry_after=3), "done"])
    answer = make(protocol).complete(request())
    assert answer.text == "done" and answer.tries == 2
    assert sleeps == [3.0]
    assert srv.request_count == 2


def test_retry_after_is_capped_at_backoff_max(
    make: Factory, srv: FakeLLMServer, sleeps: Sleeps
) -> None:
    srv.script([Fault.status(429, retry_after=120), Fault.status(503, retry_after=90), "ok"])
    answer = make("ollama", backoff_max=5.0).complete(request())
    assert answer.tries == 3
    assert sleeps == [5.0, 5.0]


def test_retry_after_as_http_date(make: Factory, srv: FakeLLMServer, sleeps: Sleeps) -> None:
    when = email.utils.formatdate(time.time() + 20, usegmt=True)
    srv.script([Fault.status(503, retry_after=when), "ok"])
    assert make("openai").complete(request()).tries == 2
    (delay,) = sleeps
    assert 15.0 <= delay <= 20.0


def test_parse_retry_after() -> None:
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None
    assert parse_retry_after("") is None
    assert parse_retry_after("Thu, 01 Jan 1970 00:00:10 GMT", now=0.0) == 10.0
    assert parse_retry_after("Thu, 01 Jan 1970 00:00:10 GMT", now=100.0) == 0.0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_rate_limit_exhausts_retries(
    make: Factory, srv: FakeLLMServer, sleeps: Sleeps, protocol: str
) -> None:
    srv.set_fault(Fault.status(429, retry_after=1))
    err = fail(make(protocol, retries=3))
    assert err.kind == "RATE_LIMIT" and err.tries == 4
    assert srv.request_count == 4
    assert sleeps == [1.0, 1.0, 1.0]
    # the count is err.tries, shown once by whoever prints the error (issue 15)
    assert "HTTP 429" in err.message and "after 4" not in err.message


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408])
def test_server_errors_and_408_are_retried_with_full_jitter(
    make: Factory, srv: FakeLLMServer, sleeps: Sleeps, status: int
) -> None:
    srv.set_fault(Fault.status(status))
    err = fail(make("ollama", retries=4, backoff_base=1.0, backoff_max=5.0))
    assert err.kind == "HTTP_ERROR" and err.tries == 5
    assert f"HTTP {status}" in err.message
    rng = random.Random(1234)
    expected = [rng.uniform(0, min(5.0, 1.0 * 2 ** (n - 1))) for n in (1, 2, 3, 4)]
    assert sleeps == pytest.approx(expected)
    assert all(0 <= d <= cap for d, cap in zip(sleeps, (1, 2, 4, 5), strict=True))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_5xx_then_success(make: Factory, srv: FakeLLMServer, protocol: str) -> None:
    srv.script([Fault.status(500), Fault.status(503), "fine"])
    answer = make(protocol).complete(request())
    assert answer.text == "fine" and answer.tries == 3


def test_zero_retries_means_one_try(make: Factory, srv: FakeLLMServer, sleeps: Sleeps) -> None:
    srv.set_fault(Fault.status(503))
    err = fail(make("openai", retries=0))
    assert err.tries == 1 and srv.request_count == 1 and sleeps == []


@pytest.mark.parametrize(
    "status,kind",
    [
        (400, "BAD_REQUEST"),
        (401, "AUTH_FAILED"),
        (403, "AUTH_FAILED"),
        (404, "NOT_FOUND"),
        (422, "BAD_REQUEST"),
    ],
)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_other_4xx_is_a_non_retryable_error_without_retry(
    make: Factory, srv: FakeLLMServer, sleeps: Sleeps, protocol: str, status: int, kind: str
) -> None:
    srv.set_fault(Fault.status(status, body={"error": "x" * 5000}))
    err = fail(make(protocol))
    assert err.kind == kind and err.tries == 1 and not err.retryable
    assert srv.request_count == 1 and sleeps == []
    assert f"HTTP {status}" in err.message
    assert "x" * 199 in err.message and "x" * 201 not in err.message


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_read_timeout_after_all_tries(
    make: Factory, srv: FakeLLMServer, sleeps: Sleeps, protocol: str
) -> None:
    srv.set_fault(Fault.hang(2.0))
    started = time.monotonic()
    err = fail(make(protocol, read_timeout=0.3, retries=1))
    assert time.monotonic() - started < 3.0
    assert err.kind == "TIMEOUT" and err.tries == 2
    assert srv.request_count == 2 and len(sleeps) == 1
    assert "0.3s" in err.message and "--golden-timeout" in err.message


def test_read_timeout_then_success(make: Factory, srv: FakeLLMServer) -> None:
    srv.script([Fault.hang(2.0), "late but fine"])
    answer = make("ollama", read_timeout=0.3).complete(request())
    assert answer.text == "late but fine" and answer.tries == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_dropped_connection(make: Factory, srv: FakeLLMServer, protocol: str) -> None:
    srv.set_fault(Fault.drop())
    err = fail(make(protocol, retries=2))
    assert err.kind == "MODEL_UNAVAILABLE" and err.tries == 3
    assert srv.request_count == 3


def test_dropped_connection_then_success(make: Factory, srv: FakeLLMServer) -> None:
    srv.script([Fault.drop(), "back"])
    answer = make("openai").complete(request())
    assert answer.text == "back" and answer.tries == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_connection_refused(make: Factory, sleeps: Sleeps, protocol: str) -> None:
    base = f"http://127.0.0.1:{closed_port()}"
    err = fail(make(protocol, base_url=base, retries=2))
    assert err.kind == "MODEL_UNAVAILABLE" and err.tries == 3
    assert len(sleeps) == 2
    assert f"connection refused by {base}" in err.message
    assert "is the model server running?" in err.message
    assert "--golden-base-url" in err.message
    assert ("OLLAMA_HOST" if protocol == "ollama" else "OPENAI_BASE_URL") in err.message


# --------------------------------------------------------------------------- no-retry faults


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_invalid_json_is_a_parser_error(
    make: Factory, srv: FakeLLMServer, sleeps: Sleeps, protocol: str
) -> None:
    srv.set_fault(Fault.invalid_json())
    err = fail(make(protocol))
    assert err.kind == "PARSER_ERROR" and err.tries == 1 and sleeps == []
    assert "not JSON" in err.message


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_invalid_utf8_is_a_parser_error(make: Factory, srv: FakeLLMServer, protocol: str) -> None:
    srv.reply_with(Reply(raw_body=b'{"message": {"content": "\xff\xfe"}}'))
    err = fail(make(protocol))
    assert err.kind == "PARSER_ERROR" and err.tries == 1
    assert "UTF-8" in err.message


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_non_object_json_is_a_parser_error(
    make: Factory, srv: FakeLLMServer, protocol: str
) -> None:
    srv.reply_with(Reply(raw_body=b"[1, 2]"))
    assert fail(make(protocol)).kind == "PARSER_ERROR"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_empty_content_is_empty_response(
    make: Factory, srv: FakeLLMServer, sleeps: Sleeps, protocol: str
) -> None:
    srv.set_fault(Fault.empty_content())
    err = fail(make(protocol))
    assert err.kind == "EMPTY_RESPONSE" and err.tries == 1 and sleeps == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_blank_content_is_empty_response(make: Factory, srv: FakeLLMServer, protocol: str) -> None:
    srv.reply_with(" \n\t ")
    assert fail(make(protocol)).kind == "EMPTY_RESPONSE"


@pytest.mark.parametrize(
    "body", [b"{}", b'{"choices": []}', b'{"choices": null}', b'{"choices": [{}]}']
)
def test_openai_missing_choices_is_empty_response(
    make: Factory, srv: FakeLLMServer, body: bytes
) -> None:
    srv.reply_with(Reply(raw_body=body))
    err = fail(make("openai"))
    assert err.kind == "EMPTY_RESPONSE" and err.tries == 1


@pytest.mark.parametrize("error", ["model 'nope' not found", {"message": "quota exceeded"}])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_error_field_is_provider_error(
    make: Factory, srv: FakeLLMServer, sleeps: Sleeps, protocol: str, error: Any
) -> None:
    srv.set_fault(Fault.error_field(error))
    err = fail(make(protocol))
    # an unknown model is named as such whatever status carries it (issue 15)
    kind = "MODEL_NOT_FOUND" if "not found" in str(error) else "PROVIDER_ERROR"
    assert err.kind == kind and err.tries == 1 and sleeps == []
    text = error if isinstance(error, str) else error["message"]
    assert text in err.message


def test_missing_model_and_closed_provider(make: Factory, srv: FakeLLMServer) -> None:
    provider = make("ollama", model=None)
    err = fail(provider)
    assert err.kind == "CONFIG_ERROR" and "--golden-model" in err.message
    provider.close()
    provider.close()  # idempotent
    assert fail(provider).kind == "PROVIDER_ERROR"
    assert srv.request_count == 0


# --------------------------------------------------------------------------- secrets


def _secret_faults() -> list[tuple[str, Any]]:
    return [
        ("429", Fault.status(429, retry_after=1)),
        ("500", Fault.status(500)),
        ("503", Fault.status(503)),
        ("400-echo", Fault.status(400, body={"error": f"bad credentials {PASSWORD} {API_KEY}"})),
        ("401-echo", Fault.status(401, body=f"Basic {BASIC_TOKEN} rejected".encode())),
        ("hang", Fault.hang(2.0)),
        ("drop", Fault.drop()),
        ("invalid-json", Fault.invalid_json()),
        ("empty", Fault.empty_content()),
        ("error-field", Fault.error_field(f"denied for {PASSWORD} / {API_KEY}")),
        ("bad-utf8", Reply(raw_body=b"\xff\xfe")),
        ("bad-args", Reply(tool_calls=[{"name": "f", "arguments": f"{{{API_KEY}"}])),
        ("refused", None),
    ]


@pytest.mark.parametrize(("label", "fault"), _secret_faults(), ids=[f[0] for f in _secret_faults()])
@pytest.mark.parametrize("in_url", [False, True], ids=["settings", "userinfo"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_secrets_never_leak(
    make: Factory, srv: FakeLLMServer, protocol: str, in_url: bool, label: str, fault: Any
) -> None:
    base = srv.base_url if protocol == "ollama" else srv.openai_base_url
    if label == "refused":
        base = f"http://127.0.0.1:{closed_port()}"
    overrides: dict[str, Any] = {"base_url": base, "read_timeout": 0.3, "retries": 1}
    # Every provider knows every secret, so an echo of any of them must be masked.
    overrides.update(user="u", password=PASSWORD, api_key=API_KEY)
    if in_url:
        overrides.update(base_url=base.replace("http://", f"http://u:{PASSWORD}@"), user=None)
    if isinstance(fault, Fault):
        srv.set_fault(fault)
    elif fault is not None:
        srv.reply_with(fault)
    err = fail(make(protocol, **overrides))
    assert_no_secret(err)
    assert err.__cause__ is None and err.__context__ is None
    if label.endswith("echo") or label == "error-field":
        assert "***" in err.message


def test_provider_repr_has_no_secret(make: Factory) -> None:
    for protocol in PROTOCOLS:
        provider = make(protocol)
        assert all(s not in repr(provider) for s in SECRETS)


# --------------------------------------------------------------------------- concurrency


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_thread_safe_pooled_calls(make: Factory, srv: FakeLLMServer, protocol: str) -> None:
    srv.latency = 0.02
    srv.responder = lambda rec: f"echo {rec.last_user_message}"
    provider = make(protocol)
    # Handlers still sleeping from earlier hang tests count as in flight on the shared server.
    baseline = srv.in_flight

    def call(i: int) -> Answer:
        return provider.complete(request(user=f"q{i}"))

    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(call, range(64)))
    assert [a.text for a in answers] == [f"echo q{i}" for i in range(64)]
    assert srv.max_in_flight - baseline > 1
    assert srv.request_count == 64
