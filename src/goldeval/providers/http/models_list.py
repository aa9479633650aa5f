"""The server's own list of models, asked once before the first call (issue 31).

A server that serves whatever model name it is given (llama.cpp's server with one model loaded)
answers ``--golden-model=gpt-9-nonexistent`` as if it existed, and the run would record that
name as the model it measured. So before the first call a live run asks the list the protocol
offers (``GET /v1/models`` for OpenAI-compatible servers, ``GET /api/tags`` for Ollama) and
refuses a model the server does not list. A server that offers no list (404, 405, a connection
refused, a timeout, a body that is no list) is not refused: the run goes on as before, and a
server that is down shows as ERROR attempts anyway.

Answers also carry the model the server says answered (the response's ``model`` field):
:func:`served_model_of` reads it, and attempts record it as ``servedModel``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx

from goldeval.core.errors import GoldevalError
from goldeval.core.limits import loads_json

if TYPE_CHECKING:
    from goldeval.providers.http.client import HTTPProvider

__all__ = ["LIST_TIMEOUT", "listed_models", "refusal", "served_model_of"]

#: Seconds the list may take at most (connect and read): it is a small answer, and a server
#: that cannot give it quickly is treated as one that offers none.
LIST_TIMEOUT = 10.0
#: Longest model name taken from a response (a name, not a document).
_NAME_CHARS = 200
#: Models named in a refusal message at most.
_SHOWN = 8


def served_model_of(value: Any) -> str | None:
    """The ``model`` field of a response, when it is a plain, short, non-empty string."""
    if isinstance(value, str) and value.strip() and len(value) <= _NAME_CHARS:
        return value.strip()
    return None


def _names(data: Any) -> list[str] | None:
    """Model names of an OpenAI ``{"data": [{"id"}]}`` or Ollama ``{"models": [{"name"}]}``
    list; None when the body is neither."""
    if not isinstance(data, dict):
        return None
    items = data.get("data") if isinstance(data.get("data"), list) else data.get("models")
    if not isinstance(items, list):
        return None
    names: list[str] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        for key in ("id", "name", "model"):
            name = served_model_of(item.get(key))
            if name is not None and name not in names:
                names.append(name)
    return names


def listed_models(provider: HTTPProvider, url: str) -> list[str] | None:
    """GET ``url`` with the provider's client (its credentials, its TLS settings); the model
    names listed, or None when the server offers no usable list."""
    timeout = min(LIST_TIMEOUT, provider.settings.connect_timeout + provider.settings.read_timeout)
    try:
        # "Connection: close": the probe is a one-off (often in the xdist controller, which
        # makes no other call), so no pooled socket is left open behind it.
        response = provider._client.get(url, timeout=timeout, headers={"Connection": "close"})
        response.close()
    except (httpx.HTTPError, httpx.InvalidURL, RuntimeError):
        return None  # no list at this moment: the calls will say what is wrong
    if response.status_code != 200:
        return None
    try:
        data = loads_json(response.content, what="model list")
    except (ValueError, GoldevalError):
        return None
    return _names(data)


def _same_model(asked: str, listed: str) -> bool:
    """Ollama names a model without a tag ``:latest``; otherwise names must be equal."""
    if asked == listed:
        return True
    return asked + ":latest" == listed or listed + ":latest" == asked


def refusal(provider: HTTPProvider, url: str, model: str) -> str | None:
    """Why ``model`` cannot be used on this server (it lists others), else None."""
    listed = listed_models(provider, url)
    if not listed:
        return None  # no list, or an empty one: nothing to check against
    if any(_same_model(model, name) for name in listed):
        return None
    shown = ", ".join(listed[:_SHOWN]) + (
        f" (+{len(listed) - _SHOWN} more)" if len(listed) > _SHOWN else ""
    )
    # The names are the server's text (a proxy may echo the caller's key as one).
    shown = provider._scrub(shown)
    return (
        f"model {model!r} is not served by {provider.base_url}: the server lists {shown} "
        "(asked once before the first call). Pass --golden-model / --golden-models with a "
        "listed name, or pull or load the model first"
    )
