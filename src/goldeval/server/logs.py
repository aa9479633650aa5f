"""Structured logs: one JSON object per line on stderr, one line per event.

Fields: ``ts``, ``level``, ``event`` and whatever the event carries (``run_id``, ``case_id``,
``dataset_version``, ``idempotency_key``, ``status``...). Callers pass identifiers and counts,
never keys, store URLs with passwords or request bodies; :func:`event` additionally replaces
every registered secret by ``***`` (defence in depth).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from datetime import datetime, timezone
from typing import Any

from goldeval.core.settings import mask_secrets

LOGGER = "goldeval.server"
_secrets: set[str] = set()
_lock = threading.Lock()


def register_secret(secret: str | None) -> None:
    """Never write ``secret`` into a log line."""
    if secret:
        with _lock:
            _secrets.add(secret)


def _scrub(text: str) -> str:
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    return mask_secrets(text, secrets)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            payload.update(fields)
        return _scrub(json.dumps(payload, ensure_ascii=False, default=str))


def configure(level: int = logging.INFO) -> None:
    """Send the service's logs to stderr as JSON lines (idempotent)."""
    logger = logging.getLogger(LOGGER)
    logger.setLevel(level)
    if not any(getattr(h, "_goldeval", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        handler._goldeval = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.propagate = False


def event(name: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log one event with its fields (None values are left out)."""
    logging.getLogger(LOGGER).log(
        level, name, extra={"fields": {k: v for k, v in fields.items() if v is not None}}
    )
