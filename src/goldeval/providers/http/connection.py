"""The connection to one model server: the base URL split into what is sent and what may be
shown (credentials taken out of it), one pooled ``httpx.Client`` per provider, and the socket
a deadline cuts."""

from __future__ import annotations

import functools
import logging
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import httpx

from goldeval.core.errors import ConfigError
from goldeval.core.limits import LimitExceeded
from goldeval.core.settings import (
    ProviderSettings,
    redact_url,
    secret_forms,
    strip_userinfo,
    url_secrets,
)


@dataclass(frozen=True)
class BaseURL:
    """A provider's base URL, taken apart once."""

    #: Where endpoints are built: no userinfo, no query, no trailing slash.
    root: str
    #: The base URL's query (``?api-version=...``, ``?key=...``), sent with every call.
    query: str
    #: The base URL as it may be shown: no userinfo, credential parameters masked.
    shown: str
    user: str | None
    password: str | None
    #: The one masking list (goldeval.core.settings.secret_forms) for chat, judge and
    #: embeddings: the password, the key, their percent-encoded forms, the Basic token, and
    #: credential values of the base URL's query.
    secrets: tuple[str, ...]


def base_url(settings: ProviderSettings, default: str, option: str) -> BaseURL:
    """``settings.base_url`` (else ``default``) taken apart; ``option`` names the setting in
    the error for a URL that cannot be parsed."""
    base = (settings.base_url or default).strip()
    if base and "://" not in base:
        base = "http://" + base
    user = settings.user
    password = settings.password
    try:
        parts = urlsplit(base)
        url_user, url_password = parts.username, parts.password
    except ValueError:
        raise ConfigError(f"invalid base URL {redact_url(base)!r}", field=option) from None
    if url_user is not None:  # userinfo in the URL wins, as in the reference
        user = unquote(url_user)
        if url_password is not None:
            password = unquote(url_password)
    plain = strip_userinfo(base)
    return BaseURL(
        root=plain.split("#", 1)[0].split("?", 1)[0].rstrip("/"),
        query=parts.query,
        shown=redact_url(plain).rstrip("/"),
        user=user,
        password=password,
        secrets=secret_forms(user, password, settings.api_key, url_secrets(base)),
    )


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """One verifying TLS context per process (building one costs ~20 ms; sharing is safe)."""
    return httpx.create_ssl_context()


class _RedactedURLs(logging.Filter):
    """httpx logs every request's URL at INFO (``HTTP Request: POST http://...?api_key=...``):
    with ``log_level=INFO`` or ``log_cli`` a base URL's credential parameter or userinfo went
    to the terminal and log files as it was. The URL is shown as ``redact_url`` shows it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(a, httpx.URL) for a in record.args):
            record.args = tuple(
                redact_url(str(a)) if isinstance(a, httpx.URL) else a for a in record.args
            )
        return True


_URL_FILTER = _RedactedURLs()


def pooled_client(settings: ProviderSettings, auth: httpx.Auth | None) -> httpx.Client:
    """One JSON client with the settings' timeouts, no redirects, TLS verified."""
    for name in ("httpx", "httpcore"):
        logger = logging.getLogger(name)
        if _URL_FILTER not in logger.filters:
            logger.addFilter(_URL_FILTER)
    return httpx.Client(
        timeout=httpx.Timeout(
            connect=settings.connect_timeout,
            read=settings.read_timeout,
            write=settings.read_timeout,
            # Waiting for a free pooled connection is bounded like one call.
            pool=settings.connect_timeout + settings.read_timeout,
        ),
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=64),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
        auth=auth,
        follow_redirects=False,
        verify=_ssl_context(),
    )


def declared_length(response: httpx.Response) -> int | None:
    """The body size a response declares (Content-Length), when it declares a valid one."""
    raw = response.headers.get("content-length")
    if raw is None:
        return None
    try:
        return int(raw.split(",")[0].strip())
    except ValueError:
        return None


def content_codings(response: httpx.Response) -> list[str]:
    """The compressions a response declares (Content-Encoding, every header of it), in order,
    ``identity`` left out."""
    found = []
    for header in response.headers.get_list("content-encoding"):
        found += [c.strip().lower() for c in header.split(",") if c.strip()]
    return [c for c in found if c != "identity"]


def body_refusal(response: httpx.Response, cap: int, what: str) -> LimitExceeded | None:
    """Why ``response``'s body is not read at all (``response_bytes``), or None: it declares
    more than ``cap`` bytes, or more than one compression. httpx inflates every layer of a
    piece before the bound sees it: 3.5 KB of "gzip, gzip" became 2 GiB in memory (one layer
    is read piece by piece, bounded)."""
    declared = declared_length(response)
    if declared is not None and declared > cap:
        return LimitExceeded(
            "response_bytes",
            f"{what} declares {declared} bytes (Content-Length), over the limit of {cap} bytes",
        )
    codings = content_codings(response)
    if len(codings) > 1:
        return LimitExceeded(
            "response_bytes",
            f"{what} is compressed {len(codings)} times over ({', '.join(codings)}): a body "
            "that cannot be bounded while it is decompressed is refused",
        )
    return None


def cut(response: httpx.Response) -> None:
    """Shut down ``response``'s socket: a read blocked on it returns at once (the watchdog's
    action when a call's deadline passes between two pieces of its body)."""
    stream = response.extensions.get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    if isinstance(sock, socket.socket):
        # socket.socket's own shutdown, not ssl.SSLSocket's (that one also drops the TLS
        # object under the reading thread): the read sees end of file and fails.
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
