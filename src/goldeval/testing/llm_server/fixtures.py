"""Replaying a dataset's recorded answers: ``DIR/fixtures/<id>.out.md`` keyed by prompt."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from goldeval.testing.llm_server.faults import RecordedRequest, Reply, Responder

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------- fixtures


def load_fixture_index(dataset_dir: Path) -> dict[str, str]:
    """prompt -> fixture text, from every ``*.jsonl`` except ``calibration.jsonl``."""
    index: dict[str, str] = {}
    for jsonl in sorted(dataset_dir.glob("*.jsonl")):
        if jsonl.name == "calibration.jsonl":
            continue
        with jsonl.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip() or line.startswith("#"):
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{jsonl}:{lineno}: invalid JSON: {exc.msg}") from None
                if not isinstance(row, dict):
                    continue
                case_id, prompt = row.get("id"), row.get("prompt")
                if case_id is None or not isinstance(prompt, str):
                    continue
                key = prompt.strip()
                if key in index:  # first row wins, as in a dataset with duplicate prompts
                    continue
                path = dataset_dir / "fixtures" / f"{case_id}.out.md"
                try:
                    # Same decoding as the fixture provider, so scores match fixture mode.
                    index[key] = path.read_bytes().decode("utf-8", errors="replace")
                except OSError:
                    log.warning("no fixture %s for case %s", path, case_id)
    return index


def prompt_lookup(
    index: Mapping[str, str], default: str | Reply | None
) -> Callable[[RecordedRequest], Reply | str]:
    """Exact match of the last user message, else the longest prompt it contains.

    The containment fallback matters because providers may wrap the prompt in a template
    (retrieved context, instructions) before sending it.
    """
    by_length = sorted(index, key=len, reverse=True)

    def respond(request: RecordedRequest) -> Reply | str:
        text = (request.last_user_message or "").strip()
        hit = index.get(text)
        if hit is None and text:
            for prompt in by_length:
                if prompt and prompt in text:
                    hit = index[prompt]
                    break
        if hit is not None:
            return hit
        if default is not None:
            return default
        return Reply(status=404, error=f"goldeval fake server: no fixture for prompt {text!r}")

    return respond


def fixture_responder(
    dataset_dir: str | os.PathLike[str], *, default: str | Reply | None = None
) -> Responder:
    """A responder replaying ``DIR/fixtures/<id>.out.md`` for the row whose prompt was sent.

    Rows come from every ``DIR/*.jsonl`` except ``calibration.jsonl`` (fields ``id`` and
    ``prompt``); fixture files are read once, now. An unknown prompt gets ``default``, or a
    404 with an explanatory ``error`` when ``default`` is ``None`` (a live run against the
    wrong dataset should fail loudly, not score "ok" answers).
    """
    path = Path(dataset_dir)
    if path.is_file():
        path = path.parent
    if not path.is_dir():
        raise FileNotFoundError(f"dataset directory not found: {path}")
    return prompt_lookup(load_fixture_index(path), default)
