"""``similarity`` (SOFT by default): cosine(embedding(answer), embedding(similar_to)) >=
``similarity_threshold`` (default 0.8).

See :mod:`goldeval.providers.embeddings` for configuration. Without a configured provider the
outcome has ``score=None`` and a violation, and (being soft) never fails the attempt.
``passed = score >= threshold``. A manifest makes it hard with ``graders: {similarity: hard}``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from goldeval.core.errors import GoldevalError, ProviderError
from goldeval.core.models import GraderOutcome, Severity
from goldeval.graders.base import ExpectKey, GradeContext
from goldeval.graders.common import BuiltinGrader, answer_text, excerpt, grader_options, is_number

__all__ = ["DEFAULT_SIMILARITY_THRESHOLD", "SimilarityGrader"]

DEFAULT_SIMILARITY_THRESHOLD = 0.8


class SimilarityGrader(BuiltinGrader):
    """Soft by default: cosine similarity of embeddings (see providers/embeddings.py)."""

    name = "similarity"
    hard = False
    primary = ("similar_to",)
    expect_keys = (
        ExpectKey("similar_to", "str", "reference text the answer should mean the same as"),
        ExpectKey("similarity_threshold", "number", "minimum cosine similarity (default 0.8)"),
    )

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        #: Environment read for GOLDEVAL_EMBED_*; None means ``os.environ`` at grade time.
        self.environ = environ

    def validate_expect(self, expect: Mapping[str, Any]) -> list[tuple[str, str]]:
        errors = self.requires(expect, "similarity_threshold", "similar_to")
        threshold = expect.get("similarity_threshold")
        if is_number(threshold) and not (-1.0 < threshold <= 1.0):
            # -1 itself is no check: every cosine reaches it (an unrelated answer passed).
            errors.append(
                ("expect.similarity_threshold", "must be above -1 and at most 1 (a cosine)")
            )
        ref = expect.get("similar_to")
        if isinstance(ref, str) and not ref.strip():
            errors.append(("expect.similar_to", "must not be blank"))
        return errors

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        raw = ctx.case.expect.get("similarity_threshold")
        threshold = float(raw) if is_number(raw) else DEFAULT_SIMILARITY_THRESHOLD
        reference = ctx.case.expect.get("similar_to")

        def fail(reason: str, severity: Severity = Severity.LOW) -> GraderOutcome:
            return self.outcome(
                [self.violation(ctx, "SIMILARITY", reason, severity)],
                passed=False,
                threshold=threshold,
            )

        if not isinstance(reference, str):
            return fail("expect.similar_to must be a string")
        # Imported here: the embedding client brings httpx, which a dataset without
        # similarity rows should not pay for at start-up.
        from goldeval.providers.embeddings import embedding_settings

        try:
            settings = embedding_settings(
                grader_options(ctx, self.name), os.environ if self.environ is None else self.environ
            )
        except GoldevalError as exc:
            return fail(f"embedding provider misconfigured: {exc}")
        if settings is None:
            return fail(
                "no embedding provider configured (set GOLDEVAL_EMBED_PROVIDER=ollama|openai, "
                "GOLDEVAL_EMBED_URL, GOLDEVAL_EMBED_MODEL, or grader_options.similarity)"
            )
        text = answer_text(ctx)
        if not text.strip():
            return fail("the answer is empty", Severity.MEDIUM)
        try:
            with settings.client() as client:
                score = client.similarity(text, reference)
        except ProviderError as exc:
            return self.outcome(
                [self.violation(ctx, exc.kind, f"{exc.kind}: {exc.message}", Severity.LOW)],
                passed=False,
                threshold=threshold,
            )
        except GoldevalError as exc:
            return fail(f"embedding provider misconfigured: {exc}")
        score = round(score, 6)
        if score >= threshold:
            return self.outcome([], passed=True, score=score, threshold=threshold)
        return self.outcome(
            [
                self.violation(
                    ctx,
                    "SIMILARITY",
                    f"similarity {score:.3f} < threshold {threshold:g} to expect.similar_to "
                    f"«{excerpt(reference, 80)}»",
                    Severity.MEDIUM,
                )
            ],
            passed=False,
            score=score,
            threshold=threshold,
        )
