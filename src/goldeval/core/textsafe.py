"""Untrusted text made safe to show: one sanitiser for every human-facing excerpt.

Answers, judge replies, provider error bodies and prompts are untrusted. Printed raw, an
answer holding ``ESC [2J`` clears the reader's terminal, an OSC 8 sequence plants a hidden
link, a C1 ``CSI`` (U+009B) does the same on terminals that honour 8-bit controls, a bare
``\\r`` overwrites what was printed before it on the same line, and a bidi override (U+202E)
makes ``txt.exe`` read as ``exe.txt`` in a report. Every excerpt goes through :func:`safe_text`
(multi-line formats: terminal blocks, ``<pre>``, JUnit text) or :func:`one_line` (a terminal
line, a Markdown table cell) before it is shown. Each dangerous character is replaced by a
visible escape (``\\x1b``, ``\\x9b``, ``\\r``, ``\\u202e``), so nothing disappears silently and
the reader sees that the text held it.

Machine records (``run.json``, ``result.json``, the store) keep the raw text (JSON escapes
control characters), as do the evidence files ``cases/<id>/output.md`` and ``judge.md``: they
must hold exactly what was graded.

Pure: no pytest here.
"""

from __future__ import annotations

import re
from typing import Any

#: Characters never shown raw:
#: C0 controls but TAB and LF (ESC starts CSI/OSC sequences, BEL ends OSC, CR overwrites,
#: BS erases), DEL, C1 controls U+0080-U+009F (8-bit CSI/OSC/DCS), the bidi embeddings,
#: overrides and isolates and the directional marks (Trojan-source style reordering), the
#: line/paragraph separators (line breaks in some viewers, invisible in others), the
#: interlinear annotation controls, and lone surrogates (not encodable as UTF-8).
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e"
    "\u2066-\u2069\ufff9-\ufffb\ud800-\udfff]"
)
#: The same plus TAB and LF, for one-line contexts (they become a space there).
_LINE_BREAKS = re.compile("[\t\n]+")

_NAMED = {"\r": "\\r", "\x1b": "\\x1b"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(value: Any) -> str:
    """``str(value)`` with every terminal/report control character escaped visibly.

    Newlines and tabs are kept (CRLF becomes LF first: a Windows line end is not an overwrite
    trick); any other control, C1, bidi or separator character becomes ``\\xNN`` / ``\\uNNNN``.
    """
    text = value if isinstance(value, str) else str(value)
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    if _UNSAFE.search(text) is None:
        return text  # the usual case: one scan, no copy
    return _UNSAFE.sub(_escape, text)


def one_line(value: Any) -> str:
    """:func:`safe_text` on one line: runs of newlines and tabs become one space."""
    return _LINE_BREAKS.sub(" ", safe_text(value)).strip()


def is_safe(text: str) -> bool:
    """True when ``text`` holds nothing :func:`safe_text` would escape (tests, assertions)."""
    return _UNSAFE.search(text) is None


def cut(text: str, limit: int) -> str:
    """``text`` at most ``limit`` characters, ending in ``…`` where it was cut: the mark by
    which the session's masker finds a secret the cut split (a bare ``[:500]`` left ten
    characters of a key in run.json, the reports and the store)."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
