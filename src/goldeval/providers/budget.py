"""Prices per model and a spending budget for live calls (``--golden-max-cost``,
``--golden-max-tokens``).

Prices come from the ini key ``golden_prices``, one model a line, per 1,000 tokens::

    [pytest]
    golden_prices =
        gpt-4o-mini = 0.00015 0.0006
        qwen2.5-coder:7b = 0 0

The budget is checked before each call is started, like ``--golden-deadline``: once spent, the
attempts not yet started are SKIPPED (reason ``budget``) and the run is INCOMPLETE (never exit
0). Calls already in flight finish, so a run may go over by at most the calls in flight.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable

from goldeval.core.errors import ConfigError

__all__ = ["Budget", "Price", "parse_prices"]

#: (input, output) price per 1,000 tokens.
Price = tuple[float, float]


def parse_prices(lines: Iterable[str], *, source: str = "golden_prices") -> dict[str, Price]:
    """``MODEL = INPUT OUTPUT`` lines as ``{model: (input, output)}``; a clear error naming
    the line otherwise."""
    prices: dict[str, Price] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        model, sep, rest = line.rpartition("=")
        parts = rest.split()
        values: list[float] = []
        for part in parts:
            try:
                values.append(float(part))
            except ValueError:
                values = []
                break
        model = model.strip()
        if (
            not sep
            or not model
            or len(values) != 2
            or not all(math.isfinite(v) and v >= 0 for v in values)
        ):
            raise ConfigError(
                f"{source} line {number}: {line!r} is not 'MODEL = INPUT OUTPUT' "
                "(prices per 1k input and output tokens, numbers 0 or more)",
                field=source,
            )
        prices[model] = (values[0], values[1])
    return prices


class Budget:
    """Tokens and cost spent by this process's live calls, against optional limits."""

    def __init__(self, *, max_cost: float | None = None, max_tokens: int | None = None) -> None:
        self.max_cost = max_cost
        self.max_tokens = max_tokens
        self._lock = threading.Lock()
        self.cost = 0.0
        self.tokens = 0
        self.skipped = 0

    @property
    def active(self) -> bool:
        return self.max_cost is not None or self.max_tokens is not None

    def spend(self, tokens: int | None, cost: float | None) -> None:
        with self._lock:
            self.tokens += tokens or 0
            self.cost += cost or 0.0

    def exhausted(self) -> bool:
        with self._lock:
            if self.max_tokens is not None and self.tokens >= self.max_tokens:
                return True
            return self.max_cost is not None and self.cost >= self.max_cost

    def describe(self) -> str:
        with self._lock:
            parts = []
            if self.max_cost is not None:
                parts.append(f"cost {self.cost:.4g} of --golden-max-cost={self.max_cost:g}")
            if self.max_tokens is not None:
                parts.append(f"{self.tokens} tokens of --golden-max-tokens={self.max_tokens}")
            return ", ".join(parts)
