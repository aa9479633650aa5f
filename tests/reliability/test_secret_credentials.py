"""Credentials the run holds in forms an echo or a message may carry (found by a probe).

- A key of two lines (a key file holding an old and a new key) or with a non-ASCII
  character: httpx refused the header and quoted it escaped (``b'Bearer sk-...\\nsk-...'``),
  which the masker, holding the raw value, never matched: the key reached the terminal,
  run.json, the reports and the store. Such a credential is refused before the run now.
- Basic auth with an empty password (a gateway key given as the user name) and a proxy
  variable's ``user:password@``: their ``Basic`` tokens were never masked.
- The terminal's retry hint had its own copy of the URL redaction: a password holding a
  space or a quote, which no URL pattern spans, was printed.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from goldeval.core.errors import ConfigError
from goldeval.core.secrets import SecretMasker, run_secrets
from goldeval.core.settings import provider_from_env, secret_forms, url_secrets
from goldeval.testing.llm_server import FakeLLMServer, Reply
from tests.helpers import make_bot_dataset
from tests.reliability.test_secrets import scan

USAGE = 4
TWO_LINES = "sk-PlantedKey123456\nsk-SecondLine98765"
GATE = "    thresholds:\n      overallPassRate: 0.5\n"


def _project(pytester: pytest.Pytester) -> Path:
    make_bot_dataset(pytester.path, GATE)
    return pytester.path


@pytest.mark.parametrize(
    ("variable", "value", "options"),
    [
        ("OPENAI_API_KEY", TWO_LINES, []),
        ("OPENAI_API_KEY", "sk-Pl\u00e4ntedKey123456", []),
        ("OPENAI_API_KEY", "\u201csk-PlantedKey123456\u201d", []),
        ("GOLDEVAL_JUDGE_API_KEY", "jk-JudgeKey123456\njk-OtherLine98765", ["--golden-judge"]),
    ],
)
def test_a_credential_no_header_can_carry_is_refused_before_the_run(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    options: list[str],
) -> None:
    root = _project(pytester)
    with FakeLLMServer() as srv:
        monkeypatch.setenv(variable, value)
        if variable != "OPENAI_API_KEY":
            monkeypatch.setenv("OPENAI_API_KEY", "sk-fine-key-123456")
        result = pytester.runpytest(
            "--golden=bot-v1",
            "--golden-mode=live",
            "--golden-provider=openai",
            "--golden-model=m1",
            f"--golden-base-url={srv.openai_base_url}",
            "--golden-retries=0",
            *options,
        )
        calls = len(srv.requests)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == USAGE, out[-2000:]
    assert calls == 0
    assert variable in out and "HTTP header cannot carry it" in out
    assert "Traceback" not in out and "INTERNALERROR" not in out
    pieces = {p for p in value.replace("\u201c", "\n").replace("\u201d", "\n").split("\n") if p}
    assert scan(root, [out], {f"piece {n}": p for n, p in enumerate(pieces)}) == []


def test_the_refusal_names_the_variable_never_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", TWO_LINES)
    with pytest.raises(ConfigError) as refused:
        provider_from_env("openai", "m1", "http://127.0.0.1:9")
    text = str(refused.value)
    assert "OPENAI_API_KEY: holds a line break (character 20 of 38)" in text
    assert "sk-" not in text


def test_an_escaped_echo_of_a_two_line_value_is_masked_too() -> None:
    masker = SecretMasker(secret_forms(None, None, TWO_LINES))
    echo = f"Illegal header value {('Bearer ' + TWO_LINES).encode()!r}"
    assert "sk-" not in masker.mask(echo)
    assert masker.mask("old key sk-SecondLine98765 only") == "old key *** only"


def _basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def test_a_user_with_an_empty_password_is_the_credential() -> None:
    user = "userAsKey-Planted-123"
    for forms in (secret_forms(user, "", None), tuple(url_secrets(f"http://{user}:@h:1/"))):
        masker = SecretMasker(forms)
        assert masker.mask(f"Basic {_basic(user, '')}") == "Basic ***"
        assert masker.mask(f"hello {user}") == "hello ***"
    masker = SecretMasker(url_secrets(f"http://{user}@h:1/"))  # no colon: the same header
    assert masker.mask(f"Basic {_basic(user, '')}") == "Basic ***"


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "https_proxy", "ALL_PROXY"])
def test_a_proxy_variable_credential_and_its_header_are_masked(variable: str) -> None:
    url = "http://proxyuser:proxy-Secret-9911@127.0.0.1:3128"
    masker = SecretMasker(run_secrets([], {variable: url}))
    echo = f'"Proxy-Authorization": "Basic {_basic("proxyuser", "proxy-Secret-9911")}"; {url}'
    shown = masker.mask(echo)
    assert "proxy-Secret-9911" not in shown and _basic("proxyuser", "proxy-Secret-9911") not in (
        shown
    )


def _echo_authorization(request: Any) -> Reply:
    return Reply(content="Hello there. You sent: " + request.headers.get("authorization", ""))


def test_record_mode_never_writes_the_basic_token_of_a_user_used_as_key(
    pytester: pytest.Pytester,
) -> None:
    root = _project(pytester)
    user = "userAsKey-Planted-123"
    with FakeLLMServer() as srv:
        srv.responder = _echo_authorization
        result = pytester.runpytest(
            "--golden=bot-v1",
            "--golden-mode=record",
            "--golden-overwrite-fixtures",
            "--golden-model=m1",
            "--golden-base-url=" + srv.base_url.replace("http://", f"http://{user}:@"),
        )
        sent = {r.headers.get("authorization", "") for r in srv.requests}
    out = result.stdout.str() + result.stderr.str()
    assert f"Basic {_basic(user, '')}" in sent  # the credential really was sent and echoed
    assert scan(root, [out], {"user": user, "token": _basic(user, "")}) == []


def test_the_retry_hint_masks_a_password_no_url_pattern_spans(pytester: pytest.Pytester) -> None:
    root = _project(pytester)
    for password in ("Sec Space-555zz", "Sec'Quote-555zz", 'Sec"Quote-555zz', "Sec<Quote-555zz"):
        result = pytester.runpytest(
            "--golden=bot-v1",
            "--golden-mode=live",
            "--golden-provider=openai",
            "--golden-model=m1",
            f"--golden-base-url=http://u:{password}@127.0.0.1:1",
            "--golden-retries=0",
            "--golden-run-key=retry-me",
        )
        out = result.stdout.str() + result.stderr.str()
        assert result.ret == 75, out[-2000:]
        assert "goldeval: retry" in out
        assert scan(root, [out], {"password": password}) == [], password


ECHOING_GATEWAY = """
import os
import pytest
from goldeval import Answer, Provider

KEY_VARIABLE = "GATEWAY_API_KEY"


class EchoingGateway(Provider):
    name = "gateway"

    def complete(self, request):
        return Answer(text="Hello there. ORD-1 (sent with key " + os.environ[KEY_VARIABLE] + ")")


@pytest.hookimpl
def pytest_goldeval_make_provider(config, name, settings):
    return EchoingGateway() if name == "gateway" else None
"""

DECLARED = """

@pytest.hookimpl
def pytest_goldeval_secrets(config):
    return [os.environ.get(KEY_VARIABLE)]
"""


def test_a_provider_of_the_project_declares_its_key(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe: the documented gateway provider's key, echoed by the model, was written into
    the recorded fixture: goldeval cannot know a key only the project's code reads. Declared
    through ``pytest_goldeval_secrets``, it is masked like the run's own."""
    root = _project(pytester)
    key = "gw-Planted-Key-31415926"
    monkeypatch.setenv("GATEWAY_API_KEY", key)
    pytester.makeconftest(ECHOING_GATEWAY + DECLARED)
    result = pytester.runpytest(
        "-p",
        "no:cacheprovider",
        "--golden=bot-v1",
        "--golden-mode=record",
        "--golden-overwrite-fixtures",
        "--golden-provider=gateway",
        "--golden-model=m1",
    )
    out = result.stdout.str() + result.stderr.str()
    assert "SECRET_IN_ANSWER" in out  # refused to record the echo, not written
    assert scan(root, [out], {"gateway key": key}) == []


def test_a_database_url_user_is_a_role_name_not_a_credential() -> None:
    """Only HTTP Basic sends the user as the credential: a store URL's user ("goldeval", the
    test server's role) masked as a secret turned the pages' ``goldeval-matrix`` class into
    ``***-matrix``."""
    assert "goldeval" not in url_secrets("postgresql://goldeval@127.0.0.1:5432/runs")
    assert "goldeval" in url_secrets("http://goldeval@127.0.0.1:5432/")
    assert "pw-Planted-77" in url_secrets("postgresql://goldeval:pw-Planted-77@127.0.0.1/runs")


def test_a_basic_password_of_any_character_is_sent_not_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A re-probe: Basic credentials are base64-encoded into their header, so "pässword99" is
    sendable; it was refused (and a URL's password blamed on OLLAMA_PASSWORD)."""
    monkeypatch.setenv("OLLAMA_PASSWORD", "p\u00e4ssword99")
    monkeypatch.setenv("OLLAMA_USER", "u")
    settings = provider_from_env("ollama", "m", "http://u:p%C3%A9ssword99@127.0.0.1:9/")
    assert settings.password == "p\u00e9ssword99"


@pytest.mark.parametrize(
    ("name", "value", "secret"),
    [
        ("Https_Proxy", "http://gatewaykey12345@127.0.0.1:9", "gatewaykey12345"),
        ("All_Proxy", "http://u:pw-secret-9876@127.0.0.1:9", "pw-secret-9876"),
        ("https_proxy", "gatewaykey12345@127.0.0.1:9", "gatewaykey12345"),  # no scheme: http
    ],
)
def test_proxy_variables_of_any_case_and_without_a_scheme_are_masked(
    name: str, value: str, secret: str
) -> None:
    masker = SecretMasker(run_secrets([], {name: value}))
    assert masker.mask(f"echo {secret}") == "echo ***"


@pytest.mark.parametrize(
    ("returned", "code"),
    [('os.environ["GATEWAY_API_KEY"]', None), ("5", 4)],
    ids=["bare-string", "not-a-list"],
)
def test_the_secrets_hook_return_value(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, returned: str, code: int | None
) -> None:
    """A re-probe: a bare string was masked character by character (so not at all), an int
    failed every item with a traceback."""
    root = _project(pytester)
    monkeypatch.setenv("GATEWAY_API_KEY", "gw-Planted-Key-31415926")
    pytester.makeconftest(
        ECHOING_GATEWAY.replace(
            'return EchoingGateway() if name == "gateway" else None', "return None"
        )
        + f"\n\ndef pytest_goldeval_secrets(config):\n    return {returned}\n"
        + "\n\nimport pytest as _p\n@_p.fixture(scope='session')\ndef golden_provider():\n"
        + "    return lambda case: 'Hello there. ORD-1 key ' + os.environ[KEY_VARIABLE]\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=bot-v1")
    out = result.stdout.str() + result.stderr.str()
    if code is not None:
        assert result.ret == code and "return a list of the secret strings" in out, out[-2000:]
        return
    assert scan(root, [out], {"gateway key": "gw-Planted-Key-31415926"}) == []
