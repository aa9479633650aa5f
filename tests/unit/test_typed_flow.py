"""A ratchet on the untyped run document (issue 31: "the run document is typed along the flow").

The run travels as a :class:`goldeval.results.documents.RunDocument`, typed once where it
enters (``typed_run``). A parameter ``run: Mapping[str, Any]`` (or ``dict[str, Any]``, and the
same for ``doc``, ``summary`` and ``comparison``) is a function that re-reads JSON keys
instead. This test counts them in src/goldeval with an AST walk:

- the count may not grow past :data:`CEILING`; when a change types some of them, lower
  :data:`CEILING` to the new count (not enforced: branches merged in any order must not
  fail on it);
- the verdict (src/goldeval/verdict) has none at all, whatever the parameter's name, except
  the few listed in :data:`VERDICT_JSON_PARAMETERS` with why they hold JSON.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "goldeval"
VERDICT = SRC / "verdict"

#: Names of parameters that carry a run document or a part of it.
DOCUMENT_NAMES = frozenset({"run", "doc", "summary", "comparison"})
UNTYPED = re.compile(r"\b(?:Mapping|dict)\[str, Any\]")

#: The count after the verdict and its callers took the typed document. Lower it when you
#: type more; never raise it.
# 47 after typed-doc; 54 once the module split cut long report and CLI functions into named
# steps that each still take the JSON run (the same parameters, in more functions); 20 once
# the reports (markdown, html, junit, site, site_charts, labels) took the typed document;
# 11 once the CLI project lookup, summary.json, history and the junit hook took it typed;
# 6 once the writers took RunJson (goldeval.results.run_json, a TypedDict held to
# RunDocument's fields). The 6 left are JSON where it crosses a boundary, on purpose:
# as_run_json (the key check where the writers assemble the JSON), the service's _typed
# (where a stored document is typed), the store's finish_run (base and SQL) and the
# recorder's mark_failed (the summary column's JSON), and the store's
# _with_recorded_fields (the API's JSON view of a stored run).
CEILING = 6

#: JSON-typed parameters the verdict keeps, as (file, function, parameter), and why.
VERDICT_JSON_PARAMETERS = {
    # Comparability is key by key on the protocol objects as JSON: extra keys take part
    # (selectedAttempts), and a key absent differs from a key present.
    ("protocol_check.py", "_live_keys_in_play", "b"),
    ("protocol_check.py", "_live_keys_in_play", "c"),
    ("protocol_check.py", "_protocol_differences", "b"),
    ("protocol_check.py", "_protocol_differences", "c"),
    # The baseline written is run.json's JSON as read, keys in their order (diffable).
    ("baseline.py", "baseline_document", "raw"),
}


def _untyped_parameters(root: Path) -> Iterator[tuple[Path, str, str, str]]:
    """(file, function, parameter, annotation) of every parameter annotated with a JSON
    object type (``Mapping[str, Any]`` / ``dict[str, Any]``, alone or in a union)."""
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                if arg.annotation is None:
                    continue
                annotation = ast.unparse(arg.annotation)
                if UNTYPED.search(annotation):
                    yield path, node.name, arg.arg, annotation


def _document_parameters() -> list[str]:
    return [
        f"{path.relative_to(SRC.parent)}: {function}({name}: {annotation})"
        for path, function, name, annotation in _untyped_parameters(SRC)
        if name in DOCUMENT_NAMES
    ]


def test_untyped_run_document_parameters_do_not_grow() -> None:
    found = _document_parameters()
    assert len(found) <= CEILING, (
        f"{len(found)} parameters take the run document (or its summary/comparison) as a "
        f"JSON mapping, more than the ceiling {CEILING}. Take "
        "goldeval.results.documents.RunDocument (typed once with typed_run) instead. When a "
        f"change leaves fewer, lower CEILING in {Path(__file__).name} to the new count.\n  "
        + "\n  ".join(found)
    )


def test_the_verdict_reads_only_typed_documents() -> None:
    found = {
        (path.name, function, name): annotation
        for path, function, name, annotation in _untyped_parameters(VERDICT)
    }
    unexpected = sorted(set(found) - VERDICT_JSON_PARAMETERS)
    assert not unexpected, (
        "goldeval.verdict takes typed documents (RunDocument, ComparisonResult); these "
        "parameters take a JSON mapping: "
        + ", ".join(f"{f}: {fn}({p}: {found[(f, fn, p)]})" for f, fn, p in unexpected)
    )
    named = [key for key in found if key[2] in DOCUMENT_NAMES]
    assert named == []


def test_the_walk_sees_an_untyped_parameter(tmp_path: Path) -> None:
    """The counter is not vacuous: it finds the shapes it is meant to find."""
    (tmp_path / "m.py").write_text(
        "from collections.abc import Mapping\nfrom typing import Any\n"
        "def f(run: Mapping[str, Any], doc: dict[str, Any] | None = None) -> None: ...\n"
        "async def g(*, summary: 'dict[str, Any]', comparison: int) -> None: ...\n",
        encoding="utf-8",
    )
    found = [(fn, name) for _, fn, name, _ in _untyped_parameters(tmp_path)]
    assert found == [("f", "run"), ("f", "doc"), ("g", "summary")]
