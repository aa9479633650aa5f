"""Fixture mode: replay the recorded answer ``fixtures/<id>.out.md``; no model is called.

The text is only part of what the graders read: tool calls, the finish reason and the token
usage live in a JSON sidecar next to it, ``fixtures/<id>.out.json`` (sorted keys, indented,
so a re-recording shows as a readable diff). Record mode writes it whenever the answer had any
of them; replay reads it when present. A fixture without a sidecar is a plain text answer (the
hand-written fixtures of the bundled datasets).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from goldeval.core.errors import SECRET_IN_ANSWER, DatasetError, ProviderError
from goldeval.core.limits import LimitExceeded, default, loads_json
from goldeval.core.models import token_count_problem
from goldeval.core.safe_files import ContainedFiles, InputFileTooLarge
from goldeval.providers.base import Answer, Provider, ProviderRequest, ToolCall

#: The sidecar's keys (camelCase, as in run.json).
SIDECAR_KEYS = ("finishReason", "inputTokens", "outputTokens", "toolCalls")


def fixtures_folder(dataset_dir: Path, variant: str | None = None) -> Path:
    """``fixtures/``, or a variant's ``fixtures/<variant>/``."""
    folder = dataset_dir / "fixtures"
    return folder if variant is None else folder / variant


def fixture_path(dataset_dir: Path, case_id: str, variant: str | None = None) -> Path:
    return fixtures_folder(dataset_dir, variant) / f"{case_id}.out.md"


def sidecar_path(dataset_dir: Path, case_id: str, variant: str | None = None) -> Path:
    """``fixtures/<id>.out.json``: what the answer held besides its text."""
    return fixtures_folder(dataset_dir, variant) / f"{case_id}.out.json"


def recordable_attempt(attempts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The attempt (run.json form) record mode writes as a row's fixture: the first with an
    output. None when no attempt has one, or when any attempt's answer held a secret the run
    knows (``SECRET_IN_ANSWER``): a row whose model echoed a key once gets no fixture, not
    even a clean answer of another attempt, so the refusal always shows as a missing file."""
    if any(a.get("errorKind") == SECRET_IN_ANSWER for a in attempts):
        return None
    return next((a for a in attempts if a.get("output") is not None), None)


def answer_sidecar(answer: Answer) -> dict[str, Any] | None:
    """The sidecar of an answer: its tool calls, finish reason and usage; ``None`` if none."""
    data: dict[str, Any] = {}
    if answer.tool_calls:
        data["toolCalls"] = [call.dump() for call in answer.tool_calls]
    if answer.finish_reason is not None:
        data["finishReason"] = answer.finish_reason
    if answer.tokens_estimated:
        return data or None  # estimates are not the provider's usage: never recorded as such
    if answer.input_tokens is not None:
        data["inputTokens"] = answer.input_tokens
    if answer.output_tokens is not None:
        data["outputTokens"] = answer.output_tokens
    return data or None


def dumps_sidecar(data: dict[str, Any]) -> str:
    """Sorted keys, two-space indent, a final newline: stable bytes for a reviewable diff."""
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def _token(value: Any, where: str) -> int | None:
    if value is None:
        return None
    problem = token_count_problem(value)
    if problem is not None:
        raise DatasetError(f"{where}: {problem}")
    return int(value)


def parse_sidecar(text: str, where: str) -> dict[str, Any]:
    """Check a sidecar's JSON; errors name the file, line and field (``DatasetError``)."""
    fix = "fix the file or delete it (then re-record with --golden-mode=record)"
    try:
        data = loads_json(text, what="the sidecar")
    except LimitExceeded as exc:
        raise DatasetError(f"{where}: {exc.message}; {fix}") from None
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        at = f" line {line}" if line else ""
        raise DatasetError(f"{where}{at}: not valid JSON ({exc}); {fix}") from None
    if not isinstance(data, dict):
        raise DatasetError(f"{where}: must be a JSON object; {fix}")
    unknown = sorted(set(data) - set(SIDECAR_KEYS))
    if unknown:
        raise DatasetError(
            f"{where}: unknown field {unknown[0]!r} (known: {', '.join(SIDECAR_KEYS)}); {fix}"
        )
    calls = data.get("toolCalls", [])
    if not isinstance(calls, list):
        raise DatasetError(f"{where}: field toolCalls must be a list; {fix}")
    most = int(default("answer_tool_calls"))
    if len(calls) > most:
        raise DatasetError(
            f"{where}: field toolCalls holds {len(calls):,} tool calls, more than one answer "
            f"makes (answer_tool_calls, {most}); {fix}"
        )
    for n, call in enumerate(calls):
        if (
            not isinstance(call, dict)
            or not isinstance(call.get("name"), str)
            or not isinstance(call.get("arguments", {}), dict)
        ):
            raise DatasetError(
                f'{where}: field toolCalls[{n}] must be {{"name": str, "arguments": object}}; {fix}'
            )
    reason = data.get("finishReason")
    if reason is not None and not isinstance(reason, str):
        raise DatasetError(f"{where}: field finishReason must be a string; {fix}")
    for key in ("inputTokens", "outputTokens"):
        _token(data.get(key), f"{where}: field {key}")
    return data


def apply_sidecar(answer: Answer, data: dict[str, Any]) -> Answer:
    """The replayed answer with the sidecar's tool calls, finish reason and usage."""
    answer.tool_calls = [
        ToolCall(call["name"], dict(call.get("arguments") or {}))
        for call in data.get("toolCalls", [])
    ]
    answer.finish_reason = data.get("finishReason")
    answer.input_tokens = data.get("inputTokens")
    answer.output_tokens = data.get("outputTokens")
    return answer


class FixtureProvider(Provider):
    name = "fixture"

    def __init__(self, dataset_dir: Path) -> None:
        self.dataset_dir = dataset_dir
        self._files = ContainedFiles(dataset_dir)
        self._folder = dataset_dir / "fixtures"

    def complete(self, request: ProviderRequest) -> Answer:
        start = time.perf_counter()
        case_id = request.case.id
        name = f"{case_id}.out.md"
        # A variant replays its own recorded answers (fixtures/<variant>/): the variant's name
        # is a plain folder name (goldeval.dataset.variants.NAME_PATTERN), read inside the
        # dataset like every fixture.
        folder = fixtures_folder(self.dataset_dir, request.variant)
        try:
            # Checked at collection for the selected rows; checked again here because a file
            # can be swapped for a link out (/proc/self/environ) or a FIFO mid-run, and a
            # conftest may override golden_case with a row the collection never saw.
            data = self._files.read(folder, name, what="recorded answer", limit="fixture_bytes")
            if data is None:
                path = folder / name
                raise DatasetError(f"recorded answer {path} not found", path=path)
            side_name = f"{case_id}.out.json"
            side_text = None
            side = self._files.read(
                folder, side_name, what="recorded answer sidecar", limit="fixture_bytes"
            )
            if side is not None:
                side_text = side.decode("utf-8", errors="replace")
        except InputFileTooLarge as exc:
            # The file's size is wrong: a rerun cannot help (exit 4, not 75).
            raise ProviderError("CONFIG_ERROR", f"cannot replay fixture: {exc}") from None
        except DatasetError as exc:
            raise ProviderError("PROVIDER_ERROR", f"cannot read fixture: {exc}") from None
        sidecar = None
        if side_text is not None:
            try:
                sidecar = parse_sidecar(
                    side_text, str(folder.relative_to(self.dataset_dir) / side_name)
                )
            except DatasetError as exc:
                # The file's content is wrong: a rerun cannot help (exit 4, not 75).
                raise ProviderError("CONFIG_ERROR", f"cannot replay fixture: {exc}") from None
        text = data.decode("utf-8", errors="replace")
        answer = Answer(text=text, duration_ms=max(1, round((time.perf_counter() - start) * 1000)))
        return apply_sidecar(answer, sidecar) if sidecar is not None else answer
