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

from goldeval.core.limits import default

try:  # the stdlib's parser: a pattern's structure without compiling it
    import re._parser as _sre_parse  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # Python 3.10
    import sre_parse as _sre_parse  # type: ignore[no-redef, unused-ignore]

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


_REPEATS = frozenset({"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"})
_COUNTED_REPEAT = re.compile(r"\{(\d+)(?:,\d*)?\}")


def _units(items: Any, most: int) -> int:
    """What a parsed pattern compiles to, in units: the ``regex`` engine writes a repeat's
    body out as many times as its minimum count (``a{1000}`` is 1,000 units, ``a{1,1000}``
    one), so nested counts multiply. Stops counting past ``most``."""
    total = 0
    for op, av in items:
        name = str(op)
        if name in _REPEATS:
            total += max(1, int(av[0])) * _units(av[2], most)
        elif name in ("SUBPATTERN", "ATOMIC_GROUP"):
            total += _units(av[-1], most)
        elif name == "BRANCH":
            total += sum(_units(branch, most) for branch in av[1])
        elif name in ("ASSERT", "ASSERT_NOT"):
            total += _units(av[1], most)
        elif name == "GROUPREF_EXISTS":
            total += sum(_units(branch, most) for branch in av[1:] if branch is not None)
        else:
            total += 1
        if total > most:
            return total
    return total


def _check_units(pattern: str, flags: int) -> None:
    """ValueError when ``pattern`` compiles to more than ``pattern_units``: the ``regex``
    engine expands exact repeat counts, so ``(?:(?:a{1000}){1000}){1000}`` took 2.8 GB and a
    MemoryError (an INTERNALERROR at collection, "retry the run" for an answer's
    ``format: regex``). A pattern only ``regex`` parses is weighed by the product of its
    counts (over-counts repeats side by side: refused, never under-counted)."""
    most = int(default("pattern_units"))
    try:
        units = _units(_sre_parse.parse(pattern, flags), most)
    except (re.error, RecursionError, OverflowError, ValueError, TypeError):
        units = 1
        for count in _COUNTED_REPEAT.findall(pattern):
            units *= max(1, min(int(count), most + 1))
            if units > most:
                break
    if units > most:
        raise ValueError(
            f"the pattern compiles to more than {most:,} units (its repeat counts multiply; "
            "the pattern_units limit): use smaller counts, or + and * for long runs"
        )


@functools.lru_cache(maxsize=4096)
def compile_pattern(pattern: str, flags: int = 0) -> Any:
    """``pattern`` compiled by the ``regex`` engine in its ``re``-compatible mode, refused
    (ValueError) when it would compile to more than ``pattern_units``.

    ``flags`` are :mod:`re` flags (``re.ASCII``, ...), translated for ``regex``.
    """
    unknown = flags & ~sum(int(f) for f, _ in _FLAGS)
    if unknown:
        raise ValueError(f"unsupported re flags {unknown:#x}")
    _check_units(pattern, flags)
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
    except (regex.error, RecursionError, OverflowError, ValueError, MemoryError):
        return None


#: Texts every answer-like text shares nothing with: empty, a letter, a line break, words
#: with digits and punctuation, other scripts. A pattern found in all of them is found in any.
_UNRELATED_TEXTS = ("", "x", "\n", "COMPLETELY WRONG ANSWER 42.\n", "\u00e9\u4e2d\t")


def matches_any_text(pattern: str) -> bool:
    """Whether ``pattern`` is found in any text (``""``, ``|``, ``.*``, ``(?i)``): found in
    the empty text and in each of a few unrelated ones. A row's ``regex`` of that kind passes
    whatever the answer; a ``not_regex`` fails every answer. Searched with a short timeout
    (the texts are a few characters): a pattern that runs past it is not called one."""
    compiled = _compiled(pattern, 0)
    if compiled is None:
        return False
    try:
        return all(compiled.search(text, timeout=0.5) is not None for text in _UNRELATED_TEXTS)
    except TimeoutError:
        return False


def pattern_error(pattern: str, flags: int = 0) -> str | None:
    """Why ``pattern`` cannot be used (by :mod:`re` or by the budgeted engine), else None."""
    try:
        compile_pattern(pattern, flags)  # first: it refuses what would compile too large
        re.compile(pattern, flags)
    except (re.error, regex.error, RecursionError, OverflowError, ValueError, TypeError) as exc:
        return str(exc)
    except MemoryError:
        return "the pattern is too large to compile"
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
