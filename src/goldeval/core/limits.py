"""The budget module: every computation whose size or duration an input decides goes through here.

A dataset, a provider's answer, an imported file and a prompt template are inputs anyone can
write. Each of them can ask for unbounded work: a body that never ends, JSON nested 100,000
deep, a 3 GiB fixture, a template with nested ``range(100000)`` loops, a YAML alias bomb. The
rule (issue 32) is one mechanism, not one patch per example:

- every limit is a :class:`LimitSpec` in :data:`LIMITS` (name, default, the option or ini key
  that changes it, what it bounds); docs/reliability.md's table is tested against it;
- every check raises :class:`LimitExceeded` (a :class:`~goldeval.core.errors.GoldevalError`
  that names the limit, the value met and how to raise the limit), never a RecursionError,
  MemoryError or a hang;
- the helpers below are the only way the project parses JSON from outside, reads an input
  file, or waits on something an input decides (:class:`Deadline`). Callers turn
  :class:`LimitExceeded` into their surface's error (ERROR ``RESPONSE_TOO_LARGE``, exit 4).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from typing import Any

from goldeval.core.deadline import Deadline as Deadline  # re-exported: its old home
from goldeval.core.errors import GoldevalError
from goldeval.core.json_numbers import int_parser
from goldeval.core.limit_specs import INPUT_SHAPE_LIMITS, SERVICE_LIMITS
from goldeval.core.limit_specs import LimitSpec as LimitSpec  # re-exported: its old home

MiB = 1 << 20


class LimitExceeded(GoldevalError):
    """An input asked for more than a limit allows. ``limit`` is the :class:`LimitSpec` name."""

    def __init__(self, limit: str, message: str, **where: Any) -> None:
        spec = LIMITS_BY_NAME.get(limit)
        hint = where.pop("hint", None)
        if hint is None and spec is not None and spec.setting:
            hint = f"the limit is {spec.name}; raise it with {spec.setting} if this is expected"
        super().__init__(message, hint=hint, **where)
        self.limit = limit


#: Every limit of the project. docs/reliability.md ("Limits") lists each one; a test keeps the
#: two in step.
LIMITS: tuple[LimitSpec, ...] = (
    LimitSpec(
        "json_depth",
        64,
        "levels",
        "",
        "nesting of any JSON read from outside (provider bodies, sidecars, baselines, run.json, "
        "imported cells): deeper is a parser error, never a RecursionError",
    ),
    LimitSpec(
        "file_bytes",
        256 * MiB,
        "bytes",
        "",
        "any one input file (rows, manifest, rubric, calibration, pack chunk, baseline, "
        "run.json, imported file); checked with fstat on the open file before reading, and "
        "what is read is counted too (CSV and JSON-lines imports read a line at a time)",
    ),
    LimitSpec(
        "dataset_rows",
        200_000,
        "rows",
        "",
        "rows of one dataset's rows file (each becomes a test item per attempt); counted while "
        "read, before the next row is parsed: split a larger dataset",
    ),
    LimitSpec(
        "fixture_bytes",
        16 * MiB,
        "bytes",
        "",
        "one recorded answer (<id>.out.md) or its sidecar (<id>.out.json)",
    ),
    LimitSpec(
        "image_bytes",
        5 * MiB,
        "bytes",
        "",
        "one image of a conversation row, a file or a data URL (decoded size)",
    ),
    LimitSpec(
        "template_seconds",
        3,
        "seconds",
        "",
        "wall-clock time of one prompt template render (prompt.system / prompt.user)",
    ),
    LimitSpec(
        "template_output_chars",
        4_000_000,
        "characters",
        "",
        "the text one template render produces, and any one string, list or captured block "
        "built while rendering",
    ),
    LimitSpec(
        "template_loop_iterations",
        1_000_000,
        "iterations",
        "",
        "loop iterations of one template render, all loops together; also the largest "
        "`range()` a template may build",
    ),
    LimitSpec(
        "template_repeat",
        1_000_000,
        "characters",
        "",
        "what one repetition or padding in a template may produce (`'x' * n`, `[..] * n`, "
        "`center`/`ljust`/format widths, `**` digits)",
    ),
    LimitSpec(
        "template_built_chars",
        64_000_000,
        "characters",
        "",
        "all the text one render builds together (every string an operator, filter or method "
        "returns): 4,000 strings of 1 MB appended to a list took 4 GB, each step in bounds",
    ),
    LimitSpec(
        "service_header_seconds",
        10,
        "seconds",
        "`goldeval serve --header-timeout`",
        "the time a client of the evaluation service has to send a request's headers, from the "
        "connection opening or the previous response (408 and closed after it)",
    ),
    LimitSpec(
        "service_body_seconds",
        30,
        "seconds",
        "`goldeval serve --body-timeout`",
        "the time a client of the evaluation service has to send a request's body, from the "
        "end of its headers (408 and closed after it; closed if the answer was already sent)",
    ),
    LimitSpec(
        "variant_pairs",
        28,
        "pairs",
        "",
        "pairs one variant session compares (`gate.compare.pairs`: each against the control, "
        "or all n(n-1)/2): each is a bootstrap over every case; more is a usage error before "
        "the first call",
    ),
    LimitSpec(
        "answer_excerpt_chars",
        300,
        "characters",
        "",
        "the answer excerpt a variant session keeps per attempt (the lowest attempt of each "
        "case and variant) for the rows × variants matrix and the side-by-side answers; the "
        "full answer stays in the case's files and run.json as before",
    ),
    LimitSpec(
        "attempts_per_case",
        1000,
        "attempts",
        "",
        "`--golden-attempts=N` (each attempt is a test item per case and variant, kept in "
        "memory while collected); more is a usage error before collection",
    ),
    LimitSpec(
        "auto_attempts",
        20,
        "attempts",
        "",
        "the MAX of `--golden-attempts=auto:MAX`; more is a usage error before the first call",
    ),
    LimitSpec(
        "stop_grace_seconds",
        10,
        "seconds",
        "",
        "how long a pytest session given SIGTERM/SIGINT may take to end between items (the "
        "current item finishes first, a model call bounded by its own timeout); past it, or "
        "at a second signal, the session stops at once. Under the service's `kill_grace_seconds`",
    ),
    LimitSpec(
        "pattern_units",
        100_000,
        "units",
        "",
        "what one regular expression (a row's, a schema's, an answer's `format: regex`) may "
        "compile to: exact repeat counts multiply (`(?:(?:a{1000}){1000}){1000}` is 10^9 "
        "units, 2.8 GB); more is a pattern error naming the field",
    ),
)

LIMITS_BY_NAME: dict[str, LimitSpec] = {spec.name: spec for spec in LIMITS}


def markdown_table() -> str:
    """The table of docs/reliability.md ("Limits"), generated from :data:`LIMITS`."""
    lines = ["| limit | default | changed with | bounds |", "| --- | --- | --- | --- |"]
    for spec in LIMITS:
        shown = (
            describe_bytes(spec.default)
            if spec.unit == "bytes"
            else f"{spec.default:,} {spec.unit}"
            if isinstance(spec.default, int)
            else f"{spec.default:g} {spec.unit}"
        )
        setting = spec.setting or "fixed"
        lines.append(f"| `{spec.name}` | {shown} | {setting} | {spec.bounds} |")
    return "\n".join(lines)


def default(name: str) -> int | float:
    """The default value of limit ``name``."""
    return LIMITS_BY_NAME[name].default


def describe_bytes(n: int | float) -> str:
    """``32 MiB``, ``512 KiB``, ``900 bytes``: sizes in messages."""
    if n >= MiB and n % MiB == 0:
        return f"{int(n // MiB)} MiB"
    if n >= 1024 and n % 1024 == 0:
        return f"{int(n // 1024)} KiB"
    return f"{int(n)} bytes"


# -- JSON -----------------------------------------------------------------------------------


def json_depth_exceeds(value: Any, max_depth: int) -> bool:
    """Whether ``value`` (parsed JSON) nests deeper than ``max_depth`` containers.

    Iterative, so checking a hostile document cannot itself overflow the stack.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node  # type: ignore[assignment]
        else:
            continue
        if depth > max_depth:
            return True
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return False


def loads_json(
    text: str | bytes,
    *,
    what: str = "JSON",
    max_depth: int | None = None,
    **where: Any,
) -> Any:
    """``json.loads`` with a depth bound; the only parser of JSON that comes from outside.

    Raises :class:`LimitExceeded` (limit ``json_depth``) for a document nested deeper than
    ``max_depth`` (default: the ``json_depth`` limit), including one so deep that the standard
    parser would raise RecursionError; a malformed document (also an integer no float holds,
    goldeval.core.json_numbers) raises ``ValueError`` as ``json.loads`` does.
    """
    limit = int(default("json_depth")) if max_depth is None else max_depth
    try:
        value = json.loads(text, parse_int=int_parser(text))
    except RecursionError:
        raise LimitExceeded(
            "json_depth", f"{what} is nested deeper than {limit} levels", **where
        ) from None
    if json_depth_exceeds(value, limit):
        raise LimitExceeded("json_depth", f"{what} is nested deeper than {limit} levels", **where)
    return value


# -- sizes ----------------------------------------------------------------------------------


def check_size(size: int, limit: int, *, what: str, name: str, **where: Any) -> None:
    """Raise :class:`LimitExceeded` (limit ``name``) when ``size`` is over ``limit`` bytes."""
    if size > limit:
        raise LimitExceeded(
            name,
            f"{what} is {describe_bytes(size)}, over the limit of {describe_bytes(limit)}",
            **where,
        )


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` when the provider reports none: characters / 4, rounded up.

    The usual rule of thumb for English with BPE tokenizers; runs mark such counts as
    estimated. A budget that cannot see its input must not be silently off.
    """
    return math.ceil(len(text) / 4) if text else 0


# -- time -----------------------------------------------------------------------------------


# -- goldeval import (issue 32) -------------------------------------------------------------
# What one imported file (CSV, promptfoo YAML, ...) can ask for. Fixed: split or trim it.

IMPORT_LIMITS: tuple[LimitSpec, ...] = (
    LimitSpec(
        "import_rows",
        200_000,
        "rows",
        "",
        "rows one `goldeval import` reads (each may become a fixture file); split a larger source",
    ),
    LimitSpec(
        "import_csv_field",
        MiB,
        "bytes",
        "",
        "one CSV field read by `goldeval import` (counted in characters, as csv.field_size_limit "
        "counts them): longer is an error naming file:line:column",
    ),
    LimitSpec(
        "yaml_aliases",
        100,
        "aliases",
        "",
        "aliases (`*name`) in one YAML file: a dataset manifest, or a promptfoo file read by "
        "`goldeval import`",
    ),
    LimitSpec(
        "yaml_nodes",
        500000,
        "nodes",
        "",
        "YAML nodes of one file (a manifest, a promptfoo file) counted with every alias "
        "expanded (an alias bomb stops here while the file is composed, before anything is "
        "built); the expanded text is bounded by `file_bytes` too",
    ),
    LimitSpec(
        "yaml_depth",
        64,
        "levels",
        "",
        "nesting of one YAML file (a manifest, a promptfoo file read by `goldeval import`)",
    ),
)

LIMITS += IMPORT_LIMITS
LIMITS_BY_NAME.update((spec.name, spec) for spec in IMPORT_LIMITS)
# -- provider calls (issue 32): whole-call time, response size, a watchdog that cuts a read ---
#
# httpx bounds each socket read, not a whole call (a body trickled byte by byte never times
# out): a call runs under a Deadline, its body is read through read_bounded, and a Watchdog
# cuts the blocking read itself when the deadline passes between two pieces.

_PROVIDER_LIMITS: tuple[LimitSpec, ...] = (
    LimitSpec(
        "response_bytes",
        32 * MiB,
        "bytes",
        "`--golden-max-response-bytes`, `golden_max_response_bytes`",
        "one provider response body, plain or streamed, as decoded (chat, judge, embeddings, "
        "error bodies): a declared Content-Length over it is refused before reading, a body "
        "growing past it is cut; ERROR RESPONSE_TOO_LARGE (exit 4)",
    ),
    LimitSpec(
        "call_seconds",
        185,
        "seconds",
        "`--golden-call-timeout`",
        "one try of a provider call, whole: connect, send, wait, and the whole body or "
        "stream; default the connect timeout (5 s) + --golden-timeout (180 s); never past "
        "--golden-deadline; ERROR TIMEOUT (retried)",
    ),
)
LIMITS = (*LIMITS, *_PROVIDER_LIMITS)
LIMITS_BY_NAME.update({spec.name: spec for spec in _PROVIDER_LIMITS})


def read_bounded(
    chunks: Iterable[bytes],
    *,
    max_bytes: int,
    deadline: Deadline,
    what: str,
) -> Iterator[bytes]:
    """``chunks`` passed on while their total stays within ``max_bytes`` and ``deadline``
    has not passed; raises :class:`LimitExceeded` (``response_bytes`` / ``call_seconds``)
    at the first piece over either. Nothing past the cap is kept: the caller holds at most
    ``max_bytes`` plus one piece."""
    seen = 0
    for chunk in chunks:
        seen += len(chunk)
        if seen > max_bytes:
            raise LimitExceeded(
                "response_bytes",
                f"{what} is over the limit of {describe_bytes(max_bytes)} "
                f"({describe_bytes(seen)} read so far)",
            )
        if deadline.expired():
            raise LimitExceeded(
                "call_seconds", f"{what} did not end within {deadline.seconds or 0:g}s"
            )
        yield chunk


# -- live calls: what bounds the judge and the model-list probe (issue 32 / 31: bound-budget) --

LIMITS = (
    *LIMITS,
    LimitSpec(
        "judge_max_tokens",
        512,
        "tokens",
        "--golden-judge-max-tokens / golden_judge_max_tokens",
        "max_tokens sent with every judge call (its answer is a small JSON verdict); judge "
        "calls also wait on the generation limiter and spend --golden-max-tokens",
    ),
    LimitSpec(
        "model_list_seconds",
        10,
        "seconds",
        "",
        "the one GET /v1/models or /api/tags before a live run's first call; slower counts as "
        "a server that offers no list",
    ),
)
LIMITS_BY_NAME.update({spec.name: spec for spec in LIMITS})

# -- the service's operations surface (issue 33) and the shapes of inputs (issue 32), declared
# in goldeval.core.limit_specs --

LIMITS = (*LIMITS, *SERVICE_LIMITS, *INPUT_SHAPE_LIMITS)
LIMITS_BY_NAME.update({spec.name: spec for spec in LIMITS})
