"""One exit policy (issue 31): codes are decided in ``goldeval.verdict`` only.

Outside ``verdict/`` no module writes an exit code as a number (``sys.exit(75)``,
``return 4`` from a command, ``returncode=65``, ``exitstatus = 1``, ``USAGE = 4``,
``decision["code"] == 65``), and a
pytest session's exit status is set in exactly one function after a run
(``pytest_plugin.ending.apply_exit``) and one before it (``Controller._refuse``).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "goldeval"
#: The fake model server's own command line is a test tool, not a goldeval surface.
EXEMPT = {SRC / "testing" / "llm_server" / "cli.py"}
EXIT_CODES = {1, 2, 3, 4, 5, 65, 75}


def _modules() -> list[Path]:
    return [
        p
        for p in sorted(SRC.rglob("*.py"))
        if "verdict" not in p.relative_to(SRC).parts and p not in EXEMPT
    ]


def _int(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _command_function(name: str) -> bool:
    return name == "main" or name.startswith(("cmd_", "_cmd")) or name.endswith("_main")


def _literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []

    def flag(node: ast.AST, what: str) -> None:
        found.append(f"{path.relative_to(SRC)}:{getattr(node, 'lineno', '?')}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = ast.unparse(node.func)
            if func in ("sys.exit", "exit", "os._exit", "SystemExit") and node.args:
                if _int(node.args[0]) in EXIT_CODES:
                    flag(node, f"{func}({_int(node.args[0])})")
            for kw in node.keywords:
                if kw.arg in ("returncode", "exit_code", "exitstatus") and _int(kw.value) in (
                    EXIT_CODES
                ):
                    flag(node, f"{kw.arg}={_int(kw.value)}")
        elif isinstance(node, ast.Compare):
            # Deciding from a code written as a number (``decision["code"] == 65``) is
            # computing a verdict again: 65 and 75 are ours alone, the others count when
            # compared with something named a code or an exit status.
            operands = [node.left, *node.comparators]
            numbers = [_int(op) for op in operands if _int(op) in EXIT_CODES]
            named = any(
                word in ast.unparse(op).lower()
                for op in operands
                if _int(op) is None
                for word in ("code", "exit")
            )
            if any(n in (65, 75) for n in numbers) or (numbers and named):
                flag(node, f"comparison with {numbers[0]}: {ast.unparse(node)[:60]}")
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                text = ast.unparse(target)
                if text.endswith("exitstatus") and _int(node.value) is not None:
                    flag(node, f"{text} = {_int(node.value)}")
                if text in ("USAGE", "INFRA", "GATE_FAILED", "OK") and _int(node.value) is not None:
                    flag(node, f"{text} = {ast.unparse(node.value)}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _command_function(
            node.name
        ):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return) and _int(inner.value) in EXIT_CODES:
                    flag(inner, f"return {_int(inner.value)} in {node.name}()")
    return found


def test_no_exit_code_literal_outside_verdict() -> None:
    found = [hit for path in _modules() for hit in _literals(path)]
    assert not found, "exit codes come from goldeval.verdict.exit_codes:\n" + "\n".join(found)


def test_the_session_exit_status_is_set_in_one_place() -> None:
    setters = []
    for path in sorted((SRC / "pytest_plugin").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Assign) and any(
                    ast.unparse(t).endswith(".exitstatus") for t in node.targets
                ):
                    setters.append(f"{path.name}:{func.name}")
                if isinstance(node, ast.Call) and any(
                    kw.arg == "returncode" for kw in node.keywords
                ):
                    setters.append(f"{path.name}:{func.name}")
    assert sorted(set(setters)) == ["controller.py:_refuse", "ending.py:apply_exit"], setters


def test_finish_session_stays_short() -> None:
    tree = ast.parse((SRC / "pytest_plugin" / "finishing.py").read_text(encoding="utf-8"))
    (func,) = [
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "finish_session"
    ]
    assert func.end_lineno is not None
    assert func.end_lineno - func.lineno + 1 <= 60
