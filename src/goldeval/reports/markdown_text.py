"""Untrusted text made safe for a Markdown table cell (report.md and its sections)."""

from __future__ import annotations

from typing import Any

from goldeval.core.textsafe import one_line


def md_escape(text: Any) -> str:
    """Escape untrusted text for a Markdown table cell (no HTML, no pipes, one line).

    Control, C1 and bidi characters are escaped visibly first (goldeval.core.textsafe), so the
    report is safe to ``cat`` and a job summary cannot be reordered by a U+202E override.
    """
    s = one_line(text)
    for ch, rep in (
        ("\\", "\\\\"),
        ("|", "\\|"),
        ("<", "&lt;"),
        (">", "&gt;"),
        ("`", "\\`"),
        ("*", "\\*"),
        ("_", "\\_"),
        ("[", "\\["),
        ("]", "\\]"),
        ("~", "\\~"),  # GFM strike-through: an answer cannot strike report text through
    ):
        s = s.replace(ch, rep)
    return " ".join(s.split())
