"""The programmable fake server: lifecycle, answers, faults, load modes and what it recorded."""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from goldeval.testing.llm_server import ollama, openai
from goldeval.testing.llm_server.faults import (
    Fault,
    RecordedRequest,
    Reply,
    Responder,
    ScriptItem,
    default_responder,
)
from goldeval.testing.llm_server.fixtures import fixture_responder, prompt_lookup
from goldeval.testing.llm_server.handler import Drop, Handler, Route, Server
from goldeval.testing.llm_server.wire import DEFAULT_MODELS, EMBEDDING_DIM

#: The model lists (``GET /api/tags``, ``GET /v1/models``): served apart from the calls (see
#: FakeLLMServer.listings), as real servers answer them while their slots are busy.
LISTING_ROUTES = frozenset({("GET", "/api/tags"), ("GET", "/v1/models")})

#: Which protocol function answers which (method, path).
ROUTES: dict[tuple[str, str], Route] = {
    ("POST", "/api/chat"): ollama.ollama_chat,
    ("POST", "/api/embed"): ollama.ollama_embed,
    ("POST", "/api/embeddings"): ollama.ollama_embeddings_legacy,
    ("GET", "/api/tags"): ollama.ollama_tags,
    ("GET", "/"): ollama.ollama_root,
    ("POST", "/v1/chat/completions"): openai.openai_chat,
    ("POST", "/v1/embeddings"): openai.openai_embeddings,
    ("GET", "/v1/models"): openai.openai_models,
}


class FakeLLMServer:
    """A programmable Ollama + OpenAI compatible server on a free local port.

    Use as a context manager or call :meth:`start` / :meth:`stop`. All programming
    methods are thread-safe and may be called while requests are being served.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        responder: Responder | None = None,
        latency: float = 0.0,
        models: Sequence[str] | None = None,
        embedding_dim: int = EMBEDDING_DIM,
        capacity: int | None = None,
        rate_limit: float | None = None,
        stream_interval: float = 0.0,
    ) -> None:
        self.host = host
        self._requested_port = port
        #: Decides chat answers; replace it at any time (attribute assignment is atomic).
        self.responder: Responder = responder or default_responder
        #: Extra seconds added to every request (a slow model).
        self.latency = float(latency)
        # What GET /api/tags and GET /v1/models list (the ``models`` property). The server
        # answers chat and embedding calls for ANY model name whatever it lists, as
        # llama.cpp's server with one model does; a client that wants to know asks the list.
        self._models: list[str] = list(DEFAULT_MODELS if models is None else models)
        #: Whether the model lists are offered: True / False, or None (the default): offered
        #: once a list of models was given (``models=`` or assigning :attr:`models`), else
        #: they answer 404, as a server without one, so a client may use any name.
        self.list_models: bool | None = None if models is None else True
        #: The model answers say served (their ``model`` field); None: the name asked for.
        self.served_model: str | None = None
        #: False: streamed answers carry no token counts, even when the client asks for them
        #: (llama.cpp's server; OpenAI ``stream_options.include_usage`` ignored).
        self.usage_in_streams = True
        self.embedding_dim = embedding_dim
        #: Capacity mode: at most this many requests are served at a time (latency, faults
        #: and answer included); the others wait in arrival order, as on a llama.cpp server
        #: with N slots. A request whose client gave up is still served. ``None``: unlimited.
        self.capacity: int | None = capacity
        #: Rate-limit mode: requests beyond this many in any one-second window are answered
        #: 429 at once, with ``Retry-After`` (fractional seconds) and ``retry-after-ms`` saying
        #: when a slot frees. ``None``: no limit.
        self.rate_limit: float | None = rate_limit
        #: Seconds between the pieces of a streamed answer (0: the whole stream at once).
        self.stream_interval = float(stream_interval)
        #: Pending script items, consumed one per request before the persistent fault.
        self.faults: deque[ScriptItem] = deque()
        self._fault: Fault | None = None
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._listings: list[RecordedRequest] = []
        self._errors: list[BaseException] = []
        self._in_flight = 0
        self._max_in_flight = 0
        self._ids = itertools.count(1)
        self._connections: set[socket.socket] = set()
        self._connections_changed = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._serving = 0
        self._waiting: deque[object] = deque()
        self._slot_freed = threading.Condition(self._lock)
        self._admitted: deque[float] = deque()
        self._rejected = 0
        self._queue_waits: list[float] = []
        self._httpd: Server | None = None
        self._thread: threading.Thread | None = None
        self._base_url: str | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeLLMServer:
        if self._httpd is not None:
            raise RuntimeError("FakeLLMServer is already running")
        self._stopping.clear()
        httpd = Server((self.host, self._requested_port), Handler)
        httpd.fake = self
        httpd.routes = ROUTES
        httpd.listing_routes = LISTING_ROUTES
        host, port = httpd.server_address[:2]
        host_str = host.decode() if isinstance(host, bytes) else str(host)
        if ":" in host_str:
            host_str = f"[{host_str}]"
        self._base_url = f"http://{host_str}:{port}"
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"FakeLLMServer:{port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, cut open connections and interrupt hangs; idempotent."""
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout)
        deadline = time.monotonic() + timeout
        with self._connections_changed:
            for conn in list(self._connections):
                try:
                    # Wakes handler threads blocked reading the next keep-alive request.
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            while self._connections:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._connections_changed.wait(remaining)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (the Ollama base URL)."""
        if self._base_url is None:
            raise RuntimeError("FakeLLMServer has not been started")
        return self._base_url

    @property
    def openai_base_url(self) -> str:
        """``base_url + "/v1"``, what OpenAI-compatible clients expect as their base URL."""
        return self.base_url + "/v1"

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])

    def url(self, path: str) -> str:
        return self.base_url + (path if path.startswith("/") else "/" + path)

    # -- programming answers -------------------------------------------------------------

    def reply_with(self, text: str | Reply) -> None:
        """Answer every chat request with ``text``."""
        self.responder = lambda _request: text

    def reply_map(self, mapping: Mapping[str, str | Reply], default: str | Reply = "ok") -> None:
        """Answer by exact lookup of the last user message; unknown messages get ``default``."""
        table = dict(mapping)
        self.responder = lambda request: table.get(request.last_user_message or "", default)

    def replay_fixtures(
        self,
        fixtures: Mapping[str, str] | str | os.PathLike[str],
        default: str | Reply | None = "ok",
    ) -> None:
        """Replay recorded answers keyed by prompt.

        ``fixtures`` is a ``{prompt: answer}`` mapping or a dataset directory (see
        :func:`fixture_responder`). Unlike :meth:`reply_map`, a user message that merely
        *contains* a known prompt (a templated prompt) also matches.
        """
        if isinstance(fixtures, Mapping):
            index = {k.strip(): v for k, v in fixtures.items()}
            self.responder = prompt_lookup(index, default)
        else:
            self.responder = fixture_responder(fixtures, default=default)

    # -- programming faults --------------------------------------------------------------

    def script(self, items: Iterable[ScriptItem]) -> None:
        """Replace the pending script: item *n* decides request *n*, then normal service.

        Items are :class:`Fault`, :class:`Reply`, ``str`` (a reply text) or ``None`` (answer
        normally via the responder). Append to :attr:`faults` to extend a running script.
        """
        new = list(items)
        with self._lock:
            self.faults.clear()
            self.faults.extend(new)

    def set_fault(self, fault: Fault | None) -> None:
        """Apply ``fault`` to every request once the script is exhausted; ``None`` clears."""
        with self._lock:
            self._fault = fault

    @property
    def fault(self) -> Fault | None:
        return self._fault

    def _next_script_item(self) -> ScriptItem:
        with self._lock:
            if self.faults:
                return self.faults.popleft()
            return self._fault

    # -- recording -----------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def listings(self) -> list[RecordedRequest]:
        """The model-list requests (``GET /api/tags``, ``GET /v1/models``), in arrival order.

        Kept apart from :attr:`requests`: a client asking the list before its first call
        must not shift the calls' count, and the list is served without the script, the
        faults, the latency or the capacity slots, which program the model's calls.
        """
        with self._lock:
            return list(self._listings)

    @property
    def models(self) -> list[str]:
        """The models the lists name (DEFAULT_MODELS unless given)."""
        return self._models

    @models.setter
    def models(self, names: Sequence[str]) -> None:
        self._models = list(names)
        if self.list_models is None:
            self.list_models = True  # a list given is a list offered

    @property
    def offers_model_list(self) -> bool:
        """Whether ``GET /api/tags`` and ``GET /v1/models`` answer (see :attr:`list_models`)."""
        return bool(self.list_models)

    def _listed(self, record: RecordedRequest) -> None:
        with self._lock:
            self._listings.append(record)

    def answered_model(self, asked: Any) -> Any:
        """The ``model`` an answer names: :attr:`served_model` when set, else the one asked."""
        return self.served_model if self.served_model is not None else asked

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def last_request(self) -> RecordedRequest | None:
        with self._lock:
            return self._requests[-1] if self._requests else None

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    @property
    def max_in_flight(self) -> int:
        """Peak number of requests being handled at the same time."""
        with self._lock:
            return self._max_in_flight

    @property
    def errors(self) -> list[BaseException]:
        """Exceptions raised by the responder (each was answered with a 500)."""
        with self._lock:
            return list(self._errors)

    def reset(self) -> None:
        """Back to a fresh state: records, counters, script, faults, latency and responder."""
        with self._lock:
            self._requests.clear()
            self._listings.clear()
            self._errors.clear()
            self._max_in_flight = self._in_flight
            self.faults.clear()
            self._fault = None
            self._admitted.clear()
            self._rejected = 0
            self._queue_waits.clear()
        self.latency = 0.0
        self.capacity = None
        self.rate_limit = None
        self.stream_interval = 0.0
        self.list_models = None
        self.served_model = None
        self.usage_in_streams = True
        self.responder = default_responder

    # -- load modes ------------------------------------------------------------------------

    @property
    def rejected(self) -> int:
        """Requests answered 429 by the rate-limit mode."""
        with self._lock:
            return self._rejected

    @property
    def queue_waits(self) -> list[float]:
        """Seconds each request waited for a slot in capacity mode, in order of service."""
        with self._lock:
            return list(self._queue_waits)

    def _admit(self) -> float | None:
        """``None`` when the rate-limit mode lets the request in, else seconds to wait."""
        limit = self.rate_limit
        if limit is None or limit <= 0:
            return None
        now = time.monotonic()
        with self._lock:
            window = self._admitted
            while window and now - window[0] >= 1.0:
                window.popleft()
            if len(window) < limit:
                window.append(now)
                return None
            self._rejected += 1
            # Until the oldest admitted request of the window leaves it.
            return max(0.001, window[0] + 1.0 - now)

    @contextlib.contextmanager
    def _slot(self) -> Iterator[None]:
        """Capacity mode: wait in arrival order for one of ``capacity`` serving slots."""
        if self.capacity is None:
            yield
            return
        ticket = object()
        start = time.monotonic()
        with self._slot_freed:
            self._waiting.append(ticket)
            try:
                while not (
                    self._waiting[0] is ticket and self._serving < max(1, self.capacity or 1)
                ):
                    if self._stopping.is_set():
                        raise Drop
                    self._slot_freed.wait(0.05)
            finally:
                self._waiting.remove(ticket)
                self._slot_freed.notify_all()
            self._serving += 1
            self._queue_waits.append(time.monotonic() - start)
        try:
            yield
        finally:
            with self._slot_freed:
                self._serving -= 1
                self._slot_freed.notify_all()

    # -- handler callbacks ---------------------------------------------------------------

    def _begin(self, record: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(record)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def _end(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _record_error(self, exc: BaseException) -> None:
        with self._lock:
            self._errors.append(exc)

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def _connection_opened(self, conn: socket.socket) -> None:
        with self._lock:
            self._connections.add(conn)

    def _connection_closed(self, conn: socket.socket) -> None:
        with self._connections_changed:
            self._connections.discard(conn)
            self._connections_changed.notify_all()
