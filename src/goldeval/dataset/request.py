"""Request options (manifest ``request:`` and a row's ``request:``) and conversation turns.

Both are validated at collection with the field named; both are part of the protocol (the
manifest's options enter the grader configuration fingerprint, a row's enter the dataset hash).
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from goldeval.core.errors import DatasetError
from goldeval.core.limits import LimitExceeded, check_size, default
from goldeval.core.safe_files import InputFileTooLarge, read_regular_file

#: The request options a dataset or a row may set.
REQUEST_KEYS = (
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "stop",
    "tools",
    "tool_choice",
    "response_format",
)
ROLES = ("system", "user", "assistant", "tool")
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class FunctionSpec(_Strict):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = None
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    strict: StrictBool | None = None


class Tool(_Strict):
    type: Literal["function"] = "function"
    function: FunctionSpec


class ToolChoiceFunction(_Strict):
    name: str


class ToolChoice(_Strict):
    type: Literal["function"] = "function"
    function: ToolChoiceFunction


class JsonSchemaFormat(_Strict):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    schema_: dict[str, Any] = Field(alias="schema")
    strict: StrictBool | None = None
    description: str | None = None


class ResponseFormat(_Strict):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class RequestOptions(_Strict):
    """What a request may carry beyond the messages; every field optional."""

    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, ge=0.0, le=1.0)
    max_tokens: StrictInt | None = Field(default=None, ge=1)
    seed: StrictInt | None = None
    stop: str | list[str] | None = None
    tools: list[Tool] | None = None
    tool_choice: Literal["auto", "none", "required"] | ToolChoice | None = None
    response_format: ResponseFormat | None = None

    def plain(self) -> dict[str, Any]:
        """The options set, as JSON-plain data (wire names; ``schema`` not ``schema_``)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


def parse_request(value: Any) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """``value`` validated: (plain options, [(field under request, problem)])."""
    if not isinstance(value, Mapping):
        return {}, [("", f"must be an object, got {type(value).__name__}")]
    try:
        options = RequestOptions.model_validate(dict(value))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"] if not isinstance(p, int) or True)
            problems.append((loc, _message(err)))
        return {}, problems[:5]
    plain = options.plain()
    problems = []
    if options.response_format is not None:
        rf = options.response_format
        if rf.type == "json_schema" and rf.json_schema is None:
            problems.append(("response_format.json_schema", "json_schema needs {name, schema}"))
        if rf.type != "json_schema" and rf.json_schema is not None:
            problems.append(("response_format.json_schema", "only for type json_schema"))
    if isinstance(options.stop, list) and not options.stop:
        problems.append(("stop", "an empty list stops nothing; leave stop out"))
    if options.tool_choice is not None and not options.tools and options.tool_choice != "none":
        problems.append(("tool_choice", "set without tools"))
    if isinstance(options.tool_choice, ToolChoice) and options.tools:
        names = {t.function.name for t in options.tools}
        if options.tool_choice.function.name not in names:
            problems.append(
                (
                    "tool_choice.function.name",
                    f"{options.tool_choice.function.name!r} is not one of the tools "
                    f"({', '.join(sorted(names))})",
                )
            )
    return plain, problems


def _message(err: Mapping[str, Any]) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown option" if len(err["loc"]) == 1 else "unknown key"
    return str(err["msg"])


def merge_request(base: Mapping[str, Any], row: Mapping[str, Any]) -> dict[str, Any]:
    """A row's options over the dataset's (key by key: a row's ``tools`` replaces them)."""
    return {**base, **row}


# -- conversation rows ---------------------------------------------------------------------


def check_messages(value: Any, folder: Path) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """A row's ``messages``: (turns with image files read into data URLs, problems).

    A turn is ``{"role": system|user|assistant|tool, "content": text | [parts]}``; an
    assistant turn may carry ``tool_calls`` and a tool turn ``tool_call_id``. A part is
    ``{"type": "text", "text": ...}`` or ``{"type": "image", "path": <file in the dataset
    folder>}`` / ``{"type": "image", "url": "data:image/png;base64,..."}``.
    """
    problems: list[tuple[str, str]] = []
    if not isinstance(value, list) or not value:
        return [], [("messages", "must be a non-empty list of turns")]
    turns: list[dict[str, Any]] = []
    for i, turn in enumerate(value):
        where = f"messages[{i}]"
        if not isinstance(turn, dict):
            problems.append((where, f"must be an object, got {type(turn).__name__}"))
            continue
        role = turn.get("role")
        if role not in ROLES:
            problems.append((f"{where}.role", f"must be one of {', '.join(ROLES)}"))
            continue
        allowed = {"role", "content", "name"}
        if role == "assistant":
            allowed.add("tool_calls")
        if role == "tool":
            allowed.add("tool_call_id")
        for key in turn:
            if key not in allowed:
                problems.append((f"{where}.{key}", f"unknown key for a {role} turn"))
        out: dict[str, Any] = {"role": role}
        content = turn.get("content")
        if isinstance(content, str):
            out["content"] = content
        elif isinstance(content, list) and role == "user":
            parts = []
            for j, part in enumerate(content):
                parsed, problem = _part(part, folder)
                if problem:
                    problems.append((f"{where}.content[{j}]", problem))
                else:
                    parts.append(parsed)
            out["content"] = parts
        elif content is None and role == "assistant" and turn.get("tool_calls"):
            out["content"] = ""
        else:
            problems.append(
                (
                    f"{where}.content",
                    "must be text" + (" or a list of parts" if role == "user" else ""),
                )
            )
        if "tool_calls" in turn:
            calls = turn["tool_calls"]
            if not (
                isinstance(calls, list)
                and all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls)
            ):
                problems.append(
                    (f"{where}.tool_calls", "must be a list of {name, arguments} objects")
                )
            else:
                out["tool_calls"] = [
                    {"name": c["name"], "arguments": c.get("arguments") or {}, "id": c.get("id")}
                    for c in calls
                ]
        if role == "tool":
            out["tool_call_id"] = turn.get("tool_call_id")
        if "name" in turn:
            out["name"] = turn["name"]
        turns.append(out)
    if not problems and turns[-1]["role"] not in ("user", "tool"):
        problems.append((f"messages[{len(turns) - 1}].role", "the last turn must be user or tool"))
    return turns, problems


def _part(part: Any, folder: Path) -> tuple[dict[str, Any], str | None]:
    if not isinstance(part, dict):
        return {}, "must be an object"
    kind = part.get("type")
    if kind == "text":
        if set(part) != {"type", "text"} or not isinstance(part.get("text"), str):
            return {}, 'a text part is {"type": "text", "text": "..."}'
        return {"type": "text", "text": part["text"]}, None
    if kind != "image":
        return {}, "type must be text or image"
    if set(part) - {"type", "path", "url"} or ("path" in part) == ("url" in part):
        return {}, 'an image part is {"type": "image", "path": "<file>"} or {"url": "data:..."}'
    if "url" in part:
        return _data_url_image(part["url"])
    return _file_image(part["path"], folder)


def _data_url_image(url: Any) -> tuple[dict[str, Any], str | None]:
    """An image part given as a data URL: one of :data:`IMAGE_TYPES`, at most ``image_bytes``
    decoded (checked on the base64 length, before decoding: a 30 MB URL is not decoded)."""
    header, _, payload = url.partition(",") if isinstance(url, str) else ("", "", "")
    if not header.startswith("data:") or not header.endswith(";base64"):
        return {}, "url must be a data URL (data:image/png;base64,...)"
    mime = header[len("data:") : -len(";base64")].lower()
    if mime not in IMAGE_TYPES:
        return {}, f"the data URL is {mime or 'untyped'}, not a png, jpeg, gif or webp image"
    limit = int(default("image_bytes"))
    size = len(payload) // 4 * 3 - (payload.endswith("=") + payload.endswith("=="))
    try:
        check_size(size, limit, what="the data URL's image", name="image_bytes")
    except LimitExceeded as exc:
        return {}, exc.message + " (use a smaller image)"
    try:
        base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return {}, "the data URL's base64 does not decode"
    return {"type": "image", "url": url}, None


def _file_image(rel: Any, folder: Path) -> tuple[dict[str, Any], str | None]:
    """An image part read from a file of the dataset folder: a regular file inside it, one of
    :data:`IMAGE_TYPES` by its name, its size checked (``fstat``) before it is read."""
    if not isinstance(rel, str) or not rel:
        return {}, "path must be a file name inside the dataset folder"
    path = (folder / rel).resolve()
    if not path.is_relative_to(folder.resolve()):
        return {}, f"{rel!r} is outside the dataset folder"
    if not path.is_file():
        return {}, f"no file {rel!r} in the dataset folder"
    mime = mimetypes.guess_type(path.name)[0]
    if mime not in IMAGE_TYPES:
        return {}, f"{rel!r} is not a png, jpeg, gif or webp image"
    try:
        data = read_regular_file(path, limit="image_bytes")
    except InputFileTooLarge as exc:
        return {}, f"{rel!r}: {exc.message} (use a smaller image)"
    except DatasetError as exc:
        return {}, f"{rel!r}: {exc.message}"
    url = f"data:{mime};base64," + base64.b64encode(data).decode("ascii")
    return {"type": "image", "url": url, "path": rel}, None
