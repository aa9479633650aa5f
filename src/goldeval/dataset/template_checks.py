"""What the template budget (:mod:`goldeval.dataset.template_budget`) checks *before* a
construct runs: anything that can allocate much from little, or work long inside one call the
clock cannot look into.

- repetition (``*``), powers (``**``) and big-integer division (``//``, ``%``, the ``round``
  filter, the ``divisibleby`` test): their digits and digit steps, from bit lengths;
- widths of ``%`` / ``format`` / ``center`` / ``ljust`` / ``indent`` / ``tojson(indent=)`` /
  ``int.to_bytes``, ``replace``, ``translate`` and ``join``: what they would build;
- what a value becomes as text, as indented JSON or pretty-printed (weighed with
  :mod:`goldeval.dataset.template_weight`).

Each check takes the render's budget and raises :class:`~goldeval.core.limits.LimitExceeded`;
none reads the render state itself (a second copy of the budget module, as after pytester,
uses these checks with its own budget).
"""

from __future__ import annotations

import codecs
import math
import re
import string
from collections.abc import Iterable, Iterator, Sized
from typing import TYPE_CHECKING, Any

from jinja2.exceptions import SecurityError

from goldeval.core.limits import LimitExceeded
from goldeval.dataset.template_weight import (
    SHOWN_WHOLE,
    division_steps,
    int_digits,
    laid_out_size,
    shown_size,
    sized,
)

if TYPE_CHECKING:
    from goldeval.dataset.template_budget import RenderBudget

#: Filters whose integer arguments are sizes of what they build (a width, a number of parts).
_SIZE_ARGUMENT_FILTERS = frozenset({"center", "slice", "batch"})
#: Filters that neither turn their input into text nor copy its texts (every other one is
#: weighed first: sort, unique, min, max, groupby, dictsort and map lower or convert items).
NOT_SHOWN = frozenset(
    {"length", "count", "first", "last", "list", "reverse", "batch", "slice", "select",
     "reject", "selectattr", "rejectattr", "sum", "items", "attr", "default", "d", "random",
     "abs", "int", "float", "round", "join", "goldeval_loop"}
)  # fmt: skip
#: ``str`` (and ``bytes``) methods whose integer arguments are widths of what they build.
_WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})
#: A printf-style conversion: its width and precision (digits or ``*``).
_PRINTF_SPEC = re.compile(r"%(?:\([^)]*\))?[#0 +\-]*(\*|\d+)?(?:\.(\*|\d+))?")
_DIGITS = re.compile(r"\d+")
#: Steps a call the clock cannot look into may take, per character of ``template_repeat``,
#: so that the longest allowed one takes about as long as the largest power a template may
#: compute (1,000,000 digits: 0.16 s). Python multiplies big integers in about n**1.6 steps
#: but divides them digit by digit: a 1,000,000-digit number by a 10,000-digit one (10**10
#: digit steps) took 0.16 s, 930,000 digits by 477,000 took 4.5 s. ``str.strip(chars)``
#: looks each stripped character up in ``chars``: 100,000 by 100,000 (10**10 comparisons,
#: two-byte characters) took 2.9 s, so 1,000 of them per character (0.3 s at most).
DIVISION_STEPS_PER_CHARACTER = 10_000
STRIP_STEPS_PER_CHARACTER = 1_000
#: Codecs ``str.encode`` / ``bytes.decode`` refuse in a template: pure Python and quadratic in
#: one call (punycode: 5,000 distinct characters encoded in 3 s, 20,000 in 57 s).
_NOT_OFFERED_CODECS = frozenset({"punycode"})


def weigh(budget: RenderBudget, value: Any) -> None:
    """What ``value`` becomes as text, checked before it is built."""
    if isinstance(value, SHOWN_WHOLE):
        budget.check_chars(shown_size(value, budget.max_chars), "a value shown as text")


# -- operators ------------------------------------------------------------------------------


def check_binop(budget: RenderBudget, operator: str, left: Any, right: Any) -> None:
    if operator == "*":
        _check_product(budget, left, right)
    elif operator == "**":
        _check_power(budget, left, right)
    elif operator == "%" and isinstance(left, str):
        _check_printf(budget, left, right if isinstance(right, tuple) else (right,))
    elif operator in ("//", "%"):
        check_division(budget, left, right)
    elif operator == "+":
        a, b = sized(left), sized(right)
        if a is not None and b is not None:
            budget.check_chars(a + b, "the sum")


def _check_product(budget: RenderBudget, left: Any, right: Any) -> None:
    for seq, count in ((left, right), (right, left)):
        size = sized(seq)
        if size is not None and isinstance(count, int):
            shown = shown_size(seq, budget.max_repeat) if count > 0 else 0
            budget.check_repeat(shown * max(count, 0), "the repetition")
            return
    if isinstance(left, int) and isinstance(right, int):
        digits = (abs(left).bit_length() + abs(right).bit_length()) * math.log10(2)
        budget.check_repeat(int(digits), "the product's digits")


def _check_power(budget: RenderBudget, base: Any, exponent: Any) -> None:
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        budget.check_repeat(int(exponent * math.log10(abs(base))), "the power's digits")


def check_division(budget: RenderBudget, dividend: Any, divisor: Any) -> None:
    """``dividend // divisor`` (or ``%``) of integers, refused when its digit steps would take
    longer than :data:`DIVISION_STEPS_PER_CHARACTER` × ``template_repeat``: one call of
    seconds the clock cannot stop."""
    if isinstance(dividend, int) and isinstance(divisor, int) and divisor:
        _check_division_digits(budget, int_digits(dividend), int_digits(divisor))


def _check_division_digits(budget: RenderBudget, dividend: int, divisor: int) -> None:
    what = f"dividing a {dividend:,}-digit integer by a {divisor:,}-digit one"
    steps = division_steps(dividend, divisor)
    _check_steps(budget, steps, DIVISION_STEPS_PER_CHARACTER, what, "digit steps")


def _check_steps(
    budget: RenderBudget, steps: int, per_character: int, what: str, unit: str
) -> None:
    """One call of ``steps`` steps the clock cannot look into, refused past ``per_character``
    × ``template_repeat``."""
    most = budget.max_repeat * per_character
    if steps > most:
        raise LimitExceeded(
            "template_repeat",
            f"{what} would take {steps:,} {unit}, over the limit of {most:,} "
            f"({per_character:,} per character of the repeat limit)",
        )


def _check_strip(budget: RenderBudget, size: int, chars: Any, what: str) -> None:
    """``strip(chars)`` over ``size`` characters: each one stripped is looked up in ``chars``
    (quadratic: ``('a' * 10**6).strip('b' * 10**6 + 'a')``)."""
    if isinstance(chars, (str, bytes)):
        _check_steps(budget, size * len(chars), STRIP_STEPS_PER_CHARACTER, what, "comparisons")


# -- widths and formats ---------------------------------------------------------------------


def _check_int_args(budget: RenderBudget, args: Iterable[Any], what: str) -> None:
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool):
            budget.check_repeat(abs(arg), what)


def _check_printf(budget: RenderBudget, fmt: str, args: Iterable[Any]) -> None:
    """Widths and precisions of ``fmt % args`` (``%*d`` takes them from ``args``)."""
    args = list(args)
    _check_fields(budget, fmt, len(_PRINTF_SPEC.findall(fmt)), args)
    star = False
    for match in _PRINTF_SPEC.finditer(fmt):
        for part in match.groups():
            if part == "*":
                star = True
            elif part is not None:
                budget.check_repeat(int(part), "a width in the format")
    if star:
        _check_int_args(budget, args, "a width in the format")


def _check_str_format(budget: RenderBudget, fmt: str, args: Iterable[Any]) -> None:
    """Widths of ``fmt.format(...)``; a nested width (``{:>{w}}``) takes them from ``args``."""
    args = list(args)
    try:
        fields = list(string.Formatter().parse(fmt))
    except ValueError:
        return  # str.format raises the same error itself
    _check_fields(budget, fmt, sum(name is not None for _, name, _, _ in fields), args)
    for _, _, spec, _ in fields:
        if not spec:
            continue
        if "{" in spec:
            # a nested width may come from a mapping, an index or a digit string too
            # ("{a:{w}}".format_map({"w": 10**9}) built 1 GB before the output check)
            _check_int_args(budget, _numbers_in(args), "a width in the format")
        for digits in _DIGITS.findall(spec):
            budget.check_repeat(int(digits), "a width in the format")


def _check_fields(budget: RenderBudget, fmt: str, fields: int, args: list[Any]) -> None:
    """A format of ``fields`` fields may show its largest argument in each of them
    (``("{0}" * 3000).format(big)`` built 3 GB before the output was checked)."""
    if not fields:
        return
    values = [v for a in args for v in (a.values() if isinstance(a, dict) else [a])]
    largest = max((shown_size(v, budget.max_chars) for v in values), default=0)
    budget.check_chars(len(fmt) + fields * largest, "the formatted text")


def _numbers_in(args: Iterable[Any]) -> Iterator[int]:
    """The integers of ``args``, of their mappings and sequences (one level), and of their
    digit strings: what a nested format field can name."""
    for arg in args:
        items: Iterable[Any] = (
            arg.values()
            if isinstance(arg, dict)
            else arg
            if isinstance(arg, (list, tuple))
            else [arg]
        )
        for item in items:
            if isinstance(item, str) and item.strip().isdigit() and len(item) < 20:
                yield int(item)
            elif isinstance(item, int) and not isinstance(item, bool):
                yield item


def _check_replace(budget: RenderBudget, text: Any, old: Any, new: Any) -> None:
    texts = (text, old, new)
    if all(isinstance(v, str) for v in texts) or all(isinstance(v, bytes) for v in texts):
        if len(new) > len(old):
            hits = text.count(old) if old else len(text) + 1
            budget.check_chars(len(text) + hits * (len(new) - len(old)), "the replacement")


def _check_translate(budget: RenderBudget, text: str, table: Any) -> None:
    """``str.translate``: each character may become the table's longest replacement
    (``('a' * 1000).translate({97: 'b' * 10**6})`` built 1 GB before the output check)."""
    values: Iterable[Any] = ()
    if isinstance(table, dict):
        values = table.values()
    elif isinstance(table, (list, tuple)):
        values = table
    longest = max((len(v) for v in values if isinstance(v, str)), default=1)
    budget.check_chars(len(text) * longest, "str.translate()")


def listed(budget: RenderBudget, items: Any) -> Any:
    """``items`` as they are when sized, else as a list, each item counted as an iteration."""
    if isinstance(items, Sized):
        return items
    out = []
    for item in items:
        budget.iterate()
        out.append(item)
    return out


def _joined(budget: RenderBudget, items: Any, separator: Any) -> Any:
    """``items`` as a list when they are not sized (counted), after checking that joining
    them with ``separator`` stays within the output limit."""
    items = listed(budget, items)
    if isinstance(separator, (str, bytes)):
        joined = len(items) * len(separator) + shown_size(list(items), budget.max_chars)
        budget.check_chars(joined, "the join")
    return items


# -- filters, tests and methods -------------------------------------------------------------


def check_filter(
    budget: RenderBudget, name: str, args: list[Any], offset: int, kwargs: dict[str, Any]
) -> list[Any]:
    """The filter ``name``'s arguments checked (``offset``: how many arguments Jinja passes
    first); returns them, a ``join``'s items listed when they were not sized."""
    rest = args[offset + 1 :]
    value = args[offset] if len(args) > offset else None
    if name not in NOT_SHOWN:
        weigh(budget, value)
    if name in _SIZE_ARGUMENT_FILTERS:
        _check_int_args(budget, [*rest, *kwargs.values()], f"the {name} filter")
    elif name == "indent":
        width = kwargs.get("width", rest[0] if rest else 4)
        step = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
        if isinstance(value, str):
            budget.check_repeat((value.count("\n") + 1) * step, "the indent filter")
    elif name == "format" and isinstance(value, str):
        _check_printf(budget, value, [*rest, *kwargs.values()])
    elif name == "replace" and len(rest) >= 2:
        _check_replace(budget, value, rest[0], rest[1])
    elif name == "join" and len(args) > offset:
        separator = kwargs.get("d", rest[0] if rest else "")
        args[offset] = _joined(budget, value, separator)
    elif name == "tojson":
        _check_tojson(budget, value, kwargs.get("indent", rest[0] if rest else None))
    elif name == "pprint":
        size = laid_out_size(value, budget.max_chars, pretty=True)
        budget.check_chars(size, "the pprint filter's text (each level shown again, indented)")
    elif name == "trim" and isinstance(value, str):
        _check_strip(
            budget, len(value), kwargs.get("chars", rest[0] if rest else None), "the trim filter"
        )
    elif name == "round":
        precision = kwargs.get("precision", rest[0] if rest else 0)
        _check_round(budget, value, precision, kwargs.get("method", [*rest, "", ""][1]))
    return args


def _check_tojson(budget: RenderBudget, value: Any, indent: Any) -> None:
    """``tojson(indent=...)``: the padding (a count or a string) is a repetition, and every
    item gets its depth × the padding (``range(3000)|list|tojson(indent=10**6)``: 2.9 GB)."""
    if isinstance(indent, str):
        width = len(indent)
    elif isinstance(indent, int):
        width = max(indent, 0)
    else:
        return  # no indent (or one json.dumps refuses itself)
    budget.check_repeat(width, "the tojson filter's indent")
    size = laid_out_size(value, budget.max_chars, indent=width)
    budget.check_chars(size, "the indented JSON")


def _check_round(budget: RenderBudget, value: Any, precision: Any, method: Any) -> None:
    """``round(precision, method)`` computes ``10 ** precision``; an integer rounded to tens
    is divided by it, one rounded up or down multiplied (``1|round(-10**9)`` never ended)."""
    if not isinstance(precision, int) or isinstance(precision, bool):
        return
    budget.check_repeat(abs(precision), "the round filter's power of ten")
    if not isinstance(value, int):
        return
    if method in ("ceil", "floor"):
        budget.check_repeat(int_digits(value) + max(precision, 0), "the round filter's digits")
    elif precision < 0:
        _check_division_digits(budget, int_digits(value), -precision + 1)


def _check_codec(encoding: Any) -> None:
    try:
        name = codecs.lookup(encoding).name if isinstance(encoding, str) else ""
    except LookupError:
        return  # the call raises it itself
    if name in _NOT_OFFERED_CODECS:
        raise SecurityError(
            f"the {name} codec is not offered in templates (quadratic inside one call)"
        )


def check_test(budget: RenderBudget, name: str, args: tuple[Any, ...], kwargs: Any) -> None:
    """A test's arguments (``divisibleby`` divides)."""
    if name == "divisibleby" and args:
        check_division(budget, args[0], kwargs.get("num", args[1] if len(args) > 1 else None))


def check_method(
    budget: RenderBudget, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    """Checks of a call of a ``str``, ``bytes`` or ``int`` method (or the sandbox's
    ``str.format`` wrapper); returns the arguments (a ``join``'s items listed)."""
    target = getattr(obj, "__wrapped__", obj)
    receiver = getattr(target, "__self__", None)
    method = getattr(target, "__name__", "")
    options = [*args, *kwargs.values()]
    if isinstance(receiver, int) and method == "to_bytes":
        length = kwargs.get("length", args[0] if args else 1)
        _check_int_args(budget, [length], "int.to_bytes()")  # the length, in bytes
    if not isinstance(receiver, (str, bytes)):
        return args
    kind = "str" if isinstance(receiver, str) else "bytes"  # Markup's methods too
    if method == "expandtabs":
        # Every tab becomes up to ``tabsize`` spaces: 1,500 tabs at 1,000,000 built 1.5
        # billion characters before the output limit looked (each argument was in range).
        size = [*options, 8][0]
        if isinstance(size, int) and not isinstance(size, bool):
            tabs = receiver.count("\t") if isinstance(receiver, str) else receiver.count(b"\t")
            budget.check_repeat(len(receiver) + tabs * max(size, 0), f"{kind}.expandtabs()")
    if method in _WIDTH_METHODS:
        _check_int_args(budget, options, f"{kind}.{method}()")
    elif method in ("format", "format_map") and isinstance(receiver, str):
        _check_str_format(budget, receiver, options)
    elif method in ("strip", "lstrip", "rstrip") and options:
        _check_strip(budget, len(receiver), options[0], f"{kind}.{method}()")
    elif method in ("encode", "decode"):
        _check_codec(kwargs.get("encoding", args[0] if args else "utf-8"))
    elif method == "translate" and isinstance(receiver, str) and options:
        _check_translate(budget, receiver, options[0])
    elif method == "replace" and len(args) >= 2:
        _check_replace(budget, receiver, args[0], args[1])
    elif method == "join" and args:
        args = (_joined(budget, args[0], receiver), *args[1:])
    return args
