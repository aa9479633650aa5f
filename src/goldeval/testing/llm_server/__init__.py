"""A real local HTTP server speaking the Ollama and OpenAI chat/embedding protocols.

Why a real server rather than patching httpx: the HTTP providers are exercised end to end
(connection pooling, timeouts, retries, ``Retry-After`` handling, concurrency limits, auth
headers) exactly as against a live model, and the same server doubles as a deterministic,
zero-cost backend for benchmarks and for "live" runs in CI.

Quick use::

    with FakeLLMServer() as srv:
        srv.reply_map({"What is 2+2?": "4"})
        srv.script([Fault.status(429, retry_after=1), Fault.status(503), "ok"])
        ...  # point a provider at srv.base_url (Ollama) or srv.openai_base_url (OpenAI)
        assert srv.requests[0].headers["authorization"] == "Bearer sk-test"

Endpoints: Ollama ``POST /api/chat``, ``POST /api/embed``, ``POST /api/embeddings`` (legacy),
``GET /api/tags``, ``GET /``; OpenAI ``POST /v1/chat/completions``, ``POST /v1/embeddings``,
``GET /v1/models``.

Protocol details worth knowing:

* Like real Ollama, ``/api/chat`` streams NDJSON unless the body says ``"stream": false``
  (omitting it means streaming). ``/v1/chat/completions`` streams SSE only when
  ``"stream": true``. Streamed bodies are still sent with a ``Content-Length``.
* Every request to a known endpoint consumes one item of the fault script (see
  :meth:`FakeLLMServer.script`); unknown paths get a 404 and consume nothing.
* Authorization headers are recorded verbatim in :attr:`FakeLLMServer.requests` (tests
  assert on them) but are redacted from ``repr`` and never logged.

Command line (prints the base URL as the first stdout line, serves until killed)::

    python -m goldeval.testing.llm_server --port 0 --latency 0.2 --fixtures golden/mydataset
    python -m goldeval.testing.llm_server --fail-all 503
    python -m goldeval.testing.llm_server --latency 0.2 --capacity 1     # one at a time, queue
    python -m goldeval.testing.llm_server --rate-limit 20                # 429 above 20 req/s

The package: :mod:`.server` (:class:`FakeLLMServer`), :mod:`.faults` (what a test programs),
:mod:`.handler` (HTTP plumbing), :mod:`.ollama` / :mod:`.openai` (one module per protocol),
:mod:`.fixtures` (replaying a dataset's recorded answers), :mod:`.wire` (shared helpers),
:mod:`.cli` (the command line).
"""

from __future__ import annotations

from goldeval.testing.llm_server.cli import main
from goldeval.testing.llm_server.faults import (
    Fault,
    RecordedRequest,
    Reply,
    Responder,
    ScriptItem,
)
from goldeval.testing.llm_server.fixtures import fixture_responder
from goldeval.testing.llm_server.server import FakeLLMServer
from goldeval.testing.llm_server.wire import DEFAULT_MODELS, EMBEDDING_DIM, embed_text

__all__ = [
    "DEFAULT_MODELS",
    "EMBEDDING_DIM",
    "FakeLLMServer",
    "Fault",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptItem",
    "embed_text",
    "fixture_responder",
    "main",
]
