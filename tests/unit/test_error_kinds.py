"""One list of ERROR kinds (issue 31/34): every kind the code gives an attempt is an ErrorKind."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from goldeval.core.errors import NON_RETRYABLE_KINDS, ErrorKind, is_retryable

SRC = Path(__file__).resolve().parents[2] / "src" / "goldeval"
KIND = re.compile(r"^[A-Z]+(_[A-Z]+)*$")
#: Calls whose first argument is an error kind.
KIND_CALLS = {"ProviderError", "Failure", "_failure", "error_kind_of"}
KIND_KEYWORDS = {"error_kind", "kind"}


def _kinds_given(tree: ast.AST) -> set[str]:
    found: set[str] = set()

    def take(node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if KIND.match(node.value):
                found.add(node.value)

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func).rsplit(".", 1)[-1]
            if name in KIND_CALLS and node.args:
                take(node.args[0])
            for kw in node.keywords:
                if kw.arg in KIND_KEYWORDS:
                    take(kw.value)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "errorKind":
                    take(value)
        elif isinstance(node, ast.FunctionDef) and "kind" in node.name:
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return):
                    take(inner.value)
    return found


def test_every_kind_given_to_an_attempt_is_an_error_kind() -> None:
    given: dict[str, str] = {}
    for path in sorted(SRC.rglob("*.py")):
        for kind in _kinds_given(ast.parse(path.read_text(encoding="utf-8"))):
            given.setdefault(kind, str(path.relative_to(SRC)))
    from goldeval.pytest_plugin.outcomes import FAILED_KINDS

    for surface, kind in FAILED_KINDS.items():
        given.setdefault(kind, f"pytest_plugin/outcomes.py ({surface})")
    members = {k.value for k in ErrorKind}
    # Grader violation kinds (GRADER_CONFIG, TOOL_CALL, ...) are taxonomy of a FAIL, not
    # ERROR kinds: they come from graders' violation() calls, not from the calls above.
    unknown = {k: where for k, where in given.items() if k not in members}
    assert not unknown, f"add these to goldeval.core.errors.ErrorKind: {unknown}"
    assert len(given) >= 10  # the scan sees the code


def test_retryability_is_the_enum_s() -> None:
    assert NON_RETRYABLE_KINDS == {k.value for k in ErrorKind if not k.retryable}
    for kind in ErrorKind:
        assert is_retryable(kind.value) is kind.retryable
        assert kind == kind.value and kind.meaning
    assert is_retryable(None) and is_retryable("SOMETHING_NEW")
