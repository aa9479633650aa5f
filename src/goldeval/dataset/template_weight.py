"""How many characters a template value becomes when it is shown as text, laid out as JSON or
pretty-printed, and how many steps a big-integer division takes: the weights the template
budget (:mod:`goldeval.dataset.template_budget`) checks before a container is turned into text
or a division runs. Pure: no Jinja render state."""

from __future__ import annotations

import math
from collections.abc import ItemsView, KeysView, Sized, ValuesView
from typing import Any

from jinja2.utils import Namespace

__all__ = ["SHOWN_WHOLE", "division_steps", "int_digits", "laid_out_size", "shown_size", "sized"]

#: What is shown with every item in it (``str()`` of a list, a mapping, a view, a namespace).
SHOWN_WHOLE = (list, tuple, dict, set, frozenset, KeysView, ValuesView, ItemsView, Namespace)
_LOG10_2 = math.log10(2)


def sized(value: Any) -> int | None:
    return len(value) if isinstance(value, Sized) and not isinstance(value, dict) else None


def shown_size(value: Any, most: int) -> int:
    """How many characters ``value`` becomes when printed, counted exactly until past
    ``most`` (then the count so far): every item of every container, nested and shared ones
    as often as they are shown (``["x" * 10**6] * 10**6`` is a million items but 10**12
    characters; so is a list appended to 3,000 times). Each item shows at least one
    character and a separator, so the count passes ``most`` after at most ``most`` items.
    (:func:`laid_out_size` without its layout, kept apart: this one runs for every output.)"""
    total = 0
    stack = [value]
    while stack and total <= most:
        item = stack.pop()
        if isinstance(item, (str, bytes)):
            total += len(item)
        elif isinstance(item, Namespace):  # shown as <Namespace {...}>
            stack.append(object.__getattribute__(item, "_Namespace__attrs"))
        elif isinstance(item, dict):
            total += 2 + 4 * len(item)
            if total <= most:
                stack.extend(item.keys())
                stack.extend(item.values())
        elif isinstance(item, SHOWN_WHOLE):
            total += 2 + 2 * len(item)
            if total <= most:
                stack.extend(item)
        else:
            total += _scalar_size(item)
    return total


def laid_out_size(value: Any, most: int, *, indent: int | None = None, pretty: bool = False) -> int:
    """:func:`shown_size`, or with ``indent`` the size of ``value`` laid out one item a line
    (``json.dumps(indent=...)``: every item on its own line, ``indent`` characters more for
    each level it is nested), or with ``pretty`` what :func:`pprint.pformat` writes and reads:
    an item nested ``n`` deep is shown again by each of its ``n`` containers (each one's
    ``repr`` is measured whole before it is laid out) and indented by its containers' keys
    (``{"k" * 10**5: long_list}`` indents every line of the list by 100,000 spaces).
    Counted until past ``most``."""
    lined = indent is not None or pretty
    step = 1 if pretty else max(indent or 0, 0)
    total = 0
    stack: list[tuple[Any, int, int]] = [(value, 0, 1)]  # (item, its indentation, its depth)
    while stack and total <= most:
        item, pad, depth = stack.pop()
        if isinstance(item, Namespace):  # shown as <Namespace {...}>
            item = object.__getattribute__(item, "_Namespace__attrs")
        own, children = _own_size(item)
        total += own * (depth if pretty else 1) + (pad + 1 if lined else 0)
        if children is None or total > most:
            continue
        if isinstance(item, dict):
            for key, child in item.items():
                key_pad = shown_size(key, most) + 4 if pretty else 0  # "'key': "
                stack.append((key, pad + step, depth + 1))
                stack.append((child, pad + step + key_pad, depth + 1))
        else:
            stack.extend((child, pad + step, depth + 1) for child in children)
    return total


def _own_size(item: Any) -> tuple[int, Any]:
    """The characters ``item`` shows itself (brackets, separators, its text) and the items
    it shows inside (None when it has none)."""
    if isinstance(item, (str, bytes)):
        return len(item), None
    if isinstance(item, dict):
        return 2 + 4 * len(item), item
    if isinstance(item, SHOWN_WHOLE):
        return 2 + 2 * len(item), item
    return _scalar_size(item), None


def _scalar_size(item: Any) -> int:
    """What an item with no items shown inside it shows: an integer its digits (up to 4,300
    each: ``[7**4700] * 200000`` was 800 MB shown), a float its ``repr``."""
    if isinstance(item, int) and not isinstance(item, bool):
        return int_digits(item)
    if isinstance(item, (float, bool)):
        return len(repr(item))
    return sized(item) or 1


def int_digits(number: int) -> int:
    """About how many decimal digits ``number`` has (from its bit length: no conversion)."""
    return int(abs(number).bit_length() * _LOG10_2) + 1


def division_steps(dividend_digits: int, divisor_digits: int) -> int:
    """The digit steps of dividing a number of ``dividend_digits`` digits by one of
    ``divisor_digits`` (``//``, ``%``): Python divides big integers digit by digit, each digit
    of the quotient a pass over the divisor (quadratic, unlike its multiplication)."""
    return max(dividend_digits - divisor_digits + 1, 0) * divisor_digits
