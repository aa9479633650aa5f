"""The built-in general-purpose graders, in reporting order (registered by
:mod:`goldeval.pytest_plugin.builtins` through the same hook as third-party graders).

==============  ========================================  ======  ==================================
grader          expect keys                               mode    passes when
==============  ========================================  ======  ==================================
exact           equals, normalize                         hard    the answer equals ``equals`` after
                                                                  the ``normalize`` steps
regex           regex, not_regex                          hard    every ``regex`` pattern matches
                                                                  and no ``not_regex`` pattern does
contains_any    contains_any                              hard    at least one listed string occurs
json_schema     json_schema                               hard    the extracted JSON validates
                                                                  against the schema (JSON Schema
                                                                  Draft 2020-12)
json_equals     json_equals, json_ignore                  hard    the extracted JSON equals
                                                                  ``json_equals`` outside ignored
                                                                  paths
tool_calls      tool_calls, tool_calls_order              hard    the expected calls were made:
                                                                  names, argument subsets, order
number          number                                    hard    the extracted number is within
                                                                  tolerance of ``number.value``
cites           cites, cites_only                         hard    every id in ``cites`` is cited
                                                                  (with ``cites_only``: no others)
must_not        (top-level ``must_not``)                  hard    no banned string occurs (rows
                                                                  without contract keys only)
similarity      similar_to, similarity_threshold          SOFT    cosine(embedding(answer),
                                                                  embedding(similar_to)) >=
                                                                  threshold (default 0.8)
==============  ========================================  ======  ==================================

Each grader lives in its own module (``goldeval.graders.<name>``), whose docstring states its
rules; shared helpers are :mod:`~goldeval.graders.common`, :mod:`~goldeval.graders.json_extract`,
:mod:`~goldeval.graders.json_paths` and :mod:`~goldeval.graders.matching`.

A manifest may switch any of them with ``graders: {name: hard|soft|off}``; ``similarity`` is
hard only when the manifest says so. Every grader reports violations naming itself and never
raises on a malformed answer (``None``, empty, huge, binary garbage, invalid JSON): it returns a
failed :class:`~goldeval.core.models.GraderOutcome` instead. ``None`` is graded as the empty
string.
"""

from __future__ import annotations

from goldeval.graders.base import Grader
from goldeval.graders.cites import CitesGrader
from goldeval.graders.contains_any import ContainsAnyGrader
from goldeval.graders.exact import ExactGrader
from goldeval.graders.json_equals import JsonEqualsGrader
from goldeval.graders.json_schema import JsonSchemaGrader
from goldeval.graders.must_not import MustNotGrader
from goldeval.graders.number import NumberGrader
from goldeval.graders.regex import RegexGrader
from goldeval.graders.similarity import SimilarityGrader
from goldeval.graders.tool_calls import ToolCallsGrader

__all__ = ["builtin_graders"]


def builtin_graders() -> list[Grader]:
    """The general-purpose graders, in reporting order (a new built-in grader is added here)."""
    return [
        ExactGrader(),
        RegexGrader(),
        ContainsAnyGrader(),
        JsonSchemaGrader(),
        JsonEqualsGrader(),
        ToolCallsGrader(),
        NumberGrader(),
        CitesGrader(),
        MustNotGrader(),
        SimilarityGrader(),
    ]
