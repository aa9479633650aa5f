"""The declarations of some limits (:class:`LimitSpec`), kept apart from the budget module
(goldeval.core.limits, which adds them to its :data:`~goldeval.core.limits.LIMITS` and holds
the checks) so that neither grows past a module's size."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LimitSpec:
    """One bound: its name, default, where it is changed, and what it bounds."""

    name: str
    default: int | float
    unit: str
    #: The option (``--golden-...``) and/or ini key (``golden_...``) that changes it, as shown in
    #: docs ("" when it is fixed); tests/unit/test_limits.py checks each name exists.
    setting: str
    bounds: str


#: The service's operations surface (issue 33: O(1) scrapes, O(page) pages, bounded requests).
SERVICE_LIMITS: tuple[LimitSpec, ...] = (
    LimitSpec(
        "metrics_store_seconds",
        2,
        "seconds",
        "",
        "the store reads of one /metrics scrape; a store slower than this (or down) is reported "
        "as goldeval_store_up 0 with the process series, never a timed-out scrape",
    ),
    LimitSpec(
        "ui_page_runs",
        50,
        "runs",
        "",
        "runs on one page of the service's run index (/ui/); older runs are reached with the "
        "page's `?before=` link",
    ),
    LimitSpec(
        "ui_compare_whole_attempts",
        1000,
        "attempts",
        "",
        "attempts of the larger run up to which a run page's `?compare=` shows the compare "
        "endpoint's verdict (it reads both runs); above, the stored rates side by side",
    ),
    LimitSpec(
        "ui_loads_per_key",
        2,
        "requests",
        "",
        "/ui/ pages one API key may have loading at once; one more is 429 with Retry-After, so "
        "one key cannot take the server's thread pool (issue 33: six loads took 71 s)",
    ),
    LimitSpec(
        "ui_cached_pages",
        32,
        "pages",
        "",
        "rendered /ui/ index pages kept, per role and cursor, until a run is queued, finishes "
        "or is deleted; the least recently used goes first",
    ),
    LimitSpec(
        "service_header_bytes",
        64 * 1024,
        "bytes",
        "",
        "a request's line and headers sent to the evaluation service, all together (uvicorn's "
        "httptools parser has no bound: 10 million headers took 1.3 GB); more is 431 and closed",
    ),
)

#: The shapes of inputs that their byte size does not bound (issue 32).
INPUT_SHAPE_LIMITS: tuple[LimitSpec, ...] = (
    LimitSpec(
        "answer_tool_calls",
        256,
        "tool calls",
        "",
        "tool calls of one answer (whole or streamed; a stream's pieces name their call by "
        "index) and of a recorded sidecar: a 30 MiB stream of 20,000 distinct indices per "
        "event took 1.5 GB; more is a PARSER_ERROR naming the limit (a sidecar's: its file)",
    ),
    LimitSpec(
        "yaml_bytes",
        4 * 1024 * 1024,
        "bytes",
        "",
        "one YAML file (a dataset manifest, a promptfoo file read by `goldeval import`): the "
        "YAML parser reads about 3 MB a second, so a file at `file_bytes` took minutes",
    ),
)
