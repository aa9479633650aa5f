"""Prompt templates of the manifest (``prompt: {system: ..., user: ...}``).

Jinja2 in a sandbox (a template cannot reach Python internals) with StrictUndefined: a variable
the row does not define is an error, found at collection and reported with the rows file, the
row's line and the template field, never rendered as an empty string.

Variables: the row's ``vars`` (each also at the top level), ``id``, ``prompt``, ``tags``,
``metadata``, ``chunks`` (the retrieved chunks: ``id``, ``heading``, ``text``) and ``pack``
(``pack.files[<relative path>]``, ``pack.chunks``; None without a pack).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from jinja2 import Template
    from jinja2.sandbox import SandboxedEnvironment

    from goldeval.dataset.case import GoldenCase
    from goldeval.dataset.pack import Pack

#: Names every template may use, besides the row's vars.
BUILTIN_NAMES = frozenset({"id", "prompt", "tags", "metadata", "vars", "chunks", "pack"})


class PromptTemplates(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    system: str | None = None
    user: str | None = None


class TemplateProblem(Exception):
    """A template that does not parse or render; ``field`` names it (``prompt.user``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@functools.cache
def _env() -> SandboxedEnvironment:
    """The sandbox, built when a manifest first has templates: Jinja2 is imported only then
    (most datasets have none, and its import is part of every collection's start-up)."""
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(
        undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True
    )


class CompiledTemplates:
    """The manifest's templates, parsed once."""

    def __init__(self, spec: PromptTemplates) -> None:
        from jinja2 import TemplateSyntaxError, meta

        env = _env()
        self.spec = spec
        self._compiled: dict[str, Template] = {}
        self.names: dict[str, frozenset[str]] = {}
        for part in ("system", "user"):
            source = getattr(spec, part)
            if source is None:
                continue
            try:
                ast = env.parse(source)
                self._compiled[part] = env.from_string(source)
            except TemplateSyntaxError as exc:
                raise TemplateProblem(
                    f"prompt.{part}", f"template syntax error on line {exc.lineno}: {exc.message}"
                ) from None
            self.names[part] = frozenset(meta.find_undeclared_variables(ast))

    def has(self, part: str) -> bool:
        return part in self._compiled

    def missing(self, case: GoldenCase) -> list[tuple[str, str]]:
        """[(field, variable)] for each variable a template uses that the row does not define
        (``prompt.user`` does not apply to a conversation row: it carries its own turns).

        A name used only with a fallback (``{{ tone | default("warm") }}``) is not missing:
        the template is tried on the row first, and only a failed render counts.
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
            except TemplateProblem:
                out += [(f"prompt.{part}", name) for name in unknown]
        return out

    def render(
        self,
        part: str,
        case: GoldenCase,
        chunks: Sequence[Mapping[str, Any]] = (),
        pack: Pack | None = None,
    ) -> str:
        from jinja2.exceptions import SecurityError, TemplateError, UndefinedError

        template = self._compiled[part]
        context: dict[str, Any] = {
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
        try:
            return template.render(context)
        except UndefinedError as exc:
            raise TemplateProblem(f"prompt.{part}", f"undefined: {exc.message}") from None
        except SecurityError as exc:
            raise TemplateProblem(f"prompt.{part}", f"not allowed in a template: {exc}") from None
        except TemplateError as exc:
            raise TemplateProblem(f"prompt.{part}", str(exc)) from None
        except (TypeError, ValueError, ZeroDivisionError, IndexError, KeyError) as exc:
            raise TemplateProblem(
                f"prompt.{part}", f"{type(exc).__name__} while rendering: {exc}"
            ) from None
