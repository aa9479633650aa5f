"""The provider interface shared by fixtures, HTTP models and plain callables."""

from __future__ import annotations

import abc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from goldeval.errors import ProviderError

if TYPE_CHECKING:
    from goldeval.cases import GoldenCase


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def dump(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments}


@dataclass
class Answer:
    """What a provider returned for one attempt."""

    text: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    duration_ms: int = 0
    tries: int = 1
    model: str | None = None
    #: Set by the plugin: the pytest item this answer belongs to and the (pipeline, param)
    #: that grade it (not part of the API).
    _item: Any = field(default=None, repr=False, compare=False)
    _graded_with: Any = field(default=None, repr=False, compare=False)


class ProviderRequest:
    """One generation call: the assembled messages plus the case they came from.

    ``system`` may be given as a callable: the system prompt is then assembled on first
    access, so a provider that never reads it (fixture replay) does not pay for it.
    """

    __slots__ = ("_system", "attempt", "case", "model", "options", "retrieved", "user")

    def __init__(
        self,
        case: GoldenCase,
        attempt: int,
        system: str | Callable[[], str],
        user: str,
        model: str | None,
        retrieved: list[str],
        options: dict[str, Any] | None = None,
    ) -> None:
        self.case = case
        self.attempt = attempt
        self._system = system
        self.user = user
        self.model = model
        self.retrieved = retrieved
        self.options: dict[str, Any] = {} if options is None else options

    @property
    def system(self) -> str:
        if not isinstance(self._system, str):
            self._system = self._system()
        return self._system

    def __repr__(self) -> str:
        return (
            f"ProviderRequest(case={self.case.id!r}, attempt={self.attempt}, "
            f"model={self.model!r}, retrieved={self.retrieved!r})"
        )


class Provider(abc.ABC):
    """Base class. ``complete`` must raise :class:`ProviderError` for infrastructure faults."""

    name: str = ""
    #: Whether calls may run concurrently from several threads (HTTP providers: yes).
    thread_safe: bool = True

    @abc.abstractmethod
    def complete(self, request: ProviderRequest) -> Answer: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release pooled connections."""


class CallableProvider(Provider):
    """A plain Python callable ``case -> str | Answer`` (the team's own app) as a provider."""

    name = "callable"

    def __init__(self, func: Callable[..., Any], *, thread_safe: bool = False) -> None:
        self.func = func
        self.thread_safe = thread_safe
        self.name = getattr(func, "__name__", "callable")

    def complete(self, request: ProviderRequest) -> Answer:
        start = time.perf_counter()
        try:
            value = self.func(request.case)
        except ProviderError:
            raise
        except Exception as exc:  # the app crashed: that's an infrastructure error, not a FAIL
            raise ProviderError(
                "PROVIDER_ERROR", f"{type(exc).__name__} in {self.name}: {exc}"
            ) from exc
        elapsed = max(1, round((time.perf_counter() - start) * 1000))
        if isinstance(value, Answer):
            if not value.duration_ms:
                value.duration_ms = elapsed
            return value
        if value is None:
            raise ProviderError("EMPTY_RESPONSE", f"{self.name} returned None")
        return Answer(text=str(value), duration_ms=elapsed)


def as_provider(value: Any) -> Provider:
    """Accept a Provider instance or a plain callable (what a conftest fixture may return)."""
    if isinstance(value, Provider):
        return value
    if callable(value):
        return CallableProvider(value)
    raise TypeError(
        f"golden_provider must return a goldeval Provider or a callable, got {type(value).__name__}"
    )
