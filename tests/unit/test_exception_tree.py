"""The exception tree in goldeval.core.errors' docstring is the code's (issue 34: "a small
exception tree documented in one module, like httpx's _exceptions.py").

Every exception class defined in src/goldeval is imported and looked up in the drawn tree:
a new class that is not drawn, a drawn class that no longer exists, or a class drawn under
the wrong parent fails here.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import goldeval
from goldeval.core import errors

#: Classes that are signals inside one module, named in the docstring's last paragraph.
INTERNAL = {"_DuplicateKey", "Drop"}

_TREE_LINE = re.compile(r"^    (?P<indent>(?:[│ ]   |[├└]── )*)(?P<name>[A-Z_]\w+)\b")


def _defined_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(goldeval.__path__, "goldeval."):
        if info.name.endswith(".__main__"):  # a command line: importing it runs it
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
            ):
                found[value.__name__] = value
    return found


def _drawn_tree() -> dict[str, set[str]]:
    """name → the parents it is drawn under (None-free: roots map to an empty set)."""
    doc = errors.__doc__ or ""
    block = doc.split("::", 1)[1].split("\n\n", 2)[1]
    parents: dict[str, set[str]] = {}
    stack: list[str] = []
    for line in block.splitlines():
        match = _TREE_LINE.match(line)
        if match is None:
            continue
        depth = len(match.group("indent")) // 4
        name = match.group("name")
        del stack[depth:]
        parents.setdefault(name, set())
        if stack:
            parents[name].add(stack[-1])
        stack.append(name)
    return parents


def test_every_exception_class_is_drawn_under_its_parents() -> None:
    defined = _defined_exceptions()
    drawn = _drawn_tree()
    public = {name: cls for name, cls in defined.items() if name not in INTERNAL}
    assert set(public) == set(drawn), (
        f"not drawn: {sorted(set(public) - set(drawn))}; "
        f"drawn but gone: {sorted(set(drawn) - set(public))}"
    )
    for name, cls in public.items():
        own_parents = {base.__name__ for base in cls.__bases__ if base.__name__ in public}
        assert drawn[name] == own_parents, f"{name}: drawn under {drawn[name]}, is {own_parents}"


def test_the_internal_signals_are_named_and_exist() -> None:
    defined = _defined_exceptions()
    assert INTERNAL <= set(defined)
    for name in INTERNAL:
        assert f"``{name}``" in (errors.__doc__ or "")
