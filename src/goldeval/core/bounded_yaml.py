"""YAML read with bounds (the dataset manifests, promptfoo files for ``goldeval import``):
aliases, nesting and the size with every alias expanded are counted while the document is
composed, before anything is constructed, so an alias bomb of a few hundred bytes stops
after a few thousand steps (limits ``yaml_aliases``, ``yaml_nodes``, ``yaml_depth``,
``file_bytes``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from goldeval.core.limits import LimitExceeded, default, describe_bytes

_REDUCE_HINT = "split the file or trim it; the limits are listed in docs/reliability.md"


class BoundedYamlLoader(yaml.SafeLoader):
    """A safe YAML loader that counts while it composes, before anything is constructed.

    Aliases (limit ``yaml_aliases``), nesting (``yaml_depth``), the number of
    nodes with every alias expanded (``yaml_nodes``) and the scalar text with every
    alias expanded (``file_bytes``): an alias bomb of a few hundred bytes is refused after a
    few thousand steps instead of being built 9**9 times. A recursive alias (``&a [*a]``) is
    refused too: it has no JSON form.
    """

    def __init__(self, stream: str, path: Path) -> None:
        super().__init__(stream)
        self.path = path
        self._aliases = 0
        self._nodes = 0
        self._chars = 0
        self._depth = 0
        #: id(node) -> (nodes, chars) it stands for, all aliases expanded; set once composed
        self._expanded: dict[int, tuple[int, int]] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._count_alias(self.peek_event())  # type: ignore[no-untyped-call]
            return super().compose_node(parent, index)
        event = self.peek_event()  # type: ignore[no-untyped-call]
        self._depth += 1
        self._check("yaml_depth", self._depth, event, "nesting")
        nodes, chars = self._nodes, self._chars
        self._add(1, len(getattr(event, "value", "") or ""), event)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        self._expanded[id(node)] = (self._nodes - nodes, self._chars - chars)
        return node

    def _count_alias(self, event: Any) -> None:
        self._aliases += 1
        self._check("yaml_aliases", self._aliases, event, "aliases")
        target = self.anchors.get(event.anchor)
        if target is None:
            return  # an undefined alias: the composer's own error says so
        size = self._expanded.get(id(target))
        if size is None:
            raise LimitExceeded(
                "yaml_aliases",
                f"alias *{event.anchor} refers to the node it is inside (a recursive alias)",
                path=self.path,
                line=event.start_mark.line + 1,
                hint="write the value out instead of a recursive alias",
            )
        self._add(*size, event)

    def _add(self, nodes: int, chars: int, event: Any) -> None:
        self._nodes += nodes
        self._chars += chars
        self._check("yaml_nodes", self._nodes, event, "nodes (aliases expanded)")
        limit = int(default("file_bytes"))
        if self._chars > limit:
            raise LimitExceeded(
                "file_bytes",
                f"the text with its aliases expanded is over {describe_bytes(limit)}",
                path=self.path,
                line=event.start_mark.line + 1,
                hint=_REDUCE_HINT,
            )

    def _check(self, name: str, value: int, event: Any, what: str) -> None:
        limit = int(default(name))
        if value > limit:
            raise LimitExceeded(
                name,
                f"more than {limit} {what} (limit {name})",
                path=self.path,
                line=event.start_mark.line + 1,
                hint=_REDUCE_HINT,
            )


def load_yaml(text: str, path: Path) -> tuple[Any, Any]:
    """The composed node (for line numbers) and the data of one YAML document.

    A document over ``yaml_bytes`` is refused before parsing: the pure-Python parser reads
    about 3 MB a second, so a manifest just under ``file_bytes`` (a 100 MB comment) took
    minutes of collection, which the node, alias and depth counts do not bound."""
    most = int(default("yaml_bytes"))
    size = len(text) if text.isascii() or len(text) > most else len(text.encode("utf-8"))
    if size > most:
        raise LimitExceeded(
            "yaml_bytes",
            f"the YAML file has {describe_bytes(size)}, more than {describe_bytes(most)} "
            "(limit yaml_bytes)",
            path=path,
            hint="a manifest or promptfoo file is configuration: move long texts into files",
        )
    loader = BoundedYamlLoader(text, path)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return node, data
