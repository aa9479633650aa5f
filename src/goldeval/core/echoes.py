"""Secrets quoted back in part: the masking of a credential however a writer escaped it.

A server, an app or a model that repeats a credential writes it as its own format quotes it:
a URL writer percent-encodes ``/`` or only ``+``, a JSON writer may write ``\\/`` or
``\\u002B`` for one character, an HTML or XML writer ``&#43;`` or ``&plus;``, Markdown
``\\+``, and a text may carry zero-width characters inside it. Each of those passed whole
when the masker knew only fixed spellings of the whole value
(goldeval.core.settings.secret_forms). :func:`echoed_pattern` matches every such mix, and
:class:`EchoMasker` looks for it only where it can be: in a text holding a secret's longest
run of letters and digits (every such echo holds it as it is) or an invisible character.
"""

from __future__ import annotations

import functools
import html.entities
import re
from collections.abc import Sequence

#: Values shorter than this are not looked for in part (as goldeval.core.secrets masks no
#: shorter value in answers): their letters would be ordinary words.
MIN_ECHO_LENGTH = 8
#: Characters a writer may slip between two of a secret's without showing anything (zero-width
#: spaces and joiners, the word joiner, the byte order mark, the soft hyphen).
_INVISIBLE = "[\u200b\u200c\u200d\u2060\ufeff\u00ad]"
_INVISIBLE_CHAR = re.compile(_INVISIBLE)
#: HTML's names for a character (``&sol;`` for ``/``), from the standard's own table.
_ENTITY_NAMES: dict[str, list[str]] = {}
for _name, _char in html.entities.html5.items():
    if len(_char) == 1 and _name.endswith(";"):
        _ENTITY_NAMES.setdefault(_char, []).append(_name)


def _echoed_char(char: str) -> str:
    """A pattern for ``char`` as a writer may have written it: itself, and when it is not a
    letter or a digit, escaped with a backslash, percent-encoded, as a JSON ``\\u`` escape or
    an HTML/XML character reference (hex in any case, leading zeros) or name."""
    if char.isascii() and char.isalnum():
        return char
    code = ord(char)
    ways = [re.escape(char), "\\\\" + re.escape(char)]
    if code < 0x80:
        ways.append(f"%(?i:{code:02x})")
    ways += [f"\\\\(?i:u{code:04x})", f"&#0*{code};", f"&#(?i:x0*{code:x});"]
    ways += [re.escape(f"&{name}") for name in _ENTITY_NAMES.get(char, ())]
    return "(?:" + "|".join(ways) + ")"


def echoed_pattern(secret: str) -> str:
    """A pattern for ``secret`` with each character that is not a letter or a digit written
    in any of the ways above, each independently (``sk-a%2Fb+c\\u003d``: only the ``/`` and
    the ``=`` quoted), and invisible characters between any two."""
    return (_INVISIBLE + "*").join(_echoed_char(c) for c in secret)


class EchoMasker:
    """Masks ``secrets`` quoted back in part (see the module docstring)."""

    __slots__ = ("_anchors", "_pattern")

    def __init__(self, secrets: Sequence[str]) -> None:
        kept = sorted({s for s in secrets if len(s) >= MIN_ECHO_LENGTH}, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(echoed_pattern, kept))) if kept else None
        runs = {max(re.findall(r"[A-Za-z0-9]+", s) or [""], key=len) for s in kept} - {""}
        self._anchors = (
            re.compile("|".join(map(re.escape, sorted(runs, key=len)))) if runs else None
        )

    def mask(self, text: str, mask: str) -> str:
        if self._pattern is None:
            return text
        anchored = self._anchors is not None and self._anchors.search(text) is not None
        if not anchored and _INVISIBLE_CHAR.search(text) is None:
            return text  # the usual case: two C-level scans, no pattern
        return self._pattern.sub(mask, text)


@functools.lru_cache(maxsize=64)
def echo_masker(secrets: tuple[str, ...]) -> EchoMasker:
    """The :class:`EchoMasker` of ``secrets``, built once per list (its pattern is large)."""
    return EchoMasker(secrets)
