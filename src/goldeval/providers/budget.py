"""Prices per model and a spending budget for live calls (``--golden-max-cost``,
``--golden-max-tokens``).

Prices come from the ini key ``golden_prices``, one model a line, per 1,000 tokens::

    [pytest]
    golden_prices =
        gpt-4o-mini = 0.00015 0.0006
        qwen2.5-coder:7b = 0 0

The budget is checked before each call is started, like ``--golden-deadline``: once spent, the
attempts not yet started are SKIPPED (reason ``budget``) and the run is INCOMPLETE (never exit
0). Calls already in flight finish, so a run may go over by at most the calls in flight (and
the judge and embedding calls of the attempts already started).

A budget that cannot see its input is not silently off: an answer without usage (a server that
sends none in streams, a plain callable) is counted with estimated tokens, characters / 4 of
the request's messages and of the answer (:func:`estimate_usage`), and marked as estimated.
Judge and embedding calls spend the same budget (:class:`Meter`) and wait on the same limiter
as the generation calls to the same server.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from goldeval.core.errors import ConfigError
from goldeval.core.limits import estimate_tokens

if TYPE_CHECKING:
    from goldeval.core.settings import ProviderSettings
    from goldeval.providers.base import Answer, ProviderRequest
    from goldeval.providers.http.limiter import CallLimiter

__all__ = [
    "Budget",
    "Meter",
    "Price",
    "cost_of",
    "current_meter",
    "estimate_usage",
    "install_meter",
    "parse_prices",
    "request_text",
]

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
        #: Of ``tokens``, how many are estimates (answers without usage).
        self.estimated_tokens = 0
        self.skipped = 0

    @property
    def active(self) -> bool:
        return self.max_cost is not None or self.max_tokens is not None

    def spend(self, tokens: int | None, cost: float | None, *, estimated: bool = False) -> None:
        with self._lock:
            self.tokens += tokens or 0
            self.cost += cost or 0.0
            if estimated:
                self.estimated_tokens += tokens or 0

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
            if self.estimated_tokens:
                parts.append(
                    f"{self.estimated_tokens} of the tokens estimated (characters / 4: the "
                    "provider reported no usage)"
                )
            return ", ".join(parts)

    def spend_answer(self, answer: Answer) -> None:
        """Count an answer's tokens (estimated or reported) and cost."""
        tokens = None
        if answer.input_tokens is not None or answer.output_tokens is not None:
            tokens = (answer.input_tokens or 0) + (answer.output_tokens or 0)
        self.spend(tokens, answer.cost, estimated=answer.tokens_estimated)


# -- what a call costs when the provider does not say ----------------------------------------


def cost_of(
    settings: ProviderSettings,
    tokens_in: int | None,
    tokens_out: int | None,
    model: str | None = None,
) -> float | None:
    """The price of a call: ``golden_prices`` for the model, else the settings' flat prices;
    None when no price is set or a priced side has no count."""
    p_in = settings.price_per_1k_input
    p_out = settings.price_per_1k_output
    per_model = settings.prices.get(model or settings.model or "")
    if per_model is not None:
        p_in, p_out = per_model
    if p_in is None and p_out is None:
        return None
    cost = 0.0
    for price, tokens in ((p_in, tokens_in), (p_out, tokens_out)):
        if price is None:
            continue
        if tokens is None:
            return None
        cost += tokens / 1000.0 * price
    return cost


def _content_text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list (images are not counted)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text") or "" for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def request_text(request: ProviderRequest) -> str:
    """The text a request sends: every message's content (system, turns, user)."""
    if request.messages is not None:
        return "".join(_content_text(turn.get("content")) for turn in request.messages)
    return request.system + (request.user or "")


def answer_text(answer: Answer) -> str:
    """The text an answer carries: its content and its tool calls (name and arguments)."""
    calls = "".join(
        call.name + json.dumps(call.arguments, ensure_ascii=False, default=str)
        for call in answer.tool_calls
    )
    return (answer.text or "") + calls


def estimate_usage(
    answer: Answer,
    request: ProviderRequest,
    settings: ProviderSettings | None = None,
    model: str | None = None,
) -> None:
    """Give an answer that reports no usage estimated counts (characters / 4 of the request's
    messages and of the answer) and the cost of those at ``settings``' prices; mark it
    estimated. An answer with any reported count is left as it is."""
    if answer.input_tokens is not None or answer.output_tokens is not None:
        return
    answer.input_tokens = estimate_tokens(request_text(request))
    answer.output_tokens = estimate_tokens(answer_text(answer))
    answer.tokens_estimated = True
    if answer.cost is None and settings is not None:
        answer.cost = cost_of(
            settings, answer.input_tokens, answer.output_tokens, model or answer.model
        )


# -- one account for every call of the run ------------------------------------------------------


class Meter:
    """What every live call of a run counts against: one budget, one limiter per server.

    The generation provider, the judge and the embedding clients of one process share it, so
    a judge on the generation server waits for the same slots (``--golden-concurrency``,
    ``--golden-rpm``/``--golden-tpm``) and spends the same ``--golden-max-tokens``.
    """

    def __init__(self, budget: Budget, *, concurrency: int | None = None) -> None:
        self.budget = budget
        #: Calls in flight at most for a server the generation provider does not ask
        #: (``--golden-concurrency``); None: no limiter of their own.
        self.concurrency = concurrency
        self._lock = threading.Lock()
        self._limiters: dict[str, CallLimiter] = {}

    def share(self, provider: Any, make: Callable[[], CallLimiter | None] | None = None) -> None:
        """Give ``provider`` (an HTTP provider: ``base_url`` and ``limiter``) the limiter of its
        server: the one already known for that base URL, else its own (or ``make()``'s), which
        later providers of that server then share."""
        server = getattr(provider, "base_url", None)
        if not isinstance(server, str) or not hasattr(provider, "limiter"):
            return
        with self._lock:
            known = self._limiters.get(server)
            if known is None:
                known = provider.limiter or (make() if make is not None else None)
                if known is None:
                    return
                self._limiters[server] = known
            provider.limiter = known


_METER: Meter | None = None


def install_meter(meter: Meter | None) -> None:
    """Make ``meter`` the process's account (the plugin does, for its session); None: none."""
    global _METER
    _METER = meter


def current_meter() -> Meter | None:
    """The process's account, if a run installed one (embedding clients consult it)."""
    return _METER
