"""``python -m goldeval.testing.llm_server``: serve until killed, base URL on stdout line 1."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from goldeval.testing.llm_server.faults import Fault
from goldeval.testing.llm_server.fixtures import fixture_responder
from goldeval.testing.llm_server.server import FakeLLMServer
from goldeval.testing.llm_server.wire import DEFAULT_MODELS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m goldeval.testing.llm_server",
        description="Serve a fake Ollama + OpenAI compatible LLM API until killed.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added per request")
    parser.add_argument(
        "--fixtures",
        metavar="DIR",
        help="answer with DIR/fixtures/<id>.out.md for the row whose prompt was sent",
    )
    parser.add_argument(
        "--fail-all", type=int, metavar="STATUS", help="answer every request with this status"
    )
    parser.add_argument("--retry-after", help="Retry-After header value used with --fail-all")
    parser.add_argument(
        "--model", action="append", help="model name listed by /api/tags (repeatable)"
    )
    parser.add_argument(
        "--capacity",
        type=int,
        metavar="C",
        help="serve at most C requests at a time; queue the rest (a one-slot local server: 1)",
    )
    parser.add_argument(
        "--rate-limit",
        type=float,
        metavar="R",
        help="answer 429 (with Retry-After) to requests beyond R per second",
    )
    parser.add_argument(
        "--stream-interval",
        type=float,
        default=0.0,
        metavar="S",
        help="seconds between the pieces of a streamed answer",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log requests to stderr")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    srv = FakeLLMServer(
        args.host,
        args.port,
        latency=args.latency,
        models=args.model or DEFAULT_MODELS,
        capacity=args.capacity,
        rate_limit=args.rate_limit,
        stream_interval=args.stream_interval,
    )
    if args.fixtures:
        try:
            srv.responder = fixture_responder(args.fixtures)
        except (OSError, ValueError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.fail_all is not None:
        try:
            srv.set_fault(Fault.status(args.fail_all, retry_after=args.retry_after))
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2

    stop = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    srv.start()
    try:
        print(srv.base_url, flush=True)
        # Polling keeps the main thread responsive to signals on every platform.
        while not stop.wait(0.5):
            pass
    finally:
        srv.stop()
    return 0
