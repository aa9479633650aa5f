"""The store's errors and the redaction of store URLs (no password in any message)."""

from __future__ import annotations

import re

from goldeval.core.settings import is_credential_name


class StoreError(Exception):
    """The run store cannot be opened, read or written (connection, IO, schema).

    Messages name the store by a redacted URL (``postgresql://user:***@host/db``) and never
    contain a password.
    """


class RunConflictError(StoreError):
    """``begin_run`` named an existing run that cannot be resumed by this caller.

    Raised when a run key (or run id) already belongs to a run of another dataset or dataset
    hash, or when a run id exists under a different run key.
    """


# --------------------------------------------------------------------------- redaction

#: A URL query parameter (``?sslpassword=...``) and a libpq ``key=value`` keyword: masked
#: when the name is a credential's (goldeval.core.settings.is_credential_name: ``password``,
#: ``sslpassword``, any ``*key*``/``*token*``/``*secret*``), not only ``password``.
_QUERY_PARAM = re.compile(r"([?&])([^=&#\s]+)=([^&#\s]*)")
_CONNINFO_PARAM = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)(\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")


def _masked_param(match: re.Match[str]) -> str:
    sep, name, value = match.group(1), match.group(2), match.group(3)
    return f"{sep}{name}=***" if value and is_credential_name(name) else match.group(0)


def _masked_keyword(match: re.Match[str]) -> str:
    name, eq = match.group(1), match.group(2)
    return f"{name}{eq}***" if is_credential_name(name) else match.group(0)


def _userinfo_span(rest: str) -> tuple[int, int] | None:
    """Start and end of the password in the part of a URL after ``scheme://``."""
    # userinfo ends at the last "@": a raw (unencoded) password may contain "@", "/", "?" or
    # "#". An "@" later in the URL (in a query value) only makes this mask more than needed.
    at = rest.rfind("@")
    colon = rest.find(":", 0, at) if at != -1 else -1
    return (colon + 1, at) if colon != -1 else None


def url_password(url: str) -> str | None:
    """The password in ``scheme://user:password@host/...``, as written (None if none)."""
    _, sep, rest = url.partition("://")
    span = _userinfo_span(rest) if sep else None
    return rest[span[0] : span[1]] or None if span else None


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``.

    Handles URLs (``postgresql://user:secret@host/db`` -> ``postgresql://user:***@host/db``,
    also ``?password=secret`` parameters) and libpq ``key=value`` connection strings.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _CONNINFO_PARAM.sub(_masked_keyword, url)
    span = _userinfo_span(rest)
    if span is not None:
        rest = f"{rest[: span[0]]}***{rest[span[1] :]}"
    rest = _QUERY_PARAM.sub(_masked_param, rest)
    return f"{scheme}://{rest}"
