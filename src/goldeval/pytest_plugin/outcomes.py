"""pytest outcomes raised in a provider, retriever, grader or judge call → the attempt outcome.

``pytest.fail()``, ``pytest.skip()`` and pytest-timeout's signal method (``pytest.fail`` from
its SIGALRM handler, raised wherever the main thread is) raise pytest's ``OutcomeException``,
which derives from ``BaseException``: the providers' and the pipeline's ``except Exception``
let it by, and it used to end the item in pytest's own way, far from the attempt. Here it ends
THAT attempt: a timeout is ERROR ``TIMEOUT``, ``pytest.fail`` is ERROR (``PROVIDER_RAISED`` in
a provider) with its message, ``pytest.skip`` is SKIPPED (never a pass).

The pipeline, which may not import pytest, turns what it does not know into a ProviderError
chained to it (``raise ... from exc``); :func:`attempt_outcome` looks through that chain too.

pytest-timeout's thread method cannot be handled here: it dumps the stacks and ends the whole
process (``os._exit``). Serially nothing is written; under xdist the item is lost with its
worker and the controller records it as ERROR ``WORKER_CRASH`` (docs/reliability.md).
"""

from __future__ import annotations

import re

import pytest

from goldeval.core.errors import ProviderError
from goldeval.core.textsafe import cut, one_line
from goldeval.pipeline.orchestration import SkippedByOutcome

# SkippedByOutcome lives with the runner (goldeval.pipeline.orchestration) and is named here too.
__all__ = [
    "ENDS_ATTEMPT",
    "FAILED_KINDS",
    "PYTEST_OUTCOMES",
    "SkippedByOutcome",
    "attempt_outcome",
    "error_kind_of",
    "pytest_outcome_in",
]

#: What pytest raises for pytest.fail (pytest.xfail and pytest-timeout too) and pytest.skip.
PYTEST_OUTCOMES: tuple[type[BaseException], ...] = (pytest.fail.Exception, pytest.skip.Exception)
#: What ends an attempt as ERROR or SKIPPED around a call: a ProviderError or a pytest outcome.
ENDS_ATTEMPT: tuple[type[BaseException], ...] = (ProviderError, *PYTEST_OUTCOMES)

#: pytest-timeout's failure text, "Timeout (>2.0s) from pytest-timeout." (its signal method).
_TIMEOUT = re.compile(r"^Timeout \(>[^)]*\) from pytest-timeout")

#: The ERROR kind of a ``pytest.fail`` per surface (a timeout is TIMEOUT wherever it fires).
FAILED_KINDS = {
    "provider": "PROVIDER_RAISED",
    "retriever": "RETRIEVER_ERROR",
    "grader": "GRADER_ERROR",
    "judge": "PROVIDER_RAISED",  # recorded as the judge's fault: JUDGE_ERROR: PROVIDER_RAISED
}


def error_kind_of(message: str, default: str) -> str:
    """TIMEOUT for pytest-timeout's failure (a hang is infrastructure, like a provider
    timeout), else ``default``."""
    return "TIMEOUT" if _TIMEOUT.match(message) else default


def pytest_outcome_in(exc: BaseException) -> BaseException | None:
    """The pytest outcome ``exc`` is, or the one it was raised from (a few links deep)."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return None
        if isinstance(seen, PYTEST_OUTCOMES):
            return seen
        seen = seen.__cause__
    return None


def attempt_outcome(exc: BaseException, surface: str) -> ProviderError | SkippedByOutcome | None:
    """What a pytest outcome raised during the ``surface`` call makes of the attempt, or None
    when ``exc`` is not (and was not raised from) one."""
    outcome = pytest_outcome_in(exc)
    if outcome is None:
        return None
    text = one_line(getattr(outcome, "msg", None) or str(outcome) or type(outcome).__name__)
    if isinstance(outcome, pytest.skip.Exception):
        return SkippedByOutcome(cut(f"the {surface} called pytest.skip: {text}", 500))
    if _TIMEOUT.match(text):
        return ProviderError("TIMEOUT", f"{text} (it fired during the {surface} call)")
    return ProviderError(FAILED_KINDS[surface], f"the {surface} called pytest.fail: {text}")
