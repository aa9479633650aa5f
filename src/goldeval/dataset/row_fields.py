"""What a dataset row may hold: its fields, the expect keys every dataset has, and the rules for
an id and a tag (an id becomes a file name and a test id, a tag a pytest mark)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any

from goldeval.dataset.expect import ExpectKey

ROW_FIELDS = (
    "id",
    "prompt",
    "messages",
    "vars",
    "request",
    "expect",
    "must_not",
    "tags",
    "metadata",
)
CORE_EXPECT_KEYS = (ExpectKey("red", "bool", "known to fail live: carries the `red` marker"),)
RESERVED_FILES = ("calibration.jsonl",)
# \Z, not $: "$" also matches before a final newline ("a\n" would be an id).
SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
# A tag becomes ``pytest.mark.<tag>``: a plain identifier starting with a letter (``_x`` and
# ``__init__`` are attributes of pytest's MarkGenerator, not marks).
TAG = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
#: Marks with behaviour of their own, in pytest or in common plugins. A row tagged with one
#: would be skipped, xfailed, retried, given fixtures...: a failing row turned into a green run.
#: The plugin adds every marker code registered in the running pytest (see
#: ``goldeval.pytest_plugin.config_keys.reserved_marks``); this list is the floor when pytest is not
#: there to
#: ask, and keeps a row valid or invalid alike where a plugin is installed only (e.g. in CI).
RESERVED_TAGS = frozenset(
    {
        # pytest itself
        "skip", "skipif", "xfail", "usefixtures", "filterwarnings", "parametrize",
        "tryfirst", "trylast",
        # common plugins: timeouts, reruns, ordering, async, databases, xdist, isolation...
        "timeout", "flaky", "repeat", "order", "run", "first", "second", "last",
        "dependency", "asyncio", "anyio", "trio", "django_db", "urls",
        "ignore_template_errors", "xdist_group", "forked", "no_cover", "hypothesis",
        "benchmark", "freeze_time", "vcr", "block_network", "enable_socket",
        "disable_socket", "allow_hosts", "httpx_mock", "respx", "only",
        "randomly_dont_reorganize", "golden",
        # ours: `red` comes from expect.red
        "red",
    }
)  # fmt: skip
# Names that are special files on Windows: an id becomes a file name under fixtures/ and runs/.
WINDOWS_RESERVED = (
    {"con", "prn", "aux", "nul"} | {f"com{i}" for i in range(10)} | {f"lpt{i}" for i in range(10)}
)


def suggest(name: str, known: Iterable[str]) -> str | None:
    """A hint naming the closest known name, for a misspelt field or key."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean {close[0]!r}?" if close else None


def check_case_id(case_id: Any) -> str | None:
    """Why ``case_id`` is not a safe identity, or None when it is."""
    if case_id is None:
        return "missing or blank"
    if not isinstance(case_id, str):
        return f"must be a string, got {type(case_id).__name__}"
    if not case_id.strip():
        return "missing or blank"
    if not SAFE_ID.match(case_id):
        return (
            f"{case_id[:80]!r} is not filename-safe (letters, digits, '.', '_', '-'; "
            "must start with a letter or digit; at most 128 characters)"
        )
    if case_id.split(".")[0].lower() in WINDOWS_RESERVED:
        return f"{case_id!r} is a reserved file name on Windows"
    return None
