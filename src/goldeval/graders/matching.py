"""Maximum bipartite matching (augmenting paths), used by ``tool_calls_order: any``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["bipartite"]


def _no_check() -> None:
    return None


def bipartite(
    ok: Sequence[Sequence[bool]], right: int, check: Callable[[], None] = _no_check
) -> list[int | None]:
    """For each left item ``i``, a distinct right index ``j`` with ``ok[i][j]`` (or None),
    matching as many left items as possible.

    Iterative (the recursive search went one Python frame deeper per augmenting step: 3,000
    expected calls were a RecursionError, an ERROR the run called "retry"); ``check`` is
    called at every step of the search (the grader's time budget)."""
    owner: list[int | None] = [None] * right
    fits = [[j for j in range(right) if row[j]] for row in ok]
    for start in range(len(ok)):
        seen: set[int] = set()
        frames = [(start, 0)]  # (left item, next place in its fits to try)
        path: list[tuple[int, int]] = []  # the edges taken to reach each frame but the first
        while frames:
            check()
            i, first = frames[-1]
            for n in range(first, len(fits[i])):
                j = fits[i][n]
                if j not in seen:
                    seen.add(j)
                    frames[-1] = (i, n + 1)
                    path.append((i, j))
                    current = owner[j]
                    if current is None:
                        frames = []  # found a free right item: the path augments
                    else:
                        frames.append((current, 0))
                    break
            else:
                frames.pop()
                if frames:
                    path.pop()  # the edge that led to the exhausted item
                else:
                    path = []
        for i, j in path:
            owner[j] = i
    result: list[int | None] = [None] * len(ok)
    for j, who in enumerate(owner):
        if who is not None:
            result[who] = j
    return result
