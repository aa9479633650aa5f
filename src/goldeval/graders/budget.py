"""A time budget for graders that evaluate user-written regular expressions.

A row's pattern such as ``^(\\w+\\s?)*$`` backtracks catastrophically on 40 word characters
followed by ``!``: :mod:`re` then runs for hours, holding the GIL, and neither a pytest
timeout nor ``--golden-deadline`` can stop it (a deadline only stops *starting* attempts).
So every pattern that comes from a row or a manifest (``expect.regex`` / ``not_regex``,
``json_schema`` ``pattern`` / ``patternProperties``, the ``cites`` pattern, the contract's
``tests_class_pattern``) is evaluated with the `regex <https://pypi.org/project/regex/>`_
engine in its ``re``-compatible mode (``VERSION0``), whose matcher takes a ``timeout``.

The budget is per grader call: each grader of an attempt may spend at most
:func:`grader_timeout` seconds (``GOLDEVAL_GRADER_TIMEOUT``, default
:data:`DEFAULT_GRADER_TIMEOUT`) in its pattern evaluations together. Over budget,
:class:`GraderTimeout` is raised; the pipeline turns it into an ERROR attempt with
``errorKind: GRADER_TIMEOUT``, a kind that a retry cannot fix (the run exits 4): a pattern that
explodes on this answer explodes on every rerun.

This module is pure: no pytest.
"""

from __future__ import annotations

import functools
import math
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

import regex

__all__ = [
    "DEFAULT_GRADER_TIMEOUT",
    "ENV_GRADER_TIMEOUT",
    "GraderTimeout",
    "budget",
    "check_time",
    "compile_pattern",
    "finditer",
    "grader_timeout",
    "pattern_error",
    "search",
]

#: Seconds one grader may spend evaluating patterns for one attempt. Generous for sane patterns
#: on a 1 MB answer (milliseconds), short enough that a pathological one costs little.
DEFAULT_GRADER_TIMEOUT = 2.0
ENV_GRADER_TIMEOUT = "GOLDEVAL_GRADER_TIMEOUT"

T = TypeVar("T")

_local = threading.local()


class GraderTimeout(Exception):
    """A grader ran over its time budget (in a pattern evaluation)."""

    def __init__(self, grader: str, pattern: str, seconds: float, doing: str = "") -> None:
        shown = pattern if len(pattern) <= 80 else pattern[:77] + "..."
        super().__init__(
            f"grader {grader} ran over its {seconds:g}s time budget {doing}; make it simpler, "
            f"or raise {ENV_GRADER_TIMEOUT}"
            if doing
            else f"grader {grader} ran over its {seconds:g}s time budget evaluating /{shown}/ "
            "(catastrophic backtracking?): make the pattern specific, e.g. no nested "
            f"quantifiers such as (a+)+, or raise {ENV_GRADER_TIMEOUT}"
        )
        self.grader = grader
        self.pattern = pattern
        self.seconds = seconds


def grader_timeout() -> float:
    """The budget in seconds: ``GOLDEVAL_GRADER_TIMEOUT`` when it is a positive number."""
    raw = os.environ.get(ENV_GRADER_TIMEOUT, "").strip()
    if raw:
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value > 0:
            return value
    return DEFAULT_GRADER_TIMEOUT


class budget:  # lower case: used as ``with budget(name):``, like a function
    """Run one grader call under a budget shared by all its pattern evaluations.

    A class rather than a ``@contextmanager`` generator: it wraps every grader call of every
    attempt, where the generator's set-up was a measurable share of grading.
    """

    __slots__ = ("grader", "previous", "seconds")

    def __init__(self, grader: str, seconds: float | None = None) -> None:
        self.grader = grader
        self.seconds = seconds
        self.previous: tuple[str, float, float] | None = None

    def __enter__(self) -> None:
        limit = grader_timeout() if self.seconds is None else self.seconds
        self.previous = getattr(_local, "state", None)
        _local.state = (self.grader, limit, time.monotonic() + limit)

    def __exit__(self, *exc_info: object) -> None:
        _local.state = self.previous


def _left(grader: str) -> tuple[str, float, float]:
    """(grader name, budget, seconds left); outside :func:`budget`, one budget per call."""
    state = getattr(_local, "state", None)
    if state is None:
        limit = grader_timeout()
        return grader, limit, limit
    name, limit, deadline = state
    return name, limit, deadline - time.monotonic()


#: ``re`` flag -> ``regex`` flag: the two modules number them differently (``re.ASCII`` is 256,
#: which ``regex`` reads as VERSION1).
_FLAGS = (
    (re.ASCII, regex.ASCII),
    (re.IGNORECASE, regex.IGNORECASE),
    (re.MULTILINE, regex.MULTILINE),
    (re.DOTALL, regex.DOTALL),
    (re.VERBOSE, regex.VERBOSE),
    (re.UNICODE, regex.UNICODE),
)


@functools.lru_cache(maxsize=4096)
def compile_pattern(pattern: str, flags: int = 0) -> Any:
    """``pattern`` compiled by the ``regex`` engine in its ``re``-compatible mode.

    ``flags`` are :mod:`re` flags (``re.ASCII``, ...), translated for ``regex``.
    """
    unknown = flags & ~sum(int(f) for f, _ in _FLAGS)
    if unknown:
        raise ValueError(f"unsupported re flags {unknown:#x}")
    translated = regex.VERSION0
    for re_flag, regex_flag in _FLAGS:
        if flags & re_flag:
            translated |= regex_flag
    return regex.compile(pattern, translated)


def _compiled(pattern: str, flags: int) -> Any:
    """The budgeted engine's pattern; None for the rare pattern only :mod:`re` accepts (row
    patterns are checked against both at load, see :func:`pattern_error`; a manifest's
    contract pattern is checked by :mod:`re` only), which then runs unbudgeted as before."""
    try:
        return compile_pattern(pattern, flags)
    except (regex.error, RecursionError, OverflowError, ValueError):
        return None


def pattern_error(pattern: str, flags: int = 0) -> str | None:
    """Why ``pattern`` cannot be used (by :mod:`re` or by the budgeted engine), else None."""
    try:
        re.compile(pattern, flags)
        compile_pattern(pattern, flags)
    except (re.error, regex.error, RecursionError, OverflowError, ValueError, TypeError) as exc:
        return str(exc)
    return None


def check_time(grader: str, doing: str) -> None:
    """GraderTimeout when the grader's budget is spent: for work that is no single pattern
    (a JSON schema's validation, keyword by keyword), checked as it goes."""
    name, limit, left = _left(grader)
    if left <= 0:
        raise GraderTimeout(name, "", limit, doing)


def each(items: Iterable[T], *, grader: str, doing: str) -> Iterator[T]:
    """``items``, the grader's budget checked before each: for loops whose every step scans
    the answer (a row's needles, banned strings, ignored paths). 1,500 needles on a 15 MiB
    answer took 17 s and 9,000 took 112 s, with no budget: each ``in`` is one scan."""
    for item in items:
        check_time(grader, doing)
        yield item


def search(pattern: str, text: str, *, grader: str, flags: int = 0) -> Any:
    """``re.search`` within the budget: a match object or None; GraderTimeout when over."""
    name, limit, left = _left(grader)
    if left <= 0:
        raise GraderTimeout(name, pattern, limit)
    compiled = _compiled(pattern, flags)
    if compiled is None:
        return re.search(pattern, text, flags)
    try:
        return compiled.search(text, timeout=left)
    except TimeoutError:
        raise GraderTimeout(name, pattern, limit) from None


def finditer(pattern: str, text: str, *, grader: str, flags: int = 0) -> list[Any]:
    """All matches (as ``re.finditer`` gives them) within the budget, as a list."""
    name, limit, left = _left(grader)
    if left <= 0:
        raise GraderTimeout(name, pattern, limit)
    compiled = _compiled(pattern, flags)
    if compiled is None:
        return list(re.finditer(pattern, text, flags))
    try:
        return list(compiled.finditer(text, timeout=left))
    except TimeoutError:
        raise GraderTimeout(name, pattern, limit) from None
