"""The prompt templates' sandbox, under a time and size budget (issue 32).

Jinja2's sandbox keeps a template away from Python internals, but not from unbounded work:
two nested ``range(100000)`` loops ran for minutes, ``'x' * 10**10`` asked for 10 GB, a
self-calling macro raised RecursionError. Here every render gets a :class:`RenderBudget`
(limits ``template_seconds``, ``template_output_chars``, ``template_loop_iterations`` and
``template_repeat`` of :mod:`goldeval.core.limits`), and the sandbox spends it:

- every loop iterates through a counter (the parsed template's ``for`` nodes are rewritten to
  pass their iterable through the ``goldeval_loop`` filter), and ``range()`` refuses more
  items than a whole render may iterate;
- every call, filter, intercepted operator and output piece ticks the budget, which checks
  the wall clock, so no loop body runs past the time limit;
- what can allocate much from little is checked *before* it runs: repetition (``*``),
  powers (``**``), widths of ``%`` / ``format`` / ``center`` / ``ljust`` / ``indent``,
  ``replace`` and ``join``; strings, lists and captured blocks are checked after.

A breach raises :class:`~goldeval.core.limits.LimitExceeded`; :mod:`goldeval.dataset.templates`
turns it into a template problem (TEMPLATE_ERROR, exit 4) that names the template line.

Jinja2 is imported here, at the top: :mod:`goldeval.dataset.templates` imports this module
only when a manifest has templates (most datasets have none).
"""

from __future__ import annotations

import functools
import math
import re
import string
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sized
from contextvars import ContextVar
from typing import Any

from jinja2 import nodes
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment
from jinja2.utils import generate_lorem_ipsum
from jinja2.visitor import NodeTransformer

from goldeval.core.limits import LimitExceeded, default
from goldeval.dataset.template_weight import SHOWN_WHOLE, shown_size, sized

#: The filter every ``for`` loop's iterable passes through (counts iterations).
LOOP_FILTER = "goldeval_loop"
#: The filter every ``~`` concatenation passes through (checks its length).
CHECKED_FILTER = "goldeval_checked"
#: The filter every ``~`` operand passes through (weighs it before it becomes text).
WEIGHED_FILTER = "goldeval_weighed"

#: Filters whose integer arguments are sizes of what they build (a width, a number of parts).
_SIZE_ARGUMENT_FILTERS = frozenset({"center", "slice", "batch"})
#: Filters that neither turn their input into text nor copy its texts (every other one is
#: weighed first: sort, unique, min, max, groupby, dictsort and map lower or convert items).
_NOT_SHOWN = frozenset(
    {"length", "count", "first", "last", "list", "reverse", "batch", "slice", "select",
     "reject", "selectattr", "rejectattr", "sum", "items", "attr", "default", "d", "random",
     "abs", "int", "float", "round", "join", "goldeval_loop"}
)  # fmt: skip
#: Filters the sandbox does not offer (a template using one fails to compile, clearly).
_NOT_OFFERED = frozenset({"wordwrap"})
#: ``str`` methods whose integer arguments are widths of what they build.
_WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})
#: A printf-style conversion: its width and precision (digits or ``*``).
_PRINTF_SPEC = re.compile(r"%(?:\([^)]*\))?[#0 +\-]*(\*|\d+)?(?:\.(\*|\d+))?")
_DIGITS = re.compile(r"\d+")


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


# -- pre-checks of what allocates much from little ------------------------------------------


def _check_binop(budget: RenderBudget, operator: str, left: Any, right: Any) -> None:
    if operator == "*":
        _check_product(budget, left, right)
    elif operator == "**":
        _check_power(budget, left, right)
    elif operator == "%" and isinstance(left, str):
        _check_printf(budget, left, right if isinstance(right, tuple) else (right,))
    elif operator == "+":
        a, b = sized(left), sized(right)
        if a is not None and b is not None:
            budget.check_chars(a + b, "the sum")


def weighed(value: Any) -> Any:
    """``value``, after checking what it becomes as text (an output expression, a ``~``
    operand, a filter's input): no step that built a container need have been large."""
    budget = CURRENT.get()
    if budget is not None and isinstance(value, SHOWN_WHOLE):
        budget.check_chars(shown_size(value, budget.max_chars), "a value shown as text")
    return value


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
    if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
        if len(new) > len(old):
            hits = text.count(old) if old else len(text) + 1
            budget.check_chars(len(text) + hits * (len(new) - len(old)), "the replacement")


def _joined(budget: RenderBudget, items: Any, separator: Any) -> Any:
    """``items`` as a list when they are not sized (counted), after checking that joining
    them with ``separator`` stays within the output limit."""
    if not isinstance(items, Sized):
        listed = []
        for item in items:
            budget.iterate()
            listed.append(item)
        items = listed
    if isinstance(separator, str):
        joined = len(items) * len(separator) + shown_size(list(items), budget.max_chars)
        budget.check_chars(joined, "the join")
    return items


# -- the sandbox ----------------------------------------------------------------------------


def counted(value: Any) -> Iterator[Any]:
    """``value``'s items, each one counted against the render's loop budget."""
    budget = CURRENT.get()
    for item in value:
        if budget is not None:
            budget.iterate()
        yield item


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
        checked_args = _check_filter(budget, name, list(args), offset, kwargs)
        result = func(*checked_args, **kwargs)
        budget.check_length(result)
        return result

    return wrapper


def _check_filter(
    budget: RenderBudget, name: str, args: list[Any], offset: int, kwargs: dict[str, Any]
) -> list[Any]:
    rest = args[offset + 1 :]
    value = args[offset] if len(args) > offset else None
    if name not in _NOT_SHOWN:
        weighed(value)
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
    return args


def _check_method(
    budget: RenderBudget, obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, ...]:
    """Checks of a call of a ``str`` method (or the sandbox's ``str.format`` wrapper)."""
    target = getattr(obj, "__wrapped__", obj)
    receiver = getattr(target, "__self__", None)
    if not isinstance(receiver, str):
        return args
    method = getattr(target, "__name__", "")
    if method == "expandtabs":
        # Every tab becomes up to ``tabsize`` spaces: 1,500 tabs at 1,000,000 built 1.5
        # billion characters before the output limit looked (each argument was in range).
        size = [*args, *kwargs.values(), 8][0]
        if isinstance(size, int) and not isinstance(size, bool):
            budget.check_repeat(
                len(receiver) + receiver.count("\t") * max(size, 0), "str.expandtabs()"
            )
    if method in _WIDTH_METHODS:
        _check_int_args(budget, [*args, *kwargs.values()], f"str.{method}()")
    elif method in ("format", "format_map"):
        _check_str_format(budget, receiver, [*args, *kwargs.values()])
    elif method == "replace" and len(args) >= 2:
        _check_replace(budget, receiver, args[0], args[1])
    elif method == "join" and args:
        args = (_joined(budget, args[0], receiver), *args[1:])
    return args


class BudgetedSandbox(SandboxedEnvironment):
    """Jinja2's sandbox spending the render's :class:`RenderBudget` (see the module doc)."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})

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
        # wordwrap is textwrap, quadratic in its input: one call on a long string runs for
        # minutes between two budget checks. Prompts have no use for it: not offered.
        self.filters = {
            name: _budgeted_filter(name, f)
            for name, f in self.filters.items()
            if name not in _NOT_OFFERED
        }
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
        budget.tick()
        _check_binop(budget, operator, left, right)
        result = super().call_binop(context, operator, left, right)
        budget.check_length(result)
        return result

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        budget = CURRENT.get()
        if budget is None:
            return super().call(__context, __obj, *args, **kwargs)
        budget.tick()
        args = _check_method(budget, __obj, args, kwargs)
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
