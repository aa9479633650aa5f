"""RetrievalGrader (reference 3.6): the retriever must return exactly ``expect.rag``."""

from __future__ import annotations

from collections.abc import Sequence

from goldeval.core.models import RetrievalResult


def grade_retrieval(
    refuse: bool, expected: Sequence[str], retrieved: Sequence[str]
) -> RetrievalResult:
    if refuse:
        return RetrievalResult(applicable=False, passed=True)
    missing = [e for e in expected if e not in retrieved]
    unexpected = [r for r in retrieved if r not in expected]
    return RetrievalResult(
        applicable=True,
        passed=bool(retrieved) and not missing and not unexpected,
        retrieved=list(retrieved),
        expected=list(expected),
        missing=missing,
        unexpected=unexpected,
        forbidden_retrieval=bool(unexpected),
    )
