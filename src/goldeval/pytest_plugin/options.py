"""Command-line options and ini keys (one group, every flag prefixed ``--golden``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from goldeval.core.deadline import positive_seconds

#: ``group.addoption`` of the goldeval option group.
_Add = Callable[..., Any]


def _positive_int(text: str) -> int:
    if not text.strip().isascii():  # int() takes any Unicode digit ("２")
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (digits 0-9)")
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _attempts(text: str) -> int | str:
    """``N`` (attempts per case) or ``auto:MAX`` (adaptive attempts, 2 <= MAX)."""
    if text.startswith("auto:"):
        most = _positive_int(text.removeprefix("auto:"))
        if most < 2:
            raise argparse.ArgumentTypeError(f"{text!r}: auto:MAX needs a MAX of at least 2")
        return f"auto:{most}"
    return _positive_int(text)


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def _seconds(text: str) -> float:
    try:
        return positive_seconds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a number above 0")
    return value


@dataclass(frozen=True)
class RefusedValue:
    """A value its option refused, kept so that the session refuses it as it configures
    (:func:`refuse_bad_values`, a usage error, exit 4) rather than pytest's argument parser
    before any plugin hook: that left LAST_SESSION on an earlier session's green run, which
    ``goldeval gate`` then re-gated (exit 0 right after a session that exited 4)."""

    flag: str
    problem: str


def _lenient(flag: str, kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return kind(text)
        except argparse.ArgumentTypeError as exc:
            return RefusedValue(flag, str(exc))

    return parse


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    def choose(text: str) -> str:
        if text not in choices:
            raise argparse.ArgumentTypeError(
                f"invalid choice: {text!r} (choose from {', '.join(choices)})"
            )
        return text

    return choose


def _checked(add: _Add) -> _Add:
    """``add`` with every typed or choice option parsed leniently (see :class:`RefusedValue`)."""

    def checked(*flags: str, **kwargs: Any) -> Any:
        choices = kwargs.pop("choices", None)
        if choices is not None:
            kwargs["type"] = _one_of(tuple(choices))
            kwargs.setdefault("metavar", "{" + ",".join(choices) + "}")
        if callable(kwargs.get("type")):
            kwargs["type"] = _lenient(flags[0], kwargs["type"])
        return add(*flags, **kwargs)

    return checked


def refuse_bad_values(config: pytest.Config) -> None:
    """A usage error for the first option value :func:`_lenient` kept as refused."""
    for value in vars(config.option).values():
        if isinstance(value, RefusedValue):
            raise pytest.UsageError(f"argument {value.flag}: {value.problem}")


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("goldeval", "golden datasets (pytest-goldeval)")
    add = _checked(group.addoption)
    # In the order of `pytest --help`.
    _dataset_options(add)
    _model_options(add)
    _call_options(add)
    _budget_options(add)
    _baseline_options(add)
    _judge_options(add)
    _recording_options(add)
    _ini_keys(parser)


def _dataset_options(add: _Add) -> None:
    """What is evaluated and where its artifacts go."""
    add(
        "--golden",
        metavar="ID",
        default=None,
        help="evaluate the golden dataset with this id (manifest `version`) or folder",
    )
    add(
        "--golden-mode",
        choices=("fixture", "live", "record"),
        default=None,
        help="fixture: replay recorded answers (default); live: call the model; "
        "record: call the model and write answers as fixtures",
    )
    add(
        "--golden-attempts",
        type=_attempts,
        default=None,
        metavar="N",
        help="attempts per case (one test item each; default 1); auto:MAX in a session of "
        "compared variants: more attempts only for unsettled cases, up to MAX",
    )
    add(
        "--golden-out",
        default=None,
        metavar="DIR",
        help="run artifacts folder (default .goldeval/runs)",
    )
    add(
        "--golden-artifacts",
        choices=("failure", "always", "never"),
        default=None,
        help="per-case artifacts: for failed/errored cases (default), always or never",
    )


def _model_options(add: _Add) -> None:
    """Which model answers in live and record mode."""
    add(
        "--golden-provider",
        default=None,
        metavar="NAME",
        help="live provider: ollama (default), openai, or one registered by a plugin",
    )
    add("--golden-model", default=None, metavar="MODEL", help="model for live mode")
    add(
        "--golden-models",
        default=None,
        metavar="A,B",
        help="several models side by side: items are parametrised by model",
    )
    add(
        "--golden-variants",
        default=None,
        metavar="A,B",
        help="the manifest's variants to run side by side (default: all it declares)",
    )
    add(
        "--golden-base-url",
        default=None,
        metavar="URL",
        help="provider base URL (default: OLLAMA_HOST / OPENAI_BASE_URL)",
    )


def _call_options(add: _Add) -> None:
    """How one model call is bounded, retried and paced."""
    add(
        "--golden-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="read timeout per model call (default OLLAMA_TIMEOUT_MINUTES or 180 s)",
    )
    add(
        "--golden-call-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="bound on one try of a model call, whole: connect, wait and the whole body or "
        "stream (default: connect timeout + --golden-timeout); never past --golden-deadline",
    )
    add(
        "--golden-max-response-bytes",
        type=_positive_int,
        default=None,
        metavar="N",
        help="largest model response body read (default 32 MiB; ini golden_max_response_bytes); "
        "a bigger one is ERROR RESPONSE_TOO_LARGE",
    )
    add(
        "--golden-retries",
        type=_non_negative_int,
        default=None,
        metavar="N",
        help="retries after the first try on 429/408/5xx/timeouts (default 3)",
    )
    add(
        "--golden-concurrency",
        type=_positive_int,
        default=None,
        metavar="N",
        help="live calls in flight per pytest process (default 8)",
    )
    add(
        "--golden-concurrency-mode",
        choices=("adaptive", "fixed"),
        default=None,
        help="adaptive (default): find the provider's capacity, at most --golden-concurrency "
        "calls in flight; fixed: always --golden-concurrency",
    )
    add(
        "--golden-rpm",
        type=_positive_number,
        default=None,
        metavar="N",
        help="live calls per minute at most (per pytest process)",
    )
    add(
        "--golden-tpm",
        type=_positive_number,
        default=None,
        metavar="N",
        help="tokens per minute at most, estimated before and corrected after each call",
    )
    add(
        "--golden-stream",
        action="store_true",
        default=None,
        help="ask for streamed answers (a slow answer is no read timeout while tokens arrive); "
        "records time to first token",
    )


def _budget_options(add: _Add) -> None:
    """When the remaining attempts are skipped (the run is then incomplete)."""
    add(
        "--golden-max-cost",
        type=_positive_number,
        default=None,
        metavar="AMOUNT",
        help="once live calls have cost this much (prices: golden_prices), the remaining "
        "attempts are SKIPPED (reason budget); the run is incomplete",
    )
    add(
        "--golden-max-tokens",
        type=_positive_int,
        default=None,
        metavar="N",
        help="once live calls have used this many tokens, the remaining attempts are SKIPPED "
        "(reason budget); the run is incomplete",
    )
    add(
        "--golden-deadline",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="attempts not started by then are SKIPPED (reason deadline); the run is incomplete",
    )


def _baseline_options(add: _Add) -> None:
    """The baseline compared with, and the gate."""
    add(
        "--golden-baseline",
        default=None,
        metavar="PATH",
        help="baseline to compare with (default baselines/<dataset-id>[-live].json)",
    )
    add(
        "--golden-save-baseline",
        default=None,
        metavar="PATH",
        help="write this run as a baseline (refuses runs with errors)",
    )
    add(
        "--golden-force-save-baseline",
        action="store_true",
        default=None,
        help="allow --golden-save-baseline to overwrite an existing file",
    )
    add(
        "--golden-no-gate",
        action="store_true",
        default=None,
        help="report metrics and comparison without gating the exit status",
    )


def _judge_options(add: _Add) -> None:
    """The LLM judge (a soft signal, never a gate)."""
    add(
        "--golden-judge",
        action="store_true",
        default=None,
        help="live mode: ask an LLM judge (soft signal, never a gate)",
    )
    add("--golden-judge-model", default=None, metavar="MODEL", help="judge model")
    add(
        "--golden-judge-provider",
        default=None,
        metavar="NAME",
        help="judge provider (ollama, openai or a registered one; default: --golden-provider)",
    )
    add(
        "--golden-judge-base-url",
        default=None,
        metavar="URL",
        help="judge base URL (default: --golden-base-url for the same provider, else the "
        "provider's environment); credentials: GOLDEVAL_JUDGE_API_KEY, GOLDEVAL_JUDGE_USER, "
        "GOLDEVAL_JUDGE_PASSWORD",
    )
    add(
        "--golden-judge-repetitions",
        type=_positive_int,
        default=None,
        metavar="N",
        help="judge calls per attempt (stability = majority share)",
    )
    add(
        "--golden-judge-max-tokens",
        type=_positive_int,
        default=None,
        metavar="N",
        help="max_tokens of every judge call (default: the golden_judge_max_tokens ini key, "
        "else 512)",
    )


def _recording_options(add: _Add) -> None:
    """Caches, fixtures, the run store and report files."""
    add(
        "--golden-cache",
        default=None,
        metavar="DIR",
        help="response cache folder (keyed by provider, model, messages and attempt)",
    )
    add(
        "--golden-overwrite-fixtures",
        action="store_true",
        default=None,
        help="record mode: allow replacing existing fixtures",
    )
    add("--golden-experiment", default=None, metavar="NAME", help="experiment label for the run")
    add(
        "--golden-store",
        default=None,
        metavar="URL",
        help="run store: a SQLite path (default .goldeval/goldeval.sqlite3), "
        "postgresql://user@host/db, or none",
    )
    add(
        "--golden-run-key",
        default=None,
        metavar="KEY",
        help="name the run across processes (e.g. the CI pipeline id): a rerun with the same "
        "key skips attempts already graded; shards with one key add up to one run",
    )
    add(
        "--golden-rerun-errors",
        action="store_true",
        default=None,
        help="with --golden-run-key: retry only the attempts that ended as ERROR",
    )
    add(
        "--golden-junit",
        default=None,
        metavar="PATH",
        help="write a dashboard JUnit XML: one testcase per case and per gate rule",
    )


def _ini_keys(parser: pytest.Parser) -> None:
    """The ini keys (pytest.ini / pyproject.toml)."""
    parser.addini(
        "golden_prices",
        "prices per model, one per line: MODEL = INPUT OUTPUT (per 1k tokens)",
        type="linelist",
        default=[],
    )
    parser.addini(
        "golden_max_response_bytes",
        "largest model response body read, in bytes (default 32 MiB; "
        "--golden-max-response-bytes wins)",
        default=None,
    )
    parser.addini(
        "golden_judge_max_tokens",
        "max_tokens of every judge call (the verdict JSON is small; default 512)",
        default="",
    )
    parser.addini("golden_root", "folder holding the golden datasets", default="golden")
    parser.addini("golden_out", "run artifacts folder", default=".goldeval/runs")
    parser.addini(
        "golden_collect_at_exit",
        "run CPython's full garbage collections at interpreter exit after a golden session "
        "(off by default: they walk every object left and find nothing; "
        "docs/performance.md)",
        type="bool",
        default=False,
    )
    parser.addini(
        "golden_junit_properties",
        "add per-attempt <properties> to --junitxml",
        type="bool",
        default=False,
    )
