"""The ``goldeval`` parser names each command's function by module and name, imported only when
the command runs (goldeval.cli.parser): every name must resolve, and ``--help`` must load none
of the command modules."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest

from goldeval.cli.parser import _Command, build_parser

#: The modules that hold the commands (imported when a command runs).
COMMAND_MODULES = ("saved_runs", "calibrate", "commands")


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_command_names_a_function_that_exists(name: str) -> None:
    func = _subcommands()[name].get_default("func")
    assert isinstance(func, _Command)
    assert func.module in COMMAND_MODULES
    module = importlib.import_module(f"goldeval.cli.{func.module}")
    assert callable(getattr(module, func.function, None)), f"{name}: {func.function} is missing"


def test_help_imports_no_command_module() -> None:
    code = (
        "import json, sys\n"
        "from goldeval.cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('goldeval.cli.'))))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert "goldeval.cli.parser" in loaded  # the probe saw the parser
    assert not loaded & {f"goldeval.cli.{m}" for m in COMMAND_MODULES}
