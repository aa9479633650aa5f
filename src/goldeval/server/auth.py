"""API keys and roles: ``GOLDEVAL_API_KEYS="key1:EVAL,key2:MONITOR,key3:ADMIN"``.

Keys are hashed (SHA-256) as soon as they are read; only the hashes are kept, and a
presented key is hashed and compared with every stored hash with :func:`hmac.compare_digest`
(constant time, no early exit). No key, hash or part of one is ever logged or put in a
response: a caller is named by its role and a short opaque label (``key#2``, its position in
the configuration).

Roles:

* ``EVAL``: create runs, read runs, results and comparisons, download artifacts, the run page;
* ``ADMIN``: everything EVAL may, plus cancel, resume and delete runs, readiness and metrics;
* ``MONITOR``: readiness and metrics only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import threading
import time
from dataclasses import dataclass
from enum import Enum

ENV = "GOLDEVAL_API_KEYS"
#: Shortest key accepted: a guessable key is a configuration error, not a weak deployment.
MIN_KEY_LENGTH = 16


class Role(str, Enum):
    EVAL = "EVAL"
    ADMIN = "ADMIN"
    MONITOR = "MONITOR"


#: What each permission needs (ADMIN is allowed everywhere).
READ = frozenset({Role.EVAL, Role.ADMIN})
WRITE = frozenset({Role.EVAL, Role.ADMIN})
MANAGE = frozenset({Role.ADMIN})
MONITOR = frozenset({Role.MONITOR, Role.ADMIN})


class KeyConfigError(ValueError):
    """The key configuration is unusable (the message never contains a key)."""


@dataclass(frozen=True)
class Principal:
    """An authenticated caller."""

    label: str
    """``key#N`` (the N-th entry of the configuration): safe to log."""
    role: Role
    owner: str = ""
    """A stable name of the key (a digest of its digest, never the key): what an idempotency
    key is scoped to. The same on every server and across restarts and key reordering."""


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


class KeyRing:
    """The configured keys, as SHA-256 digests with their roles."""

    def __init__(self, entries: list[tuple[bytes, Role]]) -> None:
        self._entries = entries

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:  # never the digests
        return f"<KeyRing {len(self._entries)} key(s)>"

    @classmethod
    def parse(cls, text: str, *, source: str = ENV) -> KeyRing:
        """``key:ROLE`` entries separated by commas (or newlines)."""
        entries: list[tuple[bytes, Role]] = []
        seen: set[bytes] = set()
        items = [i.strip() for i in text.replace("\n", ",").split(",")]
        for number, item in enumerate((i for i in items if i), start=1):
            key, sep, role_text = item.rpartition(":")
            if not sep or not key:
                raise KeyConfigError(
                    f"{source}: entry {number} is not KEY:ROLE (roles: EVAL, ADMIN, MONITOR)"
                )
            try:
                role = Role(role_text.strip().upper())
            except ValueError:
                raise KeyConfigError(
                    f"{source}: entry {number} has an unknown role; use EVAL, ADMIN or MONITOR"
                ) from None
            key = key.strip()
            if len(key) < MIN_KEY_LENGTH:
                raise KeyConfigError(
                    f"{source}: the key of entry {number} is shorter than {MIN_KEY_LENGTH} "
                    "characters; generate one with: python -c 'import secrets; "
                    "print(secrets.token_urlsafe(32))'"
                )
            digest = _digest(key)
            if digest in seen:
                raise KeyConfigError(f"{source}: entry {number} repeats an earlier key")
            seen.add(digest)
            entries.append((digest, role))
        if not entries:
            raise KeyConfigError(
                f"{source} is empty: set it to KEY:ROLE entries, e.g. "
                f'{ENV}="$(openssl rand -hex 24):EVAL" (roles: EVAL, ADMIN, MONITOR)'
            )
        return cls(entries)

    def identify(self, presented: str | None) -> Principal | None:
        """The caller holding ``presented``, or None. Compares with every key (constant time)."""
        if not presented:
            return None
        digest = _digest(presented)
        found: Principal | None = None
        for number, (stored, role) in enumerate(self._entries, start=1):
            if hmac.compare_digest(digest, stored) and found is None:
                found = Principal(f"key#{number}", role, owner_of(stored))
        return found


def owner_of(digest: bytes) -> str:
    """The stored name of a key (:attr:`Principal.owner`): a salted digest of its digest, so
    the store never holds what the server compares keys with."""
    return hashlib.sha256(b"goldeval idempotency owner\0" + digest).hexdigest()[:32]


def presented_key(x_api_key: str | None, authorization: str | None) -> str | None:
    """The key from ``X-API-Key``, ``Authorization: Bearer KEY`` or ``Authorization: Basic``
    (any user name, the key as password: what a browser sends for the run page)."""
    if x_api_key:
        return x_api_key.strip()
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() == "bearer":
        return value.strip() or None
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    return None


class RateLimiter:
    """A token bucket per caller: ``per_minute`` requests a minute, bursts up to that many."""

    def __init__(self, per_minute: int) -> None:
        self.rate = per_minute / 60.0
        self.capacity = float(per_minute)
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, who: str) -> float:
        """0 if allowed, else the seconds to wait before the next request is allowed."""
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(who, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[who] = (tokens - 1.0, now)
                return 0.0
            self._buckets[who] = (tokens, now)
            return max(1.0, math.ceil((1.0 - tokens) / self.rate))
