"""Maximum bipartite matching (augmenting paths), used by ``tool_calls_order: any``."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["bipartite"]


def bipartite(ok: Sequence[Sequence[bool]], right: int) -> list[int | None]:
    """For each left item ``i``, a distinct right index ``j`` with ``ok[i][j]`` (or None),
    matching as many left items as possible."""
    owner: list[int | None] = [None] * right

    def augment(i: int, seen: set[int]) -> bool:
        for j in range(right):
            if ok[i][j] and j not in seen:
                seen.add(j)
                current = owner[j]
                if current is None or augment(current, seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(ok)):
        augment(i, set())
    result: list[int | None] = [None] * len(ok)
    for j, who in enumerate(owner):
        if who is not None:
            result[who] = j
    return result
