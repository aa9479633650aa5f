"""Secrets in URLs, echoes and logs (issue 16): one masking function, one HTTP client.

Against the real local server: the embeddings client (similarity grader) masks exactly as the
chat providers do (before cutting an excerpt, the Basic token too) and retries the same way; a
credential in a base URL's query is sent but never shown; a malformed base URL is a usage
error (exit 4) that names the URL masked; ``--debug`` logs carry no secret given through the
environment.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from goldeval.core.errors import ConfigError, ProviderError
from goldeval.core.settings import (
    check_base_url,
    mask_secrets,
    provider_from_env,
    redact_url,
    secret_forms,
)
from goldeval.dataset.case import GoldenCase
from goldeval.providers.base import ProviderRequest
from goldeval.providers.embeddings import EmbeddingClient, embedding_settings
from goldeval.providers.http import make_http_provider
from goldeval.testing.llm_server import FakeLLMServer, Fault, Reply, fixture_responder
from tests.helpers import SERIAL_ONLY

KEY = "sk-embed-PLANTED-9f8e7d6c5b4a39281706"
USER, PASSWORD = "emb-user", "emb-PLANTED-pw-77aa"
QKEY = "q-PLANTED-key-5566778899"


def _pieces(secret: str, size: int = 12) -> list[str]:
    return [secret[i : i + size] for i in range(0, len(secret) - size + 1)]


def _leaks(text: str, *secrets: str) -> list[str]:
    return [p for s in secrets for p in _pieces(s) if p in text]


# --------------------------------------------------------------------------- the one masker


def test_secret_forms_cover_raw_percent_encoded_and_basic_token() -> None:
    forms = secret_forms("u", "p@ss:word/1", "sk-abc-123", ["qv-999"])
    token = base64.b64encode(b"u:p@ss:word/1").decode()
    for form in ("p@ss:word/1", "p%40ss%3Aword%2F1", token, "sk-abc-123", "qv-999"):
        assert form in forms
    assert list(forms) == sorted(forms, key=len, reverse=True)
    text = f"echo {token} and p%40ss%3Aword%2F1 and sk-abc-123"
    assert mask_secrets(text, forms) == "echo *** and *** and ***"


@pytest.mark.parametrize(
    "url,shown",
    [
        ("http://u:pw@h:1/x?key=SEC&a=1", "http://h:1/x?key=***&a=1"),
        (
            "https://h/v1?api-version=2024-06-01&api_key=SEC",
            "https://h/v1?api-version=2024-06-01&api_key=***",
        ),
        ("http://h/?access_token=SEC#sig=SEC", "http://h/?access_token=***#sig=***"),
        (
            "http://h/?Password=SEC&token=SEC&X-Api-Key=SEC",
            "http://h/?Password=***&token=***&X-Api-Key=***",
        ),
        ("http://u:pw@127.0.0.1:99999", "http://127.0.0.1:99999"),  # bad port: no crash
        ("http://u:pw@[::1", "http://[::1"),
    ],
)
def test_redact_url_masks_userinfo_and_credential_parameters(url: str, shown: str) -> None:
    assert redact_url(url) == shown


# --------------------------------------------------------------------------- embeddings


def _straddling_echo(pad: int) -> dict:
    return {"error": {"message": "x" * pad + f" you sent Bearer {KEY} which is invalid"}}


@pytest.mark.parametrize("pad", [150, 165, 170, 175, 185, 190, 195])
def test_embedding_error_masks_before_cutting(pad: int) -> None:
    with FakeLLMServer() as srv:
        srv.set_fault(Fault.status(500, body=_straddling_echo(pad)))
        client = EmbeddingClient("openai", srv.openai_base_url, "m", api_key=KEY, retries=0)
        with pytest.raises(ProviderError) as info:
            client.embed(["a", "b"])
        client.close()
    err = info.value
    text = f"{err} {err!r} {err.message}"
    assert err.kind == "EMBEDDING_ERROR"
    assert _leaks(text, KEY) == [], text
    assert err.__cause__ is None and err.__context__ is None


def test_embedding_error_masks_the_basic_token() -> None:
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    with FakeLLMServer() as srv:
        srv.set_fault(Fault.status(401, body={"error": f"rejected Basic {token}"}))
        url = srv.base_url.replace("http://", f"http://{USER}:{PASSWORD}@")
        with EmbeddingClient("ollama", url, "m", retries=0) as client:
            with pytest.raises(ProviderError) as info:
                client.embed(["a"])
        sent = srv.requests[-1].headers["authorization"]
    assert sent == f"Basic {token}"  # the server really saw (and echoed) the token
    message = str(info.value)
    assert token not in message and PASSWORD not in message and "***" in message
    assert USER + ":" not in message and "AUTH_FAILED" in message


def test_embeddings_are_retried_like_chat_calls() -> None:
    with FakeLLMServer() as srv:
        srv.script([Fault.status(503), Fault.status(429, retry_after=0)])
        settings = embedding_settings(
            {"provider": "ollama", "base_url": srv.base_url, "model": "m", "retries": 2}, {}
        )
        assert settings is not None and settings.retries == 2
        with settings.client() as client:
            vectors = client.embed(["a b", "a b"])
        assert len(vectors) == 2
        assert sum(1 for r in srv.requests if r.path == "/api/embed") == 3
        srv.set_fault(Fault.status(503))
        with EmbeddingClient("ollama", srv.base_url, "m", retries=1) as client:
            with pytest.raises(ProviderError) as info:
                client.embed(["a"])
    assert info.value.tries == 2 and "after 2 tries" in info.value.message
    assert info.value.message.count("tries") == 1


def test_embedding_settings_repr_masks_the_url() -> None:
    settings = embedding_settings(
        {"provider": "ollama", "base_url": f"http://{USER}:{PASSWORD}@h:1/?key={QKEY}"}, {}
    )
    assert settings is not None
    assert PASSWORD not in repr(settings) and QKEY not in repr(settings)


# --------------------------------------------------------------------------- query credentials


def test_base_url_query_credential_is_sent_but_never_shown() -> None:
    with FakeLLMServer() as srv:
        srv.set_fault(Fault.status(500, body={"error": f"bad request to /api/chat?key={QKEY}"}))
        settings = provider_from_env("ollama", "m", f"{srv.base_url}/?key={QKEY}&a=1")
        settings.retries = 0
        provider = make_http_provider(settings)
        with pytest.raises(ProviderError) as info:
            provider.complete(ProviderRequest(GoldenCase("c", "p", {}), 1, "", "p", "m", []))
        provider.close()
        (req,) = srv.requests
    assert f"key={QKEY}" in req.query  # the call itself carries the credential
    shown = f"{info.value} {provider!r} {settings!r} {settings.public()} {provider.base_url}"
    assert QKEY not in shown and "key=***" in shown


@pytest.fixture
def project(pytester: pytest.Pytester) -> Path:
    import shutil

    from tests.helpers import ROOT

    for name in ("golden", "pack", "baselines"):
        shutil.copytree(ROOT / name, pytester.path / name)
    pytester.makeini("[pytest]\n")
    return pytester.path


def _scan_tree(root: Path, *secrets: str) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes().decode("utf-8", "replace")
            found += [f"{path.name}: {p}" for p in _leaks(data, *secrets)]
    return found


@SERIAL_ONLY
def test_query_credential_never_reaches_artifacts(
    pytester: pytest.Pytester, project: Path, plugin_args: list[str]
) -> None:
    with FakeLLMServer() as srv:
        inner = fixture_responder(project / "golden" / "generation")

        def responder(request):  # type: ignore[no-untyped-def]
            if "401" in (request.last_user_message or ""):
                return Reply(
                    status=500, error=f"upstream refused ?key={QKEY} (query {request.query})"
                )
            return inner(request)

        srv.responder = responder
        result = pytester.runpytest(
            "--golden=generation-v1",
            "--golden-mode=live",
            "--golden-model=fake-llm:latest",
            f"--golden-base-url={srv.base_url}/?key={QKEY}",
            "--golden-retries=0",
            "--golden-no-gate",
            "--golden-artifacts=always",
            "--junitxml=junit.xml",
            "-p",
            "no:cacheprovider",
            *plugin_args,
        )
        queries = [r.query for r in srv.requests]
    assert result.ret == 75, result.stdout.str()
    assert queries and all(f"key={QKEY}" in q for q in queries)
    outputs = result.stdout.str() + result.stderr.str()
    assert _leaks(outputs, QKEY) == []
    assert _scan_tree(project / ".goldeval", QKEY) == []
    assert _leaks((project / "junit.xml").read_text(encoding="utf-8"), QKEY) == []


# --------------------------------------------------------------------------- malformed URLs

SECRET_PW = "pw-PLANTED-url-4242"


@pytest.mark.parametrize(
    "url,fragment",
    [
        (f"http://u:{SECRET_PW}@127.0.0.1:99999", "port"),
        (f"http://u:{SECRET_PW}@127.0.0.1:port", "port"),
        ("127.0.0.1:11434", "no scheme"),
        (f"u:{SECRET_PW}@127.0.0.1:11434", "no scheme"),
        (f"ftp://u:{SECRET_PW}@127.0.0.1/", "unsupported scheme"),
        (f"http://u:{SECRET_PW}@[::1", "invalid base URL"),
        ("http://:8080/", "no host"),
        # a password holding a raw "/", "?" or "#" ends the URL's host part early: it would
        # be read as a path, sent, recorded and never masked
        (f"http://u:12/{SECRET_PW}@127.0.0.1:11434", "must be percent-encoded"),
        (f"http://u:{SECRET_PW}#x@127.0.0.1:11434", "must be percent-encoded"),
        (f"http://u:{SECRET_PW}?x@127.0.0.1:11434", "must be percent-encoded"),
    ],
)
@pytest.mark.parametrize("provider", ["ollama", "openai"])
def test_malformed_base_url_is_a_usage_error_with_the_url_masked(
    pytester: pytest.Pytester, project: Path, url: str, fragment: str, provider: str
) -> None:
    result = pytester.runpytest(
        "--golden=generation-v1",
        "--golden-mode=live",
        "--golden-model=m",
        f"--golden-provider={provider}",
        f"--golden-base-url={url}",
        "-p",
        "no:cacheprovider",
    )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, out
    assert "INTERNALERROR" not in out and "Traceback" not in out
    assert fragment.lower() in out.lower() and "--golden-base-url" in out
    assert SECRET_PW not in out


def test_check_base_url_unit() -> None:
    assert check_base_url("https://h:443/v1?api-version=1", "f").startswith("https://")
    for bad in ("http://h:0", "http://h:65536", "file:///etc/passwd", "h:1", "http://"):
        with pytest.raises(ConfigError):
            check_base_url(bad, "--golden-base-url")


def test_ollama_host_without_scheme_keeps_working(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:11434")
    assert provider_from_env("ollama", "m", None).base_url == "http://127.0.0.1:11434"
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:99999")
    with pytest.raises(ConfigError, match="OLLAMA_HOST"):
        provider_from_env("ollama", "m", None)


# --------------------------------------------------------------------------- --debug


def test_debug_log_has_no_secret_given_through_the_environment(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest --debug writes the raw command line to pytestdebug.log: credentials belong in
    the environment (docs/configuration.md), where our hook arguments never show them."""
    with FakeLLMServer() as srv:
        srv.responder = fixture_responder(project / "golden" / "generation")
        monkeypatch.setenv(
            "OLLAMA_HOST",
            srv.base_url.replace("http://", f"http://{USER}:{PASSWORD}@") + f"/?key={QKEY}",
        )
        result = pytester.runpytest(
            "--golden=generation-v1",
            "--golden-mode=live",
            "--golden-model=fake-llm:latest",
            "--golden-no-gate",
            "--debug",
            "-p",
            "no:cacheprovider",
            "-k",
            "api-login-wrong-password-401",
        )
    assert result.ret == 0, result.stdout.str()
    log = (project / "pytestdebug.log").read_text(encoding="utf-8", errors="replace")
    assert "pytest_goldeval_make_provider" in log  # the hook call (and its settings) is traced
    assert _leaks(log, PASSWORD, QKEY) == []
    assert json.dumps(PASSWORD) not in log
