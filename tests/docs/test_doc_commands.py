"""Every command shown in the docs runs, and exits with the status the docs say.

Commands come from the ```bash blocks of ``docs/*.md``, ``README.md`` and the examples'
READMEs (conventions in
:mod:`tests.docs.mdcode`). Each document gets its own temporary copy of the project
(``golden/``, ``pack/``, ``baselines/``, ``examples/`` and a ``pytest.ini``); its ``# file:``
blocks are written and its commands run in document order, each under ``bash -c`` with the
venv's ``bin`` first on ``PATH``. A local fake model server replaying the generation-v1
fixtures stands in for Ollama (``OLLAMA_HOST`` and ``GOLDEVAL_TEST_LLM_URL``), so documented
live runs work offline. Commands marked ``# not-run: <reason>`` or that install packages are
reported as skipped tests with that reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from goldeval.testing.llm_server import FakeLLMServer, fixture_responder
from tests.docs.mdcode import CD, Command, FileBlock, doc_steps
from tests.helpers import ROOT

DOCS = [
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "README.md",
    *sorted((ROOT / "examples").glob("*/README.md")),
]
COPIED = ("golden", "pack", "baselines", "examples")
IGNORED = shutil.ignore_patterns(".goldeval", "__pycache__", ".pytest_cache", "*.pyc", "site")
TIMEOUT = 300
README_QUICK_START = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "
    "pytest --golden=generation-v1",
    ". .venv/bin/activate && pip install -e '.[test]' && pytest -n 2",
)


def _commands(doc: Path) -> list[Command]:
    return [s for step in doc_steps(doc) for s in step if isinstance(s, Command)]


def _runnable(doc: Path) -> bool:
    return any(c.skip is None and not CD.match(c.text) for c in _commands(doc))


SKIPPED = [c for doc in DOCS for c in _commands(doc) if c.skip is not None]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    for name in COPIED:
        shutil.copytree(ROOT / name, root / name, ignore=IGNORED)
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    return root


@pytest.fixture
def llm_server(project: Path) -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        srv.responder = fixture_responder(project / "golden" / "generation")
        yield srv


def _environment(server: FakeLLMServer) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "GOLDEVAL_", "OLLAMA_", "OPENAI_", "GITHUB_"))
    }
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["OLLAMA_HOST"] = server.base_url
    env["GOLDEVAL_TEST_LLM_URL"] = server.base_url
    # The fake answers in milliseconds; a generous timeout keeps a loaded machine from flaking.
    env["OLLAMA_TIMEOUT_MINUTES"] = "2"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["COLUMNS"] = "120"
    return env


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.splitlines()[-lines:])


@pytest.mark.parametrize(
    "doc", [d for d in DOCS if _runnable(d)], ids=lambda d: str(d.relative_to(ROOT))
)
def test_doc_commands(doc: Path, project: Path, llm_server: FakeLLMServer) -> None:
    env = _environment(llm_server)
    failures: list[str] = []
    ran = 0
    # Every block starts in the document's folder: the project root for docs/ and README.md,
    # the example's folder for an example's README.
    base = project if doc.parent.name == "docs" else project / doc.parent.relative_to(ROOT)
    for step in doc_steps(doc):
        cwd = base
        for item in step:
            if isinstance(item, FileBlock):
                target = project / item.path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(item.content, encoding="utf-8")
                continue
            if item.skip is not None:
                continue
            cd = CD.match(item.text)
            if cd is not None:
                cwd = (cwd / cd["dir"]).resolve()
                assert cwd.is_dir(), f"{item.id}: cd {cd['dir']}: no such folder"
                continue
            ran += 1
            proc = subprocess.run(
                ["bash", "-c", item.text],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                check=False,
            )
            if proc.returncode != item.expected:
                failures.append(
                    f"{item.id}: `{item.text}` exited {proc.returncode}, the doc says "
                    f"{item.expected}\n--- stdout ---\n{_tail(proc.stdout)}\n--- stderr ---\n"
                    f"{_tail(proc.stderr)}"
                )
    assert ran > 0
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize("command", SKIPPED, ids=lambda c: c.id)
def test_not_run_command(command: Command) -> None:
    shown = command.text.split("# not-run:")[0].strip()
    pytest.skip(f"{command.skip}: {shown}")


def test_readme_quick_start_is_intact() -> None:
    """The README's two quick-start commands stay exactly as they are (they install, so the
    doc runner skips them; CI runs them through .ci/run)."""
    readme = [c.text for c in _commands(ROOT / "README.md")]
    assert readme[:2] == list(README_QUICK_START)
    assert all(c.skip == "installs packages" for c in _commands(ROOT / "README.md")[:2])


def test_every_doc_is_found_and_parsed() -> None:
    names = {d.name for d in DOCS}
    assert {
        "index.md",
        "methodology.md",
        "dataset-versioning.md",
        "adding-a-case.md",
        "adding-a-grader.md",
        "adding-a-provider.md",
        "configuration.md",
        "ci.md",
        "reports.md",
        "known-limitations.md",
        "README.md",
    } <= names
    assert sum(len(_commands(d)) for d in DOCS) > 40
