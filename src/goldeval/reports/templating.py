"""The Jinja2 environment of the HTML reports (``reports/templates/``).

One environment for the pytest-html fragments (:mod:`goldeval.reports.html`) and the history
site (:mod:`goldeval.reports.site`), set up as pytest-html does it: autoescape on for every
template, so a value from a run (a case id, an answer holding ``<script>``, a quote in an
attribute) is escaped unless it is already :class:`markupsafe.Markup` (a macro's output).

Two rules on top of autoescape:

* every ``{{ value }}`` first goes through :func:`shown`: ``None`` reads ``n/a`` and control,
  C1 and bidi characters are escaped visibly (:func:`goldeval.core.textsafe.safe_text`), since
  HTML escaping alone leaves a U+202E override free to reorder what the reviewer reads;
* a template is written one element per line for the reader, but the page is not: a line
  break and the indentation after it vanish from the template's text (as in JSX), so the
  output has no stray whitespace between inline elements (``<code>`` next to a badge). A
  space that must survive a line break is written ``{{ " " }}``; a ``{% %}`` or ``{{ }}`` tag
  stays on one line. ``.css`` files are included as they are.

Templates compute nothing: the Python side builds plain views (strings, numbers, lists) and
formats numbers; a template only lays them out.
"""

from __future__ import annotations

import re
from typing import Any

import jinja2
import jinja2.ext
from markupsafe import Markup

from goldeval.core.textsafe import safe_text

#: A line break and the indentation that follows it, in a template's source.
_LINE_JOIN = re.compile(r"\n[ \t]*")


class JoinLines(jinja2.ext.Extension):
    """Drop line breaks and the indentation after them from ``.j2`` template sources."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        if name is not None and not name.endswith(".j2"):
            return source
        return _LINE_JOIN.sub("", source)


def shown(value: Any) -> Any:
    """What ``{{ value }}`` prints before autoescape: ``n/a`` for ``None``, control characters
    escaped visibly; markup built by a macro passes unchanged."""
    if hasattr(value, "__html__"):
        return value
    return safe_text("n/a" if value is None else value)


def status_class(status: Any) -> str:
    """CSS class for a PASS/FAIL/ERROR/SKIPPED-like word (a fixed set, never user text)."""
    word = str(status).upper()
    if word in (
        "PASS",
        "PASSED",
        "NO_REGRESSION",
        "IMPROVEMENT",
        "UNCHANGED_PASS",
        "RECOVERED",
        "IMPROVED",
        "NON_INFERIOR",
    ):
        # Verdict words only: a run status such as COMPLETED says the run ended, not that it
        # passed (a COMPLETED run can fail its gate), so it is never shown green.
        return "goldeval-pass"
    if word in (
        "FAIL",
        "FAILED",
        "REGRESSION",
        "NEW_FAILURE",
        "UNCHANGED_FAIL",
        "REGRESSED",
        "COMPARISON_INVALID",
        "INFERIOR",
    ):
        return "goldeval-fail"
    if word in (
        "ERROR",
        "NEW_ERROR",
        "UNCHANGED_ERROR",
        "INTERRUPTED",
        "INCOMPLETE",
        "NEW_FAILURES_NOT_GATED",
        # A variant comparison that cannot tell is never shown green.
        "INCONCLUSIVE",
    ):
        return "goldeval-error"
    return "goldeval-skipped"


ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("goldeval.reports", "templates"),
    autoescape=True,
    finalize=shown,
    undefined=jinja2.StrictUndefined,
    extensions=[JoinLines],
    keep_trailing_newline=True,
)
ENV.filters["status_class"] = status_class


def render(template: str, **context: Any) -> str:
    """Render ``templates/<template>`` with ``context`` (a plain ``str``)."""
    return str(ENV.get_template(template).render(**context))


def esc(value: Any) -> str:
    """One value escaped exactly as ``{{ value }}`` prints it in a template."""
    return str(Markup.escape(shown(value)))
