"""``cites``: every id in ``expect.cites`` is cited (with ``cites_only``: no others).

Citations are found with a pattern (default ``\\[([A-Za-z0-9_.:-]+)\\]``, i.e. ``[doc-id]``; the
first capture group is the id, or the whole match without groups; a captured ``a, b`` counts as
two ids) in the first 1 MB, under the grader time budget (:mod:`goldeval.graders.budget`).
Options come from ``ctx.options`` (the manifest's ``grader_options: {cites: {pattern,
header}}``); with ``header: "RAG:"`` a first answer line ``RAG: a, b`` (header matched
case-insensitively) also cites ``a`` and ``b``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from goldeval.core.models import GraderOutcome
from goldeval.graders.base import ExpectKey, GradeContext
from goldeval.graders.budget import compile_pattern, pattern_error
from goldeval.graders.budget import finditer as budget_finditer
from goldeval.graders.common import BuiltinGrader, answer_text, grader_options, scan

__all__ = ["DEFAULT_CITE_PATTERN", "CitesGrader"]

DEFAULT_CITE_PATTERN = r"\[([A-Za-z0-9_.:-]+)\]"


def _cited(text: str, options: Mapping[str, Any]) -> set[str] | str:
    """The ids an answer cites, or an error message about the options."""
    pattern = options.get("pattern", DEFAULT_CITE_PATTERN)
    header = options.get("header")
    if not isinstance(pattern, str) or not pattern:
        return "option `pattern` must be a non-empty regular expression"
    if header is not None and (not isinstance(header, str) or not header):
        return "option `header` must be a non-empty string such as 'RAG:'"
    problem = pattern_error(pattern)
    if problem is not None:
        return f"option `pattern` {pattern!r} does not compile: {problem}"
    groups = compile_pattern(pattern).groups
    cited: set[str] = set()
    scanned, _note = scan(text)
    for match in budget_finditer(pattern, scanned, grader="cites"):
        raw = match.group(1) if groups else match.group(0)
        if raw:
            cited.update(part.strip() for part in raw.split(",") if part.strip())
    if header:
        line = text.lstrip()[:100_000].split("\n", 1)[0].strip()
        if line[: len(header)].upper() == header.upper():
            cited.update(p.strip() for p in line[len(header) :].split(",") if p.strip())
    return cited


class CitesGrader(BuiltinGrader):
    name = "cites"
    primary = ("cites",)
    expect_keys = (
        ExpectKey("cites", "list[str]", "document ids the answer must cite ([doc-id] by default)"),
        ExpectKey("cites_only", "bool", "true: citing any other id also fails"),
    )

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        errors = self.requires(expect, "cites_only", "cites")
        cites = expect.get("cites")
        if isinstance(cites, list) and any(isinstance(c, str) and not c.strip() for c in cites):
            errors.append(("expect.cites", "ids must not be blank"))
        if cites == [] and expect.get("cites_only") is not True:
            # No citation wanted and any allowed: nothing is checked (a wrong answer passed).
            errors.append(
                ("expect.cites", "must name a document (or add cites_only: true: cite none)")
            )
        return errors

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        wanted = ctx.case.expect.get("cites")
        if not isinstance(wanted, list) or not all(isinstance(c, str) for c in wanted):
            return self.config_error(ctx, "expect.cites must be a list of strings")
        text = answer_text(ctx)
        cited = _cited(text, grader_options(ctx, self.name))
        if isinstance(cited, str):
            return self.config_error(ctx, f"cites: {cited}")
        note = scan(text)[1]
        violations = [
            self.violation(ctx, "CITATION", f"missing citation {doc!r}{note}")
            for doc in dict.fromkeys(wanted)
            if doc not in cited
        ]
        if ctx.case.expect.get("cites_only") is True:
            violations += [
                self.violation(ctx, "CITATION", f"unexpected citation {doc!r} (cites_only)")
                for doc in sorted(cited - set(wanted))
            ]
        return self.outcome(self.capped(ctx, violations))
