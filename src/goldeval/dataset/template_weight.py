"""How many characters a template value becomes when it is shown as text: the size check the
template budget (:mod:`goldeval.dataset.template_budget`) makes before a container is turned
into text. Pure: no Jinja render state."""

from __future__ import annotations

from collections.abc import ItemsView, KeysView, Sized, ValuesView
from typing import Any

from jinja2.utils import Namespace

__all__ = ["SHOWN_WHOLE", "shown_size", "sized"]

#: What is shown with every item in it (``str()`` of a list, a mapping, a view, a namespace).
SHOWN_WHOLE = (list, tuple, dict, set, frozenset, KeysView, ValuesView, ItemsView, Namespace)


def sized(value: Any) -> int | None:
    return len(value) if isinstance(value, Sized) and not isinstance(value, dict) else None


def shown_size(value: Any, most: int) -> int:
    """How many characters ``value`` becomes when printed, counted exactly until past
    ``most`` (then the count so far): every item of every container, nested and shared ones
    as often as they are shown (``["x" * 10**6] * 10**6`` is a million items but 10**12
    characters; so is a list appended to 3,000 times). Each item shows at least one
    character and a separator, so the count passes ``most`` after at most ``most`` items."""
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
            total += sized(item) or 1
    return total
