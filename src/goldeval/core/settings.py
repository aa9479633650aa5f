"""Resolved run settings: command-line options, ini values and environment fallbacks."""

from __future__ import annotations

import base64
import html
import json
import math
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit

from goldeval.core.echoes import echo_masker
from goldeval.core.errors import ConfigError
from goldeval.core.limits import Deadline, default
from goldeval.core.models import Mode


@dataclass
class ProviderSettings:
    name: str = "ollama"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    connect_timeout: float = 5.0
    read_timeout: float = 180.0
    retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 30.0
    temperature: float = 0.0
    price_per_1k_input: float | None = None
    price_per_1k_output: float | None = None
    #: Calls in flight at most (``--golden-concurrency``); None: no limiter (judge, embeddings,
    #: direct use). See goldeval.providers.http.limiter.
    max_concurrency: int | None = None
    #: Adapt the number of calls in flight below ``max_concurrency`` (latency, 429/503/timeouts).
    adaptive: bool = True
    #: Requests / tokens per minute the provider allows (token buckets), None: no limit.
    rpm: float | None = None
    tpm: float | None = None
    #: Prices per model, (input, output) per 1k tokens; they win over price_per_1k_*.
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: Ask for streamed answers (Ollama NDJSON, OpenAI SSE) and record time to first token.
    stream: bool = False
    #: The whole of one try (connect, send, wait, whole body or stream), ``--golden-call-timeout``;
    #: None: connect_timeout + read_timeout (limit ``call_seconds``, goldeval.core.limits).
    call_timeout: float | None = None
    #: Largest response body read (limit ``response_bytes``, ``--golden-max-response-bytes``).
    max_response_bytes: int = int(default("response_bytes"))
    #: The run deadline (``--golden-deadline``): no call outlives it. None: no run deadline.
    run_deadline: Deadline | None = field(default=None, repr=False, compare=False)

    def whole_call_seconds(self) -> float:
        """The bound on one try, whole (see :attr:`call_timeout`)."""
        if self.call_timeout is not None:
            return self.call_timeout
        return self.connect_timeout + self.read_timeout

    def __repr__(self) -> str:
        # Not the dataclass repr: base_url may carry ``?key=...`` (kept for the calls), and
        # reprs reach logs (``pytest --debug`` traces hook arguments).
        shown = redact_url(self.base_url) if self.base_url else None
        return (
            f"ProviderSettings(name={self.name!r}, model={self.model!r}, base_url={shown!r}, "
            f"retries={self.retries!r}, read_timeout={self.read_timeout!r})"
        )

    def public(self) -> dict[str, Any]:
        """What may be written to artifacts: never credentials."""
        return {
            "name": self.name,
            "model": self.model,
            "baseUrl": redact_url(self.base_url) if self.base_url else None,
            "connectTimeout": self.connect_timeout,
            "readTimeout": self.read_timeout,
            "retries": self.retries,
            "temperature": self.temperature,
        }


#: What every masked secret is replaced with.
MASK = "***"

#: The environment variable naming the file through which the service's worker asks a run's
#: pytest process to stop (pytest_plugin/stopping.py reads it, server/stopper.py writes it).
STOP_FILE_ENV = "GOLDEVAL_STOP_FILE"
#: Query/fragment parameter names (lower-cased, ``-``/``_``/``.`` removed) that hold
#: credentials: ``?key=``, ``?api-key=``, ``?access_token=``, ``?sig=``, ``?password=``...
_CREDENTIAL_WORDS = (
    "key",
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "auth",
    "signature",
    "session",
    "cookie",
)
_CREDENTIAL_NAMES = frozenset({"pwd", "pass", "sig", "code", "jwt", "bearer"})


def _credential_name(name: str) -> bool:
    flat = unquote_plus(name).lower().replace("-", "").replace("_", "").replace(".", "")
    return flat in _CREDENTIAL_NAMES or any(word in flat for word in _CREDENTIAL_WORDS)


#: Whether a URL parameter or connection keyword names a credential (``password``,
#: ``sslpassword``, ``api_key``, ``token``...): one list for every URL the project shows.
is_credential_name = _credential_name


def _mask_params(text: str) -> str:
    """``a=1&key=s3cret`` -> ``a=1&key=***``: the values of credential-named parameters."""
    out = []
    for part in text.split("&"):
        name, eq, value = part.partition("=")
        out.append(f"{name}={MASK}" if eq and value and _credential_name(name) else part)
    return "&".join(out)


def _split(url: str) -> tuple[str, str, str, str, str]:
    """(scheme "://" or "", userinfo, host[:port], path, "?query#fragment"): a plain split that
    never raises, so even a malformed URL can be shown masked."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    else:
        scheme += sep
    cut = len(rest)
    for ch in "/?#":
        pos = rest.find(ch)
        if pos >= 0:
            cut = min(cut, pos)
    netloc, tail = rest[:cut], rest[cut:]
    userinfo, at, host = netloc.rpartition("@")
    if not at:
        userinfo, host = "", netloc
    q = min((p for p in (tail.find("?"), tail.find("#")) if p >= 0), default=len(tail))
    return scheme, userinfo, host, tail[:q], tail[q:]


def strip_userinfo(url: str) -> str:
    """The URL without ``user:pass@`` (the query is kept: it may be needed to call it)."""
    scheme, _userinfo, host, path, rest = _split(url)
    return f"{scheme}{host}{path}{rest}"


def redact_url(url: str) -> str:
    """The URL as it may be shown or stored: no userinfo, credential parameters masked.

    Used for every URL we print or store (messages, run.json, reports). Never raises: a
    malformed URL is shown masked too, so an error about it can name it.
    """
    scheme, _userinfo, host, path, rest = _split(url)
    if rest:
        query, hash_, fragment = rest.partition("#")
        rest = (
            ("?" + _mask_params(query[1:]) if query.startswith("?") else query)
            + hash_
            + _mask_params(fragment)
        )
    return f"{scheme}{host}{path}{rest}"


def url_secrets(url: str) -> list[str]:
    """Credential values in a URL (userinfo password, credential-named parameters), raw and
    percent-decoded, so that an echo of either form can be masked; and the ``Basic`` token
    the client sends for its userinfo (a proxy URL's becomes a ``Proxy-Authorization``
    header an echoing server repeats). In an http(s) or socks URL, a user with an empty or no
    password is the credential itself (a gateway's key given as the user name)."""
    found: list[str] = []
    scheme, userinfo, _host, _path, rest = _split(url)
    if userinfo:
        user, _colon, password = userinfo.partition(":")
        if password:
            found += [password, unquote(password)]
        elif scheme.lower().startswith(("http", "socks")):
            # HTTP Basic with no password: the user is the credential. Not in a database URL,
            # whose user is a role name (a user "goldeval" masked the pages' CSS classes).
            found += [user, unquote(user)]
        token = f"{unquote(user)}:{unquote(password)}".encode()
        found.append(base64.b64encode(token).decode("ascii"))
    for part in rest.lstrip("?").replace("#", "&").split("&"):
        name, eq, value = part.partition("=")
        if eq and value and _credential_name(name):
            found += [value, unquote_plus(value)]
    return [f for f in found if f]


def secret_forms(
    user: str | None, password: str | None, api_key: str | None, extra: Iterable[str] = ()
) -> tuple[str, ...]:
    """Every form in which a credential may be echoed back: as given, percent-encoded, and the
    ``Basic`` token (base64 of ``user:password``). Longest first, so that a secret containing
    another is masked whole. The one list all HTTP clients (chat, judge, embeddings) mask."""
    forms: set[str] = set()
    if password:
        forms.update((password, quote(password, safe="")))
    elif user:  # Basic auth with an empty password: the user name is the credential
        forms.update((user, quote(user, safe="")))
    if password or user:
        token = base64.b64encode(f"{user or ''}:{password or ''}".encode()).decode("ascii")
        forms.add(token)
    if api_key and api_key.strip():
        key = api_key.strip()
        forms.update((key, quote(key, safe="")))
    for value in extra:
        if value and value.strip():
            forms.update((value, quote(value, safe="")))
    for value in list(forms):
        forms.update(_encoded_forms(value))
    # Very short values would mask ordinary text ("a", "1"); they are not real secrets.
    return tuple(sorted((f for f in forms if len(f) >= 3), key=len, reverse=True))


def _encoded_forms(value: str) -> set[str]:
    """Whole re-encodings a server or model may echo a credential in (a proxy's error page,
    a debugging answer): base64 (standard and URL-safe, padded or not), hex, percent-encoding
    in lower case, JSON ``\\u`` escapes and HTML character references. Only for values of 8
    characters or more (shorter ones are not masked in answers either), and only the value
    encoded whole: a key inside a longer base64 text is not recognised (documented)."""
    if len(value) < 8:
        return set()
    raw = value.encode("utf-8")
    # A value with a line break or another unprintable character is shown escaped by the
    # messages that quote it (httpx's "Illegal header value b'...'", a repr): those forms and
    # each printable piece (a key file of two lines holds two keys) are masked too.
    escaped: set[str] = set()
    if not value.isprintable():
        escaped = {repr(value)[1:-1], repr(raw)[2:-1]}
        escaped.update(p for p in re.split(r"[^\x21-\x7e]+", value) if len(p) >= 8)
    b64 = base64.b64encode(raw).decode("ascii")
    url = base64.urlsafe_b64encode(raw).decode("ascii")
    return {
        b64,
        b64.rstrip("="),
        url,
        url.rstrip("="),
        raw.hex(),
        raw.hex().upper(),
        *_quoted_forms(value),
        "".join(f"\\u{ord(c):04x}" for c in value),
        "".join(f"&#{ord(c)};" for c in value),
        "".join(f"&#x{ord(c):x};" for c in value),
        *escaped,
    } - {value}


def _quoted_forms(value: str) -> set[str]:
    """The ways a URL or a JSON writer quotes ``value``: percent-encoded with or without ``/``
    kept (Python's ``quote`` keeps it by default), ``+`` for spaces, each in upper- and
    lower-case hex; a JSON string's escapes, with ``/`` written ``\\/`` (PHP's and Java's
    serialisers) or not; HTML's. A key holding ``/``, ``+`` or ``=`` echoed in one of these
    passed whole (``sk-a/b%2Bc%3D...``)."""
    percent = {quote(value, safe=""), quote(value), quote_plus(value), quote_plus(value, safe="/")}
    percent |= {re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), p) for p in percent}
    in_json = json.dumps(value, ensure_ascii=False)[1:-1]
    return {*percent, in_json, in_json.replace("/", "\\/"), html.escape(value)}


def mask_secrets(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret replaced by ``***``. Mask first, cut after: a cut before
    masking leaves half a key in the excerpt."""
    secrets = tuple(secrets)
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    # and quoted back in part (a `/` percent-encoded, a `+` as `\\u002B`): goldeval.core.echoes
    return echo_masker(secrets).mask(text, MASK)


def check_credential(value: str | None, field: str) -> None:
    """Raise :class:`ConfigError` naming ``field`` (never the value) when a credential cannot
    be sent in an HTTP header: a line break or another control character (a key file of two
    lines), or a character outside ASCII (quotes pasted with the key). httpx raised at the
    first call, and its message quoted the whole value."""
    if not value:
        return
    for position, ch in enumerate(value, start=1):
        if not " " <= ch <= "~":
            kind = (
                "a line break"
                if ch in "\r\n"
                else (
                    "a control character" if ch < " " or ch == "\x7f" else "a non-ASCII character"
                )
            )
            raise ConfigError(
                f"holds {kind} (character {position} of {len(value)}): an HTTP "
                "header cannot carry it",
                field=field,
                hint=f"set {field} to the credential alone, on one line, without quotes",
            )


def check_base_url(url: str, field: str) -> str:
    """``url`` if a provider can call it, else :class:`ConfigError` naming it, masked.

    An http(s) scheme, a host, and a port (if any) that is a number from 1 to 65535.
    """
    shown = redact_url(url)
    if "://" not in url:
        raise ConfigError(
            f"base URL {shown!r} has no scheme",
            field=field,
            hint=f"write it as http://{shown} or https://{shown}",
        )
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ConfigError(f"invalid base URL {shown!r}: {exc}", field=field) from None
    scheme, rest = url.split("://", 1)
    if "@" in rest and "@" not in parts.netloc:
        # user:password holding a raw "/", "?" or "#": the URL's host part ends there, the
        # password would be read as a path (sent, logged and recorded) and never masked.
        raise ConfigError(
            f"base URL {scheme}://***@{rest.rsplit('@', 1)[1]!s} has an '@' outside its host "
            "part: a user:password holding '/', '?' or '#' must be percent-encoded",
            field=field,
            hint="write '/' as %2F, '?' as %3F, '#' as %23 (and '@' as %40) in the password",
        )
    try:
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"invalid base URL {shown!r}: {exc}", field=field) from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ConfigError(
            f"unsupported scheme {parts.scheme!r} in base URL {shown!r}",
            field=field,
            hint="use an http:// or https:// URL",
        )
    if not parts.hostname:
        raise ConfigError(f"base URL {shown!r} has no host", field=field)
    if port == 0:
        raise ConfigError(f"invalid base URL {shown!r}: port 0", field=field)
    return url


@dataclass
class RunSettings:
    dataset: str
    mode: Mode = Mode.FIXTURE
    attempts: int = 1
    #: ``--golden-attempts=auto:MAX``: ``attempts`` is MAX, and attempts after the first
    #: run only for unsettled cases (goldeval.results.adaptive_attempts).
    adaptive: bool = False
    out_dir: Path = Path(".goldeval/runs")
    artifacts: str = "failure"
    provider: ProviderSettings = field(default_factory=ProviderSettings)
    models: list[str] = field(default_factory=list)
    concurrency: int = 8
    deadline: float | None = None
    baseline: str | None = None
    save_baseline: str | None = None
    force_save_baseline: bool = False
    gate: bool = True
    judge: bool = False
    judge_model: str | None = None
    judge_repetitions: int = 1
    #: max_tokens of every judge call (``--golden-judge-max-tokens``, limit judge_max_tokens).
    judge_max_tokens: int = 512
    cache_dir: Path | None = None
    overwrite_fixtures: bool = False
    experiment: str | None = None
    junit_path: str | None = None
    store: str | None = None
    run_key: str | None = None
    rerun_errors: bool = False
    max_cost: float | None = None
    max_tokens: int | None = None
    #: The manifest's variants this session runs, by name (goldeval.dataset.variants).
    variants: tuple[str, ...] = ()

    @property
    def side_by_side(self) -> bool:
        """Several runs out of one session (models or variants): no baseline, no one run."""
        return len(self.models) > 1 or len(self.variants) > 1


def _env_timeout_minutes(default: float) -> float:
    raw = os.environ.get("OLLAMA_TIMEOUT_MINUTES")
    if not raw:
        return default
    try:
        minutes = float(raw)
    except ValueError:
        return default
    # "inf" would be no bound at all, "nan" a timeout no wait ever meets
    return max(1.0, minutes) * 60.0 if math.isfinite(minutes) else default


def provider_from_env(
    name: str, model: str | None, base_url: str | None, *, option: str = "--golden-base-url"
) -> ProviderSettings:
    """Apply the reference's environment fallbacks (OLLAMA_HOST, OPENAI_BASE_URL, keys).

    Raises :class:`ConfigError` (a usage error, exit 4) for a base URL no provider can call;
    ``option`` is the command-line option the error names (the judge has its own).
    ``--golden-base-url`` must carry its scheme; ``OLLAMA_HOST`` may omit it, as Ollama's own
    variable does (``127.0.0.1:11434`` means ``http://127.0.0.1:11434``).
    """
    s = ProviderSettings(name=name, model=model)
    field = option
    if name == "ollama":
        url = base_url or os.environ.get("OLLAMA_HOST") or "http://127.0.0.1:11434"
        if not base_url and os.environ.get("OLLAMA_HOST"):
            field = "OLLAMA_HOST"
            if "://" not in url:
                url = "http://" + url
        s.user = os.environ.get("OLLAMA_USER") or None
        s.password = os.environ.get("OLLAMA_PASSWORD")
        s.read_timeout = _env_timeout_minutes(180.0)
    elif name == "openai":
        url = base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com"
        if not base_url and os.environ.get("OPENAI_BASE_URL"):
            field = "OPENAI_BASE_URL"
        s.api_key = os.environ.get("OPENAI_API_KEY") or None
    else:
        url = base_url or ""
    url = url.strip()
    if url and name in ("ollama", "openai"):
        check_base_url(url, field)
    if url:
        try:
            parts = urlsplit(url)
        except ValueError:
            raise ConfigError(f"invalid base URL {redact_url(url)!r}", field=field) from None
        if parts.username is not None:
            s.user = unquote(parts.username)
            s.password = unquote(parts.password) if parts.password is not None else s.password
        # Userinfo moves to user/password; the query (``?api-version=``, ``?key=``) is kept,
        # the provider needs it. Shown only through redact_url.
        url = strip_userinfo(url).rstrip("/")
    s.base_url = url or None
    # Only the key goes raw into a header; a user and password are base64-encoded there.
    check_credential(s.api_key, "OPENAI_API_KEY")
    return s
