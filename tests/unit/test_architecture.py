"""The package layout of docs/architecture.md holds: dependencies point down, no import circle,
pytest only in the plugin package, no hidden function-level imports.

The layer order and the pytest rule are import-linter contracts in pyproject.toml
(``[tool.importlinter]``); this test runs them, so CI fails on an import that points up.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import grimp
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "goldeval"

#: Modules allowed to import project modules inside functions, and why.
LAZY_IMPORTS_ALLOWED = {
    # pytest loads the entry point in every project that has the plugin installed: it imports
    # the heavy modules only once --golden is given.
    "pytest_plugin/hooks.py",
    # Start-up cost of every collection (issue 19, docs/performance.md): a library that only
    # some datasets or modes need is imported when first used. httpx for the model providers
    # (a fixture run calls no model) ...
    "pytest_plugin/builtins.py",
    # ... and for the embedding client of the similarity grader ...
    "graders/similarity.py",
    # ... and jsonschema for the json_schema grader's engine ...
    "graders/json_schema.py",
    # ... and the run store (sqlite3, psycopg, migrations): a listing records nothing.
    "pytest_plugin/recording.py",
    # ... and Jinja2 with the budgeted sandbox of prompt templates (most datasets have none).
    "dataset/templates.py",
}


def test_import_linter_contracts_are_kept(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(ROOT)
    # lint_imports configures logging as a command does (logging.config.dictConfig), which
    # disables every logger that exists: httpx's stayed disabled for every later in-process
    # run of the same worker (test_secrets' httpx log test failed after this one).
    loggers = logging.Logger.manager.loggerDict.values()
    disabled = {lg: lg.disabled for lg in loggers if isinstance(lg, logging.Logger)}
    try:
        assert lint_imports(no_cache=True) == 0, "an import points up a layer (lint-imports)"
    finally:
        for logger, was in disabled.items():
            logger.disabled = was


def test_no_import_circle() -> None:
    graph = grimp.build_graph("goldeval", exclude_type_checking_imports=True)
    lazy = {"goldeval." + m.removesuffix(".py").replace("/", ".") for m in LAZY_IMPORTS_ALLOWED}
    circles = []
    for module in sorted(graph.modules):
        if module in lazy:
            continue  # their function-level imports are one-way by construction
        for imported in graph.find_modules_directly_imported_by(module):
            if imported in lazy:
                continue
            if graph.chain_exists(importer=imported, imported=module):
                circles.append((module, imported))
    assert circles == []


def _optional(tree: ast.AST) -> set[int]:
    """Line numbers of imports guarded by ``except ImportError`` (an optional extra, such as
    psycopg behind the PostgreSQL store): importing them at the top would make the extra
    mandatory."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
            for h in node.handlers
        ):
            for stmt in node.body:
                for sub in ast.walk(stmt):
                    if isinstance(sub, (ast.Import, ast.ImportFrom)):
                        lines.add(sub.lineno)
    return lines


def _function_level_imports(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    optional = _optional(tree)
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if getattr(sub, "lineno", None) in optional:
                    continue
                if isinstance(sub, ast.ImportFrom) and (
                    sub.level or (sub.module or "").startswith("goldeval")
                ):
                    lines.append(sub.lineno)
                elif isinstance(sub, ast.Import) and any(
                    a.name.startswith("goldeval") for a in sub.names
                ):
                    lines.append(sub.lineno)
    return sorted(set(lines))


def test_no_function_level_imports_outside_the_entry_points() -> None:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in LAZY_IMPORTS_ALLOWED:
            continue
        lines = _function_level_imports(path)
        if lines:
            found[rel] = lines
    assert found == {}, "hoist these imports to the module top (or document a lazy one)"


def test_no_submodule_taken_from_a_long_lived_package() -> None:
    """``from goldeval import x`` / ``from goldeval.pytest_plugin import x`` read the package's
    attribute; those two packages outlive pytester's in-process runs, so the attribute can be a
    previous run's module (tests/plugin/test_in_process_runs.py). Use ``import a.b.x as x``."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in (
                "goldeval",
                "goldeval.pytest_plugin",
            ):
                names = [a.name for a in node.names if a.name != "__version__"]
                if names:
                    found.append(f"{path.relative_to(SRC)}:{node.lineno} {names}")
    assert found == []
