"""providers.base.error_from_exception: a user provider's exception → ERROR kind (issue 31)."""

from __future__ import annotations

import pytest

from goldeval.core.errors import is_retryable
from goldeval.providers.base import error_from_exception, status_code_of


class _Status(Exception):
    def __init__(self, status_code: object) -> None:
        super().__init__("boom")
        self.status_code = status_code


@pytest.mark.parametrize(
    "status,kind",
    [
        (401, "AUTH_FAILED"),
        (403, "AUTH_FAILED"),
        (404, "NOT_FOUND"),
        (400, "BAD_REQUEST"),
        (422, "BAD_REQUEST"),
        (429, "RATE_LIMIT"),
        (408, "PROVIDER_ERROR"),
        (409, "PROVIDER_ERROR"),
        (500, "PROVIDER_ERROR"),
        (503, "PROVIDER_ERROR"),
    ],
)
def test_the_status_decides_the_kind(status: int, kind: str) -> None:
    error = error_from_exception(_Status(status), "app")
    assert error.kind == kind
    assert is_retryable(error.kind) is (kind in ("RATE_LIMIT", "PROVIDER_ERROR"))
    assert f"(HTTP {status})" in error.message and "_Status in app" in error.message


@pytest.mark.parametrize("value", [True, "401", 0, 99, 600, None, 401.0])
def test_values_that_are_no_http_status_are_ignored(value: object) -> None:
    assert status_code_of(_Status(value)) is None
    assert error_from_exception(_Status(value), "app").kind == "PROVIDER_ERROR"


def test_a_cycle_of_causes_ends() -> None:
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a
    assert status_code_of(a) is None


def test_urls_in_the_text_lose_their_credentials() -> None:
    exc = RuntimeError("failed for url 'https://bob:hunter22@api.example/v1?api_key=sk-123'")
    message = error_from_exception(exc, "app").message
    assert "hunter22" not in message and "sk-123" not in message
    assert "https://api.example/v1?api_key=***" in message
