"""A golden case: one validated dataset row, with the kinds that drive slices and metrics."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from goldeval.core.jsoncanon import jackson_pretty, jackson_string
from goldeval.dataset.profiles import JAVA_AUTOTEST, get_profile

#: expect keys of the reference schema, in the reference's serialisation order.
REFERENCE_EXPECT_KEYS = ("layer", "class", "status", "rag", "refuse", "contains", "red")


@dataclass(frozen=True, slots=True)
class GoldenCase:
    id: str
    prompt: str
    expect: dict[str, Any]
    must_not: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    line: int = 0
    #: The dataset's profile (``dataset.profiles``): it decides the kinds.
    profile: str = field(default=JAVA_AUTOTEST, compare=False)
    #: Template variables of the row (``vars``).
    vars: dict[str, Any] = field(default_factory=dict)
    #: A conversation row's turns (``messages``), image files read into data URLs.
    messages: list[dict[str, Any]] | None = None
    #: The row's request options (``request``), before the dataset's are merged in.
    request: dict[str, Any] = field(default_factory=dict)

    @property
    def refuse(self) -> bool:
        return self.expect.get("refuse") is True

    @property
    def red(self) -> bool:
        return self.expect.get("red") is True

    @property
    def expected_rag(self) -> list[str]:
        rag = self.expect.get("rag")
        return list(rag) if isinstance(rag, list) else []

    @property
    def kinds(self) -> list[str]:
        """The case's kinds under its profile (the reference's: reference section 1.5)."""
        return get_profile(self.profile).kinds(self)

    def canonical(self) -> dict[str, Any]:
        """The row as the reference's GoldenCase record serialises it (for datasetHash).

        Reference fields come first, in its order and with its defaults (``rag``/``contains``
        ``[]``, ``red`` a boolean). Our additions (other expect keys, tags, metadata) follow
        only when present, so reference rows hash exactly as in the reference while any
        change to our fields still changes the hash.
        """
        expect: dict[str, Any] = {
            "layer": self.expect.get("layer"),
            "class": self.expect.get("class"),
            "status": self.expect.get("status"),
            "rag": self.expect.get("rag") or [],
            "refuse": self.expect.get("refuse"),
            "contains": self.expect.get("contains") or [],
            "red": self.expect.get("red") is True,
        }
        for key in sorted(self.expect):
            if key not in REFERENCE_EXPECT_KEYS:
                expect[key] = _sorted_json(self.expect[key])
        row: dict[str, Any] = {
            "id": self.id,
            "prompt": self.prompt,
            "expect": expect,
            "must_not": list(self.must_not),
        }
        if self.tags:
            row["tags"] = list(self.tags)
        if self.metadata:
            row["metadata"] = _sorted_json(self.metadata)
        if self.vars:
            row["vars"] = _sorted_json(self.vars)
        if self.messages is not None:
            row["messages"] = [_sorted_json(_hashable_turn(t)) for t in self.messages]
        if self.request:
            row["request"] = _sorted_json(self.request)
        explicit = self.explicit_defaults()
        if explicit:
            row["explicit"] = explicit
        return row

    def explicit_defaults(self) -> list[str]:
        """Reference expect keys written with the value their absence serialises to.

        The reference record fills ``rag``/``contains`` with ``[]`` and ``red`` with ``false``,
        so ``"rag": []`` and no ``rag`` would hash alike, yet grading differs: a present key
        makes the contract grader apply and grades retrieval. Listing such keys (only when
        there is one: reference rows never write an empty default) keeps reference hashes
        while every input that can change a verdict changes the hash.
        """
        e = self.expect
        return [
            key
            for key, empty in (("contains", []), ("rag", []), ("red", False))
            if key in e and e[key] == empty and type(e[key]) is type(empty)
        ]


def _hashable_turn(turn: dict[str, Any]) -> dict[str, Any]:
    """A turn as it enters the dataset hash: an image part by its SHA-256, not its bytes."""
    content = turn.get("content")
    if not isinstance(content, list):
        return turn
    parts = []
    for part in content:
        if part.get("type") == "image":
            digest = hashlib.sha256(str(part.get("url", "")).encode("ascii")).hexdigest()
            parts.append({"type": "image", "path": part.get("path"), "sha256": digest})
        else:
            parts.append(part)
    return {**turn, "content": parts}


def _sorted_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted_json(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted_json(v) for v in value]
    return value


_encode = json.encoder.encode_basestring  # the C encoder behind json.dumps(ensure_ascii=False)


def _jstr(value: str) -> str:
    text = _encode(value)
    return jackson_string(value) if "\\u00" in text else text


def _jlist(values: Any) -> str:
    if not values:
        return "[ ]"
    return (
        "[ "
        + ", ".join(_jstr(v) if isinstance(v, str) else jackson_pretty(v, 1) for v in values)
        + " ]"
    )


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return _jstr(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def canonical_text(case: GoldenCase) -> str:
    """``jackson_pretty(case.canonical(), 1)`` for a row inside the top-level array, built
    directly: the generic renderer made hashing 100,000 rows take seconds."""
    e = case.expect
    extra = [k for k in e if k not in REFERENCE_EXPECT_KEYS]
    if (
        extra
        or case.metadata
        or case.vars
        or case.messages is not None
        or case.request
        or case.explicit_defaults()
        or any(
            not isinstance(e.get(k), (str, int, type(None))) for k in ("layer", "class", "status")
        )
    ):
        return jackson_pretty(case.canonical(), 0)
    parts = [
        '{\n  "id" : ',
        _jstr(case.id),
        ',\n  "prompt" : ',
        _jstr(case.prompt),
        ',\n  "expect" : {\n    "layer" : ',
        _scalar(e.get("layer")),
        ',\n    "class" : ',
        _scalar(e.get("class")),
        ',\n    "status" : ',
        _scalar(e.get("status")),
        ',\n    "rag" : ',
        _jlist(e.get("rag")),
        ',\n    "refuse" : ',
        _scalar(e.get("refuse")),
        ',\n    "contains" : ',
        _jlist(e.get("contains")),
        ',\n    "red" : ',
        "true" if e.get("red") is True else "false",
        '\n  },\n  "must_not" : ',
        _jlist(case.must_not),
    ]
    if case.tags:
        parts += [',\n  "tags" : ', _jlist(case.tags)]
    parts.append("\n}")
    return "".join(parts)


def selected_attempts(
    attempts: Mapping[str, Iterable[tuple[str, int]]], selected: Iterable[str], configured: int
) -> dict[str, list[int]] | None:
    """The protocol's ``selectedAttempts``: None when every selected case ran attempts
    1..``configured`` (for every model), else ``{caseId: [attempt numbers run]}``.

    ``-k attempt2`` with ``--golden-attempts=3`` runs one attempt in three: a run measured that
    way is a different protocol from a full one (its rates rest on other attempts), so it must
    not be compared with a full baseline. Absent for a full run, so full runs and their
    baselines (captured before this key existed) keep comparing equal.
    """
    full = set(range(1, configured + 1))
    out: dict[str, list[int]] = {}
    partial = False
    for case_id in sorted(set(selected)):
        by_model: dict[str, set[int]] = {}
        for model, index in attempts.get(case_id, ()):
            by_model.setdefault(model, set()).add(index)
        if not by_model or any(indices != full for indices in by_model.values()):
            partial = True
        out[case_id] = sorted(set().union(*by_model.values())) if by_model else []
    return out if partial else None


def dataset_hash(cases: list[GoldenCase]) -> str:
    """Order-independent, content-sensitive SHA-256 of the rows (reference DatasetIdentity)."""
    ordered = sorted(cases, key=lambda c: c.id)
    if not ordered:
        return hashlib.sha256(b"[ ]").hexdigest()
    # The bytes of "[ " + ", ".join(texts) + " ]", fed piece by piece: joining them first
    # held the whole dataset's text twice at once (the largest peak of a collection).
    digest = hashlib.sha256(b"[ ")
    for n, case in enumerate(ordered):
        if n:
            digest.update(b", ")
        digest.update(canonical_text(case).encode("utf-8"))
    digest.update(b" ]")
    return digest.hexdigest()
