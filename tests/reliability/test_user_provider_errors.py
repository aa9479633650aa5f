"""Issue 31: an exception from the team's provider function is classified by what it carries.

The official SDKs' errors carry the HTTP status (openai/anthropic ``status_code``, httpx and
requests ``response.status_code``, aiohttp ``status``): 401/403 are AUTH_FAILED, 404
NOT_FOUND, 400/422 BAD_REQUEST, errors no retry fixes (exit 4); 429 is RATE_LIMIT and 408,
5xx or no status stay retryable (exit 75). Before, every exception was "infrastructure,
retry" (75): a CI job retrying on 75 looped on a wrong API key. Black box with pytester; the
httpx case calls the real local server on 127.0.0.1.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from goldeval.testing.llm_server import FakeLLMServer, Fault
from tests.helpers import SERIAL_ONLY, RunFiles

CASES = 10
RUN = ["--golden=generation-v1", "-p", "no:cacheprovider"]

#: Exception classes shaped like the SDKs' (no SDK is installed here): an openai-like
#: APIStatusError with ``status_code`` and ``.response``, a requests-like HTTPError whose
#: ``.response.status_code`` may be all it has, an aiohttp-like ``status``.
SDK_SHAPED = '''
import os
import pytest

class _Response:
    def __init__(self, status_code):
        self.status_code = status_code
        self.headers = {}

class APIStatusError(Exception):  # openai / anthropic
    def __init__(self, message, status_code):
        super().__init__(message)
        self.status_code = status_code
        self.response = _Response(status_code)

class AuthenticationError(APIStatusError): pass
class NotFoundError(APIStatusError): pass
class UnprocessableEntityError(APIStatusError): pass
class RateLimitError(APIStatusError): pass
class InternalServerError(APIStatusError): pass

class HTTPError(OSError):  # requests
    def __init__(self, message, response=None):
        super().__init__(message)
        self.response = response

class ClientResponseError(Exception):  # aiohttp
    def __init__(self, message, status):
        super().__init__(message)
        self.status = status

class AppError(Exception):
    """The team's own wrapper around an SDK error (raise ... from exc)."""

def _raise(case):
    what = os.environ["RAISE"]
    if what == "openai-401":
        raise AuthenticationError("Error code: 401 - Incorrect API key provided", 401)
    if what == "openai-404":
        raise NotFoundError("Error code: 404 - The model does not exist", 404)
    if what == "openai-422":
        raise UnprocessableEntityError("Error code: 422 - bad field", 422)
    if what == "requests-403":
        raise HTTPError("403 Client Error: Forbidden", response=_Response(403))
    if what == "aiohttp-400":
        raise ClientResponseError("400, message='Bad Request'", status=400)
    if what == "wrapped-401":
        try:
            raise AuthenticationError("Error code: 401", 401)
        except AuthenticationError as exc:
            raise AppError("the bot could not ask the model") from exc
    if what == "openai-503":
        raise InternalServerError("Error code: 503 - overloaded", 503)
    if what == "openai-429":
        raise RateLimitError("Error code: 429 - slow down", 429)
    if what == "requests-no-response":
        raise HTTPError("connection reset", response=None)
    raise RuntimeError("unknown RAISE " + what)

@pytest.fixture(scope="session")
def golden_provider():
    def app(case):
        return _raise(case)
    return app
'''


@pytest.mark.parametrize(
    "what,kind,code",
    [
        ("openai-401", "AUTH_FAILED", 4),
        ("openai-404", "NOT_FOUND", 4),
        ("openai-422", "BAD_REQUEST", 4),
        ("requests-403", "AUTH_FAILED", 4),
        ("aiohttp-400", "BAD_REQUEST", 4),
        ("wrapped-401", "AUTH_FAILED", 4),
        ("openai-503", "PROVIDER_ERROR", 75),
        ("openai-429", "RATE_LIMIT", 75),
        ("requests-no-response", "PROVIDER_ERROR", 75),
    ],
)
def test_sdk_shaped_errors_are_classified_by_their_status(
    pytester: pytest.Pytester,
    golden_project: Path,
    run_files: RunFiles,
    monkeypatch: pytest.MonkeyPatch,
    what: str,
    kind: str,
    code: int,
) -> None:
    pytester.makeconftest(SDK_SHAPED)
    monkeypatch.setenv("RAISE", what)
    result = pytester.runpytest(*RUN)
    out = result.stdout.str()
    assert result.ret == code, out
    run = run_files.latest()
    kinds = {a.get("errorKind") for c in run["cases"] for a in c["attempts"]}
    assert kinds == {kind}
    assert run["attemptsError"] == CASES
    assert run["exitDecision"]["code"] == code
    if code == 4:
        assert "retrying will not help" in out
    assert "Traceback" not in out


HTTPX_APP = """
import os
import httpx
import pytest

@pytest.fixture(scope="session")
def golden_provider():
    def app(case):
        response = httpx.post(
            os.environ["APP_URL"] + "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": case.prompt}]},
            timeout=5,
        )
        response.raise_for_status()
        return response.json()["choices"][0]["message"]["content"]
    return app
"""


@pytest.mark.parametrize(
    "status,kind,code",
    [
        (401, "AUTH_FAILED", 4),
        (403, "AUTH_FAILED", 4),
        (404, "NOT_FOUND", 4),
        (503, "PROVIDER_ERROR", 75),
    ],
)
@SERIAL_ONLY
def test_a_real_httpx_status_error_from_the_local_server(
    pytester: pytest.Pytester,
    golden_project: Path,
    run_files: RunFiles,
    monkeypatch: pytest.MonkeyPatch,
    plugin_args: list[str],
    status: int,
    kind: str,
    code: int,
) -> None:
    pytester.makeconftest(HTTPX_APP)
    with FakeLLMServer() as srv:
        # A password in the URL must not reach the record: httpx's message quotes the URL.
        url = srv.base_url.replace("http://", "http://app:s3cret-pass@")
        monkeypatch.setenv("APP_URL", url)
        srv.set_fault(Fault.status(status))
        result = pytester.runpytest(*RUN, *plugin_args)
        assert srv.request_count >= CASES
    out = result.stdout.str()
    assert result.ret == code, out
    run = run_files.latest()
    attempts = [a for c in run["cases"] for a in c["attempts"]]
    assert {a["errorKind"] for a in attempts} == {kind}
    assert all(f"HTTP {status}" in a["errorMessage"] for a in attempts)
    assert all("HTTPStatusError" in a["errorMessage"] for a in attempts)
    text = (run_files.latest_dir() / "run.json").read_text(encoding="utf-8")
    assert "s3cret-pass" not in text and "s3cret-pass" not in out
