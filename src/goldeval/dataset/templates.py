"""Prompt templates of the manifest (``prompt: {system: ..., user: ...}``).

Jinja2 in a sandbox (a template cannot reach Python internals) with StrictUndefined: a variable
the row does not define is an error, found at collection and reported with the rows file, the
row's line and the template field, never rendered as an empty string.

Every render runs under a budget (:mod:`goldeval.dataset.template_budget`: time, output,
loop iterations, repetition); any fault of a render (a limit, a self-calling macro, a type
error) is a :class:`TemplateProblem` naming the template line, never a traceback.

Variables: the row's ``vars`` (each also at the top level), ``id``, ``prompt``, ``tags``,
``metadata``, ``chunks`` (the retrieved chunks: ``id``, ``heading``, ``text``) and ``pack``
(``pack.files[<relative path>]``, ``pack.chunks``; None without a pack).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from goldeval.core.limits import LimitExceeded

if TYPE_CHECKING:
    from jinja2 import Template

    from goldeval.dataset.case import GoldenCase
    from goldeval.dataset.pack import Pack
    from goldeval.dataset.template_budget import BudgetedSandbox

#: Names every template may use, besides the row's vars.
BUILTIN_NAMES = frozenset({"id", "prompt", "tags", "metadata", "vars", "chunks", "pack"})


class PromptTemplates(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    system: str | None = None
    user: str | None = None


class TemplateProblem(Exception):
    """A template that does not parse or render; ``field`` names it (``prompt.user``).
    ``undefined``: the render failed on a variable the row does not define."""

    def __init__(self, field: str, message: str, *, undefined: bool = False) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.undefined = undefined


#: Faults of a render that cost a whole budget to find (or a deep stack): remembered per row,
#: so a row's later attempts and its report do not spend it again.
_COSTLY_FAULTS = (LimitExceeded, RecursionError, MemoryError)


@functools.cache
def _env() -> BudgetedSandbox:
    """The sandbox, built when a manifest first has templates: Jinja2 is imported only then
    (most datasets have none, and its import is part of every collection's start-up)."""
    from jinja2 import StrictUndefined

    from goldeval.dataset.template_budget import BudgetedSandbox

    return BudgetedSandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)


def _template_line(tb: TracebackType | None) -> int | None:
    """The template line a render fault happened on: the innermost frame Jinja2 maps to the
    template (its rewritten traceback names the template's lines)."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _is_undefined(exc: BaseException) -> bool:
    from jinja2.exceptions import UndefinedError

    return isinstance(exc, UndefinedError)


def _fault_message(exc: BaseException) -> str:
    """What went wrong in a render, for the row's TEMPLATE_ERROR."""
    from jinja2.exceptions import SecurityError, TemplateError, UndefinedError

    if isinstance(exc, UndefinedError):
        return f"undefined: {exc.message}"
    if isinstance(exc, SecurityError):
        return f"not allowed in a template: {exc}"
    if isinstance(exc, TemplateError):
        return str(exc)
    if isinstance(exc, LimitExceeded):
        return f"{exc.message} ({exc.hint or f'limit {exc.limit}, see docs/reliability.md'})"
    if isinstance(exc, RecursionError):
        return "a macro or recursive loop calls itself too deeply (RecursionError)"
    if isinstance(exc, MemoryError):
        return "rendering ran out of memory (MemoryError)"
    return f"{type(exc).__name__} while rendering: {exc}"


class CompiledTemplates:
    """The manifest's templates, parsed once."""

    def __init__(self, spec: PromptTemplates) -> None:
        from jinja2 import TemplateSyntaxError, meta

        env = _env()
        self.spec = spec
        self._compiled: dict[str, Template] = {}
        self.names: dict[str, frozenset[str]] = {}
        self._faults: dict[tuple[Any, ...], TemplateProblem] = {}
        for part in ("system", "user"):
            source = getattr(spec, part)
            if source is None:
                continue
            try:
                ast = env.parse(source)
                self._compiled[part] = env.from_string(env.parse_budgeted(source))
            except TemplateSyntaxError as exc:
                raise TemplateProblem(
                    f"prompt.{part}", f"template syntax error on line {exc.lineno}: {exc.message}"
                ) from None
            except (RecursionError, SyntaxError, MemoryError):
                # Jinja2 parses and compiles recursively: brackets or blocks nested a few
                # hundred deep end in Python's own limits (IndentationError is a SyntaxError).
                raise TemplateProblem(
                    f"prompt.{part}",
                    "the template is nested too deeply to compile (brackets or blocks nested "
                    "hundreds of levels); write it flatter",
                ) from None
            self.names[part] = frozenset(meta.find_undeclared_variables(ast))

    def has(self, part: str) -> bool:
        return part in self._compiled

    def missing(self, case: GoldenCase) -> list[tuple[str, str]]:
        """[(field, variable)] for each variable a template uses that the row does not define
        (``prompt.user`` does not apply to a conversation row: it carries its own turns).

        A name used only with a fallback (``{{ tone | default("warm") }}``) is not missing:
        the template is tried on the row first, and only a render failing on an undefined
        name counts (any other fault is the row's TEMPLATE_ERROR when it runs).
        """
        known = BUILTIN_NAMES | set(case.vars)
        out = []
        for part, names in self.names.items():
            if part == "user" and case.messages is not None:
                continue
            unknown = sorted(names - known)
            if not unknown:
                continue
            try:
                self.render(part, case)
            except TemplateProblem as exc:
                if exc.undefined:
                    out += [(f"prompt.{part}", name) for name in unknown]
        return out

    def render(
        self,
        part: str,
        case: GoldenCase,
        chunks: Sequence[Mapping[str, Any]] = (),
        pack: Pack | None = None,
    ) -> str:
        key = (part, case.id, case.prompt, tuple(c.get("id") for c in chunks), pack is None)
        known = self._faults.get(key)
        if known is not None:
            raise TemplateProblem(known.field, known.message, undefined=known.undefined)
        template = self._compiled[part]
        context = self._context(case, chunks, pack)
        try:
            # The sandbox's own module sets the budget it reads: a second copy of that module
            # (pytester's in-process runs drop modules first imported inside them) would set a
            # budget the cached sandbox never sees, and the render would run without limits.
            return _env().render_within_budget(lambda: template.render(context))
        except Exception as exc:
            line = _template_line(exc.__traceback__)
            at = f"template line {line}: " if line is not None else ""
            problem = TemplateProblem(
                f"prompt.{part}", at + _fault_message(exc), undefined=_is_undefined(exc)
            )
            if isinstance(exc, _COSTLY_FAULTS):
                self._faults[key] = problem
        raise problem from None

    @staticmethod
    def _context(
        case: GoldenCase, chunks: Sequence[Mapping[str, Any]], pack: Pack | None
    ) -> dict[str, Any]:
        """The variables a template sees (see the module doc)."""
        return {
            **case.vars,
            "vars": case.vars,
            "id": case.id,
            "prompt": case.prompt,
            "tags": list(case.tags),
            "metadata": case.metadata,
            "chunks": list(chunks),
            "pack": None
            if pack is None
            else {
                "files": dict(pack.files),
                "chunks": [{"id": c.id, "heading": c.heading, "text": c.text} for c in pack.chunks],
                "version": pack.version,
            },
        }
