"""Wire helpers shared by both protocols: token counts, embeddings, error bodies, chunking."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from http import HTTPStatus
from typing import Any

#: Dimension of the deterministic bag-of-words embeddings.
EMBEDDING_DIM = 64
#: Models listed by ``GET /api/tags`` and ``GET /v1/models`` unless overridden.
DEFAULT_MODELS: tuple[str, ...] = ("fake-llm:latest", "fake-embed:latest")
#: Header names whose values must never reach logs or reprs.
SECRET_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie"}
)
#: Upper bound on a request body; this is a test server, anything bigger is a client bug.
MAX_BODY = 32 * 1024 * 1024
#: A deliberately truncated JSON document for :meth:`Fault.invalid_json`.
INVALID_JSON = b'{"model": "fake", "message": {"role": "assistant", "content": "trunc'
_WORD_RE = re.compile(r"\w+")

# --------------------------------------------------------------------------- helpers


def text_of(content: Any) -> str:
    """Message content as text: OpenAI list-of-parts content is joined, ``None`` is ``""``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return str(content)


def count_tokens(text: str) -> int:
    return len(text.split())


def embed_text(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """Deterministic embedding: lower-cased words hashed into ``dim`` buckets, L2-normalised.

    Identical texts have cosine 1.0; texts sharing no words are near 0. All components are
    non-negative, so cosine similarity stays in [0, 1]. Empty text maps to a fixed unit
    vector rather than zeros so callers never divide by zero.
    """
    vec = [0.0] * dim
    for word in _WORD_RE.findall(text.lower()):
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        vec[int.from_bytes(digest, "big") % dim] += 1.0
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        vec[0] = 1.0
        return vec
    return [v / norm for v in vec]


def embed_inputs(body: Any, key: str) -> list[str] | None:
    """``input`` as a list of strings (``str`` or ``[str]``); ``None`` when malformed."""
    value = body.get(key) if isinstance(body, dict) else None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def normalise_tool_call(call: Mapping[str, Any]) -> tuple[str, Any, str | None]:
    """(name, arguments, id) from either the flat or the OpenAI-style tool-call shape."""
    fn = call.get("function")
    src: Mapping[str, Any] = fn if isinstance(fn, Mapping) else call
    name = str(src.get("name", ""))
    args = src.get("arguments", {})
    call_id = call.get("id")
    return name, args, call_id if isinstance(call_id, str) else None


def chat_validation_error(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model is required"
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) for m in msgs
    ):
        return "messages must be a list of {role, content} objects"
    return None


def error_body(protocol: str, status: int, message: str) -> dict[str, Any]:
    """The error object each protocol normally sends."""
    if protocol == "ollama":
        return {"error": message}
    if status == 429:
        kind = "rate_limit_error"
    elif status >= 500:
        kind = "server_error"
    else:
        kind = "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return f"HTTP {status}"


def split_for_stream(text: str) -> list[str]:
    """Split into a few word-boundary chunks so clients must really concatenate deltas."""
    if not text:
        return []
    pieces = re.findall(r"\S+\s*|\s+", text)
    size = max(1, math.ceil(len(pieces) / 3))
    return ["".join(pieces[i : i + size]) for i in range(0, len(pieces), size)]


def group(events: list[bytes], head: int, paced: int) -> list[bytes]:
    """``events`` as the pieces a paced stream sends: the ``head`` leading events go with the
    first of the ``paced`` content events, everything after them with the last one."""
    if paced <= 0:
        return [b"".join(events)]
    body = events[head : head + paced]
    body[0] = b"".join(events[:head]) + body[0]
    body[-1] = body[-1] + b"".join(events[head + paced :])
    return body
