"""``goldeval serve`` and ``goldeval worker``: configuration, start-up checks, shutdown."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from pathlib import Path

import uvicorn
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from goldeval.core import limits
from goldeval.dataset.rows import discover
from goldeval.server import initial_environ, logs
from goldeval.server.app import create_app
from goldeval.server.auth import ENV, KeyConfigError, KeyRing
from goldeval.server.header_deadline import with_header_deadline
from goldeval.server.settings import ServiceSettings
from goldeval.server.worker import run_workers, start_workers
from goldeval.store import StoreError, open_store, redact_url
from goldeval.store.base import url_password
from goldeval.verdict.exit_codes import USAGE


def settings_from(args: argparse.Namespace, store_url: str, root: str) -> ServiceSettings:
    return ServiceSettings.build(
        store_url=store_url,
        root=Path(root),
        datasets=Path(args.datasets) if args.datasets else None,
        runs_dir=Path(args.runs) if args.runs else None,
        lease_seconds=args.lease,
        heartbeat_seconds=max(0.2, min(2.0, args.lease / 5)),
        max_body_bytes=getattr(args, "max_body", 64 * 1024),
        max_cases=getattr(args, "max_cases", None),
        max_attempts=getattr(args, "max_attempts", 20),
        rate_limit_per_minute=getattr(args, "rate_limit", None),
        allow_live=not getattr(args, "no_live", False),
    )


def header_timeout(args: argparse.Namespace) -> float:
    seconds = getattr(args, "header_timeout", None)
    return float(seconds) if seconds else float(limits.default("service_header_seconds"))


def body_timeout(args: argparse.Namespace) -> float:
    seconds = getattr(args, "body_timeout", None)
    return float(seconds) if seconds else float(limits.default("service_body_seconds"))


def _startup(settings: ServiceSettings) -> bool:
    """Migrate the store and check the datasets folder; False (with a message) on failure."""
    logs.register_secret(url_password(settings.store_url))
    try:
        with open_store(settings.store_url) as store:
            version = store.schema_version()
    except StoreError as exc:
        logs.event("store unavailable", logging.ERROR, error=str(exc))
        print(f"goldeval: {exc}", file=sys.stderr)
        return False
    logs.event("migrations applied", store=redact_url(settings.store_url), schema_version=version)
    if not settings.datasets.is_dir():
        message = f"datasets folder {settings.datasets} does not exist (pass --datasets DIR)"
        logs.event("datasets folder missing", logging.ERROR, path=str(settings.datasets))
        print(f"goldeval: {message}", file=sys.stderr)
        return False
    problems: list[str] = []
    found = discover(settings.datasets, problems)
    logs.event(
        "datasets folder checked",
        path=str(settings.datasets),
        datasets=sorted(found),
        unreadable=len(problems) or None,
    )
    settings.runs_dir.mkdir(parents=True, exist_ok=True)
    settings.work_dir.mkdir(parents=True, exist_ok=True)
    return True


def serve(args: argparse.Namespace, store_url: str, root: str) -> int:
    logs.configure()
    try:
        keys = KeyRing.parse(os.environ.get(ENV, ""))
    except KeyConfigError as exc:
        print(f"goldeval: {exc}", file=sys.stderr)
        return USAGE
    # Only the hashes are kept: the keys leave this process's environment, so nothing it
    # starts (a run's pytest, its conftest.py, a provider function) inherits them, nor reads
    # them from /proc/<this process>/environ (the kernel's copy, wiped in place).
    _drop_keys()
    settings = settings_from(args, store_url, root)
    settings.keys = keys
    if not _startup(settings):
        return USAGE
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def start() -> None:
        threads.extend(start_workers(settings, args.workers, stop))

    def shutdown() -> None:
        # uvicorn turns SIGTERM/SIGINT into a graceful shutdown, then this: workers SIGTERM
        # their pytest runs' process groups (the plugin ends them between items, INTERRUPTED,
        # 75) and record the plugin's status: resumable with POST .../resume. The join waits
        # for the worker's own SIGKILL grace too.
        stop.set()
        for thread in threads:
            thread.join(timeout=settings.kill_grace_seconds + 10)

    app = create_app(settings, on_startup=start, on_shutdown=shutdown)
    logs.event("listening", host=args.host, port=args.port, workers=args.workers, keys=len(keys))
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_config=None,
        access_log=False,
        server_header=False,
        # uvicorn has no request-header or body read timeout: a client dribbling its headers,
        # or never finishing its body, would hold its connection as long as it liked.
        http=with_header_deadline(AutoHTTPProtocol, header_timeout(args), body_timeout(args)),
    )
    return 0


def _drop_keys() -> None:
    os.environ.pop(ENV, None)
    initial_environ.wipe(ENV)


def worker(args: argparse.Namespace, store_url: str, root: str) -> int:
    logs.configure()
    _drop_keys()  # a worker needs no API key: its runs must not find one in its environment
    settings = settings_from(args, store_url, root)
    if not _startup(settings):
        return USAGE
    return run_workers(settings, args.workers)
