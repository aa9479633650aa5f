"""The prompt templates' sandbox, under a time and size budget (issue 32).

Jinja2's sandbox keeps a template away from Python internals, but not from unbounded work:
two nested ``range(100000)`` loops ran for minutes, ``'x' * 10**10`` asked for 10 GB, a
self-calling macro raised RecursionError. Here every render gets a :class:`RenderBudget`
(limits ``template_seconds``, ``template_output_chars``, ``template_loop_iterations`` and
``template_repeat`` of :mod:`goldeval.core.limits`), and the sandbox spends it:

- every loop iterates through a counter (the parsed template's ``for`` nodes are rewritten to
  pass their iterable through the ``goldeval_loop`` filter), and ``range()`` refuses more
  items than a whole render may iterate;
- every call, filter, test, intercepted operator and output piece ticks the budget, which
  checks the wall clock, so no loop body runs past the time limit;
- what can allocate much from little, or work long inside one call the clock cannot look
  into, is checked *before* it runs (:mod:`goldeval.dataset.template_checks`): repetition
  (``*``), powers (``**``), big-integer division (``//``, ``%``, ``round``, ``divisibleby``),
  widths of ``%`` / ``format`` / ``center`` / ``ljust`` / ``indent`` / ``tojson(indent=)``,
  ``replace``, ``translate``, ``join``, and what a value becomes as text, as indented JSON or
  pretty-printed; strings, lists and captured blocks are checked after;
- ``sum`` adds one ``+`` at a time through the same checks (Python's ``sum`` of lists is
  quadratic inside one call); filters quadratic in their input (``wordwrap``, ``urlize``)
  are not offered.

A breach raises :class:`~goldeval.core.limits.LimitExceeded`; :mod:`goldeval.dataset.templates`
turns it into a template problem (TEMPLATE_ERROR, exit 4) that names the template line.

Jinja2 is imported here, at the top: :mod:`goldeval.dataset.templates` imports this module
only when a manifest has templates (most datasets have none).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from contextvars import ContextVar
from operator import add
from typing import Any, cast

from jinja2 import Environment, nodes, pass_environment
from jinja2.filters import make_attrgetter
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment
from jinja2.utils import generate_lorem_ipsum
from jinja2.visitor import NodeTransformer

from goldeval.core.limits import LimitExceeded, default
from goldeval.dataset.template_checks import (
    check_binop,
    check_filter,
    check_method,
    check_test,
    listed,
    weigh,
)

#: The filter every ``for`` loop's iterable passes through (counts iterations).
LOOP_FILTER = "goldeval_loop"
#: The filter every ``~`` concatenation passes through (checks its length).
CHECKED_FILTER = "goldeval_checked"
#: The filter every ``~`` operand passes through (weighs it before it becomes text).
WEIGHED_FILTER = "goldeval_weighed"

#: Filters the sandbox does not offer (a template using one fails to compile, clearly): each
#: is quadratic in its input inside one call the clock cannot stop (``wordwrap`` is textwrap:
#: minutes over a long string; ``urlize``'s trailing-punctuation regex: 2 s for 10,000
#: closing brackets, 33 s for 40,000). Prompts have no use for either.
_NOT_OFFERED = frozenset({"wordwrap", "urlize"})


class RenderBudget:
    """What one render may still spend; raises :class:`LimitExceeded` when it is spent."""

    __slots__ = ("_end", "built", "iterations", "max_built", "max_chars", "max_iterations",
                 "max_repeat", "seconds")  # fmt: skip

    def __init__(self) -> None:
        self.seconds = float(default("template_seconds"))
        self.max_chars = int(default("template_output_chars"))
        self.max_iterations = int(default("template_loop_iterations"))
        self.max_repeat = int(default("template_repeat"))
        self.max_built = int(default("template_built_chars"))
        self.iterations = 0
        self.built = 0
        self._end = time.monotonic() + self.seconds

    def tick(self) -> None:
        """One step of work: past the time limit, the render stops here."""
        if time.monotonic() > self._end:
            raise LimitExceeded(
                "template_seconds", f"the template ran longer than {self.seconds:g} seconds"
            )

    def iterate(self) -> None:
        self.iterations += 1
        if self.iterations > self.max_iterations:
            raise LimitExceeded(
                "template_loop_iterations",
                f"the template's loops ran more than {self.max_iterations:,} iterations",
            )
        self.tick()

    def check_length(self, value: Any, what: str = "a value built by the template") -> None:
        """Strings, lists and mappings longer than the output limit stop the render; every
        string built counts against what the whole render may build."""
        if isinstance(value, (str, list, tuple, dict, set, bytes)):
            self.check_chars(len(value), what)
        if isinstance(value, (str, bytes)):
            self.built += len(value)
            if self.built > self.max_built:
                raise LimitExceeded(
                    "template_built_chars",
                    f"the template built more than {self.max_built:,} characters of text",
                )

    def check_chars(self, size: int, what: str) -> None:
        """``what`` of ``size`` characters (or items) stops the render when over the limit."""
        if size > self.max_chars:
            raise LimitExceeded(
                "template_output_chars",
                f"{what} has {size:,} characters or items, over the limit of {self.max_chars:,}",
            )

    def check_repeat(self, size: int, what: str) -> None:
        """A repetition, padding or power that would produce ``size`` characters or items."""
        if size > self.max_repeat:
            raise LimitExceeded(
                "template_repeat",
                f"{what} would produce {size:,} characters or items, over the limit of "
                f"{self.max_repeat:,}",
            )


#: The budget of the render running in this thread (each render sets and resets it).
CURRENT: ContextVar[RenderBudget | None] = ContextVar("goldeval_template_budget", default=None)


def render_with_budget(render: Callable[[], str]) -> str:
    """``render()`` under a fresh :class:`RenderBudget`."""
    token = CURRENT.set(RenderBudget())
    try:
        return render()
    finally:
        CURRENT.reset(token)


# -- the sandbox ----------------------------------------------------------------------------


def counted(value: Any) -> Iterator[Any]:
    """``value``'s items, each one counted against the render's loop budget."""
    budget = CURRENT.get()
    for item in value:
        if budget is not None:
            budget.iterate()
        yield item


def weighed(value: Any) -> Any:
    """``value``, after checking what it becomes as text (an output expression, a ``~``
    operand, a filter's input): no step that built a container need have been large."""
    budget = CURRENT.get()
    if budget is not None:
        weigh(budget, value)
    return value


def checked(value: Any) -> Any:
    """``value`` after checking its length (the result of a ``~`` concatenation)."""
    budget = CURRENT.get()
    if budget is not None:
        budget.tick()
        budget.check_length(value)
    return value


def budgeted_range(*args: int) -> range:
    """``range()`` of at most ``template_loop_iterations`` items (more could never finish)."""
    rng = range(*args)
    budget = CURRENT.get()
    limit = (
        budget.max_iterations if budget is not None else int(default("template_loop_iterations"))
    )
    if len(rng) > limit:
        raise LimitExceeded(
            "template_loop_iterations",
            f"range() of {len(rng):,} items is larger than a template may iterate ({limit:,})",
        )
    return rng


def bounded_lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:
    """Jinja2's ``lipsum`` with its counts checked (``lipsum(10**9)`` would not end)."""
    budget = CURRENT.get()
    if budget is not None:
        budget.check_repeat(n * max, "lipsum()")
    return str(generate_lorem_ipsum(n=n, html=html, min=min, max=max))


@pass_environment
def budgeted_sum(
    environment: Environment, iterable: Any, attribute: str | int | None = None, start: Any = 0
) -> Any:
    """Jinja2's ``sum`` filter, adding through the budget. Python's ``sum`` adds inside one
    call the clock cannot stop: of lists (or tuples) it copies the total at each step, so
    ``range(10**6)|batch(1)|list|sum(start=[])`` ran 14 minutes (past SIGTERM), and of
    million-digit integers it took 13 s. Plain numbers are still summed by Python; anything
    else one ``+`` at a time, each step ticked and checked as the template's own ``+``."""
    budget = CURRENT.get()
    if budget is None:
        raise nodes.Impossible()  # outside a render (see _budgeted_filter)
    if isinstance(start, (str, bytes)):  # refused as Python's sum refuses them
        kind, empty = ("strings", "''") if isinstance(start, str) else ("bytes", "b''")
        raise TypeError(f"sum() can't sum {kind} [use {empty}.join(seq) instead]")
    if attribute is not None:
        iterable = map(make_attrgetter(environment, attribute), iterable)
    items = listed(budget, iterable)
    if all(map(_plain_number, items)) and _plain_number(start):
        return sum(items, start)
    total = start
    for item in items:
        total = _budgeted_binop(budget, "+", total, item, add)
    return total


def _plain_number(value: Any) -> bool:
    """A float, or an integer of at most 64 bits: Python adds a million of them at once."""
    return isinstance(value, float) or (isinstance(value, int) and value.bit_length() <= 64)


def _budgeted_binop(
    budget: RenderBudget,
    op: str,
    left: Any,
    right: Any,
    compute: Callable[[Any, Any], Any],
) -> Any:
    """``compute(left, right)`` for the operator ``op``: ticked, checked before and after."""
    budget.tick()
    check_binop(budget, op, left, right)
    result = compute(left, right)
    budget.check_length(result)
    return result


def _budgeted_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` (a filter) ticking the budget and checking what it is asked to build."""
    offset = 1 if getattr(func, "jinja_pass_arg", None) is not None else 0

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        budget = CURRENT.get()
        if budget is None:
            # Outside a render: Jinja folding a constant expression while it compiles the
            # template (``{{ "x" | center(10**9) }}`` ran for minutes, unbudgeted, at
            # collection). Impossible makes it leave the filter to the render, budgeted.
            raise nodes.Impossible()
        budget.tick()
        checked_args = check_filter(budget, name, list(args), offset, kwargs)
        result = func(*checked_args, **kwargs)
        budget.check_length(result)
        return result

    return wrapper


def _budgeted_test(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` (a test) ticking the budget and checking its arguments (``divisibleby``
    divides: ``x is divisibleby(y)`` of two 500,000-digit integers ran 3.9 s in one call)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        budget = CURRENT.get()
        if budget is None:
            raise nodes.Impossible()  # outside a render (see _budgeted_filter)
        budget.tick()
        check_test(budget, name, args, kwargs)
        return func(*args, **kwargs)

    return wrapper


class BudgetedSandbox(SandboxedEnvironment):
    """Jinja2's sandbox spending the render's :class:`RenderBudget` (see the module doc)."""

    intercepted_binops = frozenset({"*", "**", "%", "//", "+"})

    def __init__(self, **options: Any) -> None:
        # Jinja's optimizer folds constant expressions when a template is compiled, with no
        # budget set: off, so everything is evaluated at render time, under the budget (the
        # code generator's own folding of output is refused by the filters, see
        # _budgeted_filter).
        options.setdefault("optimized", False)
        options.setdefault("finalize", weighed)  # every output expression, before str()
        super().__init__(**options)
        self.globals["range"] = budgeted_range
        self.globals["lipsum"] = bounded_lipsum
        self.filters["sum"] = budgeted_sum
        self.filters = {
            name: _budgeted_filter(name, f)
            for name, f in self.filters.items()
            if name not in _NOT_OFFERED
        }
        tests = cast("dict[str, Callable[..., Any]]", self.tests)
        self.tests = {name: _budgeted_test(name, f) for name, f in tests.items()}
        self.filters[LOOP_FILTER] = counted
        self.filters[CHECKED_FILTER] = checked
        self.filters[WEIGHED_FILTER] = weighed

    def render_within_budget(self, render: Callable[[], str]) -> str:
        """``render()`` under a fresh budget, set where this sandbox reads it."""
        return render_with_budget(render)

    def parse_budgeted(self, source: str) -> nodes.Template:
        """``source`` parsed, its loops counted and its concatenations checked."""
        tree = _Instrument().visit(self.parse(source))
        assert isinstance(tree, nodes.Template)
        tree.set_environment(self)
        return tree

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        budget = CURRENT.get()
        if budget is None:
            return super().call_binop(context, operator, left, right)
        compute = functools.partial(super().call_binop, context, operator)
        return _budgeted_binop(budget, operator, left, right, compute)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        budget = CURRENT.get()
        if budget is None:
            return super().call(__context, __obj, *args, **kwargs)
        budget.tick()
        args = check_method(budget, __obj, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        budget.check_length(result)
        # A mutating method (list.extend) grows its receiver, not its result (a string's
        # method builds nothing in it: not counted as text built again).
        receiver = getattr(__obj, "__self__", None)
        if isinstance(receiver, (list, dict, set)):
            budget.check_chars(len(receiver), "a value built by the template")
        return result

    def concat(self, pieces: Iterable[str]) -> str:
        """The output (and every captured block), each piece counted as it is produced."""
        budget = CURRENT.get()
        if budget is None:
            return "".join(pieces)
        out: list[str] = []
        total = 0
        for piece in pieces:
            total += len(piece)
            try:
                budget.tick()
                budget.check_chars(total, "the output")
            except LimitExceeded as exc:
                if isinstance(pieces, Generator):
                    # Raised where the template stands, so the error names its line.
                    pieces.throw(exc)
                raise
            out.append(piece)
        return "".join(out)


class _Instrument(NodeTransformer):
    """Rewrites a parsed template: loops through :func:`counted`, ``~`` through :func:`checked`."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, LOOP_FILTER, [], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        node.nodes = [
            nodes.Filter(n, WEIGHED_FILTER, [], [], None, None, lineno=node.lineno)
            for n in node.nodes
        ]
        return nodes.Filter(node, CHECKED_FILTER, [], [], None, None, lineno=node.lineno)
