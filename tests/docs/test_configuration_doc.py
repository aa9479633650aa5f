"""docs/configuration.md names every option, ini key, environment variable and manifest field.

The lists come from the running code — ``pytest --help`` of a project with the plugin, the
environment variables the source reads, the manifest models and the ``goldeval`` parser — so
adding an option without documenting it fails here.
"""

from __future__ import annotations

import argparse
import re

import pytest
from pydantic import BaseModel

from goldeval.cli.main import build_parser
from goldeval.dataset.domain import ContractConfig, RetrieverConfig
from goldeval.dataset.manifest import FixtureThresholds, GatePolicy, Manifest
from tests.helpers import ROOT

DOC = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
ENV_NAME = re.compile(r"""["']((?:GOLDEVAL|OLLAMA|OPENAI)_[A-Z0-9_]*[A-Z0-9])["']""")


def _documented(name: str) -> bool:
    return f"`{name}" in DOC


def _field_names(model: type[BaseModel]) -> list[str]:
    names = []
    for name, info in model.model_fields.items():
        names.append(info.alias or name)
    return names


@pytest.fixture(scope="module")
def pytest_help(pytestconfig: pytest.Config) -> str:
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        cwd=ROOT / "examples" / "quickstart",
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout


def test_every_golden_option_is_documented(pytest_help: str) -> None:
    options = sorted(set(re.findall(r"(--golden(?:-[a-z0-9]+)*)\b", pytest_help)))
    assert "--golden" in options and "--golden-run-key" in options and len(options) > 25
    missing = [o for o in options if not _documented(o)]
    assert not missing, f"options missing from docs/configuration.md: {missing}"


def test_every_ini_key_is_documented(pytest_help: str) -> None:
    keys = sorted(set(re.findall(r"^\s+(golden_[a-z_]+) \(", pytest_help, re.MULTILINE)))
    assert {"golden_root", "golden_out", "golden_junit_properties"} <= set(keys)
    source = (ROOT / "src" / "goldeval" / "pytest_plugin" / "options.py").read_text(
        encoding="utf-8"
    )
    assert set(re.findall(r'addini\(\s*"([a-z_]+)"', source)) == set(keys)
    missing = [k for k in keys if not _documented(k)]
    assert not missing, f"ini keys missing from docs/configuration.md: {missing}"


def test_every_environment_variable_is_documented() -> None:
    names: set[str] = set()
    for path in (ROOT / "src" / "goldeval").rglob("*.py"):
        if "testing" in path.parts:
            continue
        names |= set(ENV_NAME.findall(path.read_text(encoding="utf-8")))
    expected = {
        "OLLAMA_HOST",
        "OLLAMA_USER",
        "OLLAMA_PASSWORD",
        "OLLAMA_TIMEOUT_MINUTES",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "GOLDEVAL_STORE",
        "GOLDEVAL_EMBED_PROVIDER",
        "GOLDEVAL_EMBED_URL",
        "GOLDEVAL_EMBED_MODEL",
        "GOLDEVAL_EMBED_API_KEY",
        "GOLDEVAL_EMBED_TIMEOUT",
    }
    assert expected <= names, f"the source no longer reads {sorted(expected - names)}"
    missing = sorted(n for n in names if not _documented(n))
    assert not missing, f"environment variables missing from docs/configuration.md: {missing}"


def test_test_suite_variables_are_documented() -> None:
    names: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        names |= {
            n
            for n in ENV_NAME.findall(path.read_text(encoding="utf-8"))
            if n.startswith("GOLDEVAL_")
        }
    missing = sorted(n for n in names if not _documented(n))
    assert not missing, f"test-suite variables missing from docs/configuration.md: {missing}"


@pytest.mark.parametrize(
    ("model", "prefix"),
    [
        (Manifest, ""),
        (GatePolicy, "gate."),
        (FixtureThresholds, "gate.<mode>."),
        (ContractConfig, ""),
        (RetrieverConfig, ""),
    ],
    ids=["manifest", "gate", "gate-mode", "contract", "retriever"],
)
def test_every_manifest_field_is_documented(model: type[BaseModel], prefix: str) -> None:
    fields = _field_names(model)
    assert fields
    missing = [f for f in fields if not _documented(prefix + f) and not _documented(f)]
    assert not missing, f"{model.__name__} fields missing from docs/configuration.md: {missing}"


def test_manifest_aliases_are_the_documented_spelling() -> None:
    # `schema` and `allowedRegression` are what users write, not the Python attribute names.
    assert "schema" in _field_names(Manifest)
    assert "allowedRegression" in _field_names(FixtureThresholds)
    assert "`schema_`" not in DOC and "`allowed_regression`" not in DOC


def test_every_goldeval_command_and_option_is_documented() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, command in sub.choices.items():
        if not _documented(f"goldeval {name}"):
            missing.append(f"goldeval {name}")
        for action in command._actions:
            for option in action.option_strings:
                if option in ("-h", "--help"):
                    continue
                if option not in DOC:
                    missing.append(f"goldeval {name} {option}")
    assert not missing, f"missing from docs/configuration.md: {missing}"
