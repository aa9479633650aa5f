"""Every path, module, option and command named in README.md and docs/*.md exists.

The names come from the docs' inline code (`` `...` `` outside fenced blocks; the fenced
commands are run by :mod:`tests.docs.test_doc_commands`) and are checked against the tree and
the running code, so the docs cannot drift from them again:

* **paths** — a word starting with a folder of the repository (``src/``, ``golden/``,
  ``docs/``, ``tests/``, ``benchmarks/``, ``examples/``, ``.ci/``, ``pack/``, ``baselines/``)
  or with a package of ``src/goldeval`` (``pytest_plugin/state.py``) exists on disk;
  ``<placeholder>`` parts match any name; ``file.py::test_name`` also needs the test; a bare
  ``test_x.py`` is looked for under ``tests/``;
* **modules** — ``goldeval.a.b`` and ``a.b.name`` (``a`` a package of ``goldeval``) name a
  module, and a name defined at its top level (a class's attribute after that);
* **options** — every ``--golden…`` option, and every ``--option`` of a ``pytest …`` command,
  is in ``pytest --help``; an ini-looking ``golden_…`` name is an ini key in ``pytest --help``
  or a fixture defined in ``src/goldeval``; a ``pytest_goldeval_…`` name is a hook in
  ``pytest_plugin/hookspecs.py``;
* **commands** — ``goldeval CMD --flag …`` names a subcommand and flags of ``goldeval CMD
  --help``.

A name shown on purpose although it does not exist (a user's file in an example, an option
described as missing) goes in :data:`ALLOWED` with the reason.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from goldeval.cli.main import build_parser
from tests.docs.mdcode import FENCE
from tests.helpers import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SRC = ROOT / "src" / "goldeval"
REPO_FOLDERS = (
    "src",
    "golden",
    "docs",
    "tests",
    "benchmarks",
    "examples",
    ".ci",
    "pack",
    "baselines",
)
PACKAGES = tuple(sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").is_file()))
FILE_SUFFIXES = (
    ".py",
    ".md",
    ".json",
    ".jsonl",
    ".yaml",
    ".yml",
    ".toml",
    ".ini",
    ".cfg",
    ".txt",
    ".csv",
    ".html",
    ".xml",
    ".j2",
    ".css",
    ".arrow",
    ".parquet",
    ".db",
)

SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
PATH = re.compile(rf"^(?:{'|'.join(re.escape(f) for f in (*REPO_FOLDERS, *PACKAGES))})/")
BARE_TEST_FILE = re.compile(r"^test_\w+\.py(?:::|$)")
LINE_SUFFIX = re.compile(r":\d+(?:[-–/]\d+)*$")
BARE_PY = re.compile(r"^[\w-]+\.py$")
PLACEHOLDER = re.compile(r"<[^>]*>|\b(?:NAME|ID|PID|XXXX)\b")
MODULE = re.compile(rf"^(?:goldeval|{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+(?:\(\))?$")
GOLDEN_OPTION = re.compile(r"--golden(?:-[a-z0-9]+)*")
LONG_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
INI_LIKE = re.compile(r"^golden_[a-z_]+\b")
HOOK = re.compile(r"^pytest_goldeval_[a-z_]+\b")

#: Names shown on purpose that do not exist in this repository: (pattern, reason). A pattern
#: matches the whole name; keep each one as narrow as the reason.
ALLOWED: tuple[tuple[str, str], ...] = (
    (r"golden/my-bot/", "README: what `goldeval init my-bot` creates in the user's project"),
    (
        r"baselines/live-[\w<>*.-]+\.json",
        "live baselines are captured by a live run against a real model; this repository commits "
        "none on purpose (the docs explain that a live run without one is not comparable)",
    ),
    (r"golden/\.NAME\.import-PID-XXXX", "the temporary folder that exists only during an import"),
    (
        r"baselines/faq-v1\.json",
        "adding-a-case.md walks through examples/quickstart (`cd examples/quickstart`)",
    ),
    (
        r"goldeval\.testing\.check_grader",
        "known-limitations.md: a conformance helper that does not exist yet, named as missing",
    ),
)


@dataclass(frozen=True)
class Span:
    doc: Path
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def prose(doc: Path) -> str:
    """The document with its fenced blocks blanked out (line numbers kept)."""
    out: list[str] = []
    fence: str | None = None
    for line in doc.read_text(encoding="utf-8").splitlines():
        m = FENCE.match(line)
        if fence is None and m is not None:
            fence = m["fence"]
            out.append("")
        elif fence is not None:
            if line.strip() == fence:
                fence = None
            out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def spans(doc: Path) -> list[Span]:
    text = prose(doc)
    return [
        Span(doc, text.count("\n", 0, m.start()) + 1, " ".join(m[1].split()))
        for m in SPAN.finditer(text)
    ]


ALL_SPANS = [s for doc in DOCS for s in spans(doc)]


def _allowed(name: str) -> bool:
    return any(re.fullmatch(pattern, name) for pattern, _ in ALLOWED)


# ----------------------------------------------------------------------------------- paths


def _words(text: str) -> list[str]:
    return [w.strip("()[],;:\"'") for w in text.split()]


def _glob_pattern(path: str) -> str:
    return PLACEHOLDER.sub("*", path.split("#", 1)[0])


def _exists(path: str) -> bool:
    pattern = _glob_pattern(path).rstrip("/")
    for base in (ROOT, SRC):
        if "*" in pattern and any(base.glob(pattern)):
            return True
        if "*" not in pattern and (base / pattern).exists():
            return True
    return False


def _test_defined(file: Path, name: str) -> bool:
    name = name.split("[", 1)[0]
    parts = name.split("::")
    source = file.read_text(encoding="utf-8")
    return all(
        re.search(rf"^\s*(?:async )?(?:def|class) {re.escape(p)}\b", source, re.M) for p in parts
    )


@cache
def _repository_files() -> frozenset[str]:
    names = {p.name for p in ROOT.iterdir() if p.is_file()}
    for folder in REPO_FOLDERS:
        names |= {p.name for p in (ROOT / folder).rglob("*.py")}
    return frozenset(names)


def _bare_file_exists(name: str) -> bool:
    return name in _repository_files()


def path_problem(word: str) -> str | None:
    word = LINE_SUFFIX.sub("", word)
    file_part, _, test = word.partition("::")
    if BARE_PY.match(word) and not BARE_TEST_FILE.match(word):
        return None if _bare_file_exists(word) else f"no file {word} in the repository"
    if BARE_TEST_FILE.match(word):
        files = list((ROOT / "tests").rglob(file_part))
        if not files:
            return f"no test file {file_part} under tests/"
        if test and not any(_test_defined(f, test) for f in files):
            return f"no test {test} in {file_part}"
        return None
    if not _exists(file_part):
        return f"no such path {file_part}"
    if test:
        target = ROOT / file_part if (ROOT / file_part).is_file() else SRC / file_part
        if not _test_defined(target, test):
            return f"no test {test} in {file_part}"
    return None


def path_words(span: Span) -> list[str]:
    return [
        w for w in _words(span.text) if PATH.match(w) or BARE_PY.match(w) or BARE_TEST_FILE.match(w)
    ]


def test_every_path_named_in_the_docs_exists() -> None:
    problems = [
        f"{s.where}: `{s.text}`: {problem}"
        for s in ALL_SPANS
        for w in path_words(s)
        if not _allowed(w) and (problem := path_problem(w)) is not None
    ]
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------------- modules


def _module_file(parts: list[str]) -> Path | None:
    base = SRC.parent.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _top_level_names(file: Path) -> dict[str, ast.AST]:
    tree = ast.parse(file.read_text(encoding="utf-8"))
    names: dict[str, ast.AST] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.setdefault(node.name, node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.setdefault((alias.asname or alias.name).split(".")[0], node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    names.setdefault(target.id, node)
    return names


def is_module_mention(word: str) -> bool:
    """``goldeval.x…``, or ``package.x…`` where ``x`` is a module or a class/constant name:
    ``judge.error`` is a run.json field, ``judge.runner`` a module."""
    if not MODULE.match(word) or word.endswith(FILE_SUFFIXES):
        return False
    parts = word.removesuffix("()").split(".")
    if parts[0] == "goldeval":
        return True
    return parts[1][0].isupper() or _module_file(["goldeval", *parts[:2]]) is not None


def module_problem(name: str) -> str | None:
    parts = name.removesuffix("()").split(".")
    if parts[0] != "goldeval":
        parts.insert(0, "goldeval")
    for cut in range(len(parts), 1, -1):
        file = _module_file(parts[:cut])
        if file is None:
            continue
        rest = parts[cut:]
        if not rest:
            return None
        names = _top_level_names(file)
        if rest[0] not in names:
            return f"{'.'.join(parts[:cut])} defines no {rest[0]}"
        return None
    return f"no module {'.'.join(parts[:2])}"


def module_words(span: Span) -> list[str]:
    return [w for w in _words(span.text) if is_module_mention(w)]


def test_every_module_named_in_the_docs_exists() -> None:
    problems = [
        f"{s.where}: `{s.text}`: {problem}"
        for s in ALL_SPANS
        for w in module_words(s)
        if not _allowed(w) and (problem := module_problem(w)) is not None
    ]
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------------- options


@pytest.fixture(scope="module")
def pytest_help() -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return proc.stdout


def _help_options(help_text: str) -> set[str]:
    return set(LONG_OPTION.findall(help_text))


def _help_ini_keys(help_text: str) -> set[str]:
    return set(re.findall(r"^\s+([a-z_]+) \(", help_text, re.MULTILINE))


def _fixtures_and_functions() -> set[str]:
    names: set[str] = set()
    for path in SRC.rglob("*.py"):
        names |= set(re.findall(r"^\s*def (golden_\w+)", path.read_text(encoding="utf-8"), re.M))
    return names


def test_every_pytest_option_named_in_the_docs_exists(pytest_help: str) -> None:
    known = _help_options(pytest_help)
    assert "--golden" in known and "--junitxml" in known
    cli = set().union(*(_flags(p) for p in _subcommands().values()))
    problems = []
    for s in ALL_SPANS:
        named = set(GOLDEN_OPTION.findall(s.text))
        if s.text.startswith("pytest "):
            named |= set(LONG_OPTION.findall(s.text))
        elif not s.text.startswith("goldeval "):
            named -= cli  # prose about the CLI (`--golden-root`)
        problems += [
            f"{s.where}: `{s.text}`: {o} is not in pytest --help"
            for o in sorted(named - known)
            if not _allowed(o)
        ]
    assert not problems, "\n".join(problems)


def test_every_ini_key_fixture_and_hook_named_in_the_docs_exists(pytest_help: str) -> None:
    known = _help_ini_keys(pytest_help) | _fixtures_and_functions()
    assert {"golden_root", "golden_provider"} <= known
    hookspecs = (SRC / "pytest_plugin" / "hookspecs.py").read_text(encoding="utf-8")
    hooks = set(re.findall(r"^def (pytest_goldeval_\w+)", hookspecs, re.M))
    problems = []
    for s in ALL_SPANS:
        for w in _words(s.text):
            ini = INI_LIKE.match(w)
            if ini and ini[0] not in known and not _allowed(ini[0]):
                problems.append(f"{s.where}: `{s.text}`: {ini[0]} is no ini key or fixture")
            hook = HOOK.match(w)
            if hook and hook[0] not in hooks and not _allowed(hook[0]):
                problems.append(f"{s.where}: `{s.text}`: {hook[0]} is no hook in hookspecs.py")
    assert not problems, "\n".join(problems)


# -------------------------------------------------------------------------------- commands


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("goldeval has no subcommands")


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return set(LONG_OPTION.findall(parser.format_help()))


def command_problems(text: str) -> list[str]:
    """``goldeval CMD --flag``; ``goldeval gate/compare`` names two commands; a line of the
    plugin's output (``goldeval decision: …``) is no command."""
    words = text.removeprefix("$ ").split()
    if len(words) < 2 or words[0] != "goldeval":
        return []
    commands = _subcommands()
    flags = set(LONG_OPTION.findall(text))
    if words[1].startswith("-"):
        missing = flags - _flags(build_parser())
        return [f"{flag} is not in `goldeval --help`" for flag in sorted(missing)]
    if not re.fullmatch(r"[a-z]+(?:/[a-z]+)*", words[1]):
        return []
    problems = []
    for name in words[1].split("/"):
        if name not in commands:
            problems.append(f"goldeval has no command {name}")
            continue
        problems += [
            f"{flag} is not in `goldeval {name} --help`"
            for flag in sorted(flags - _flags(commands[name]))
        ]
    return problems


def test_every_goldeval_command_named_in_the_docs_exists() -> None:
    problems = [
        f"{s.where}: `{s.text}`: {problem}"
        for s in ALL_SPANS
        for problem in command_problems(s.text)
        if not _allowed(s.text)
    ]
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------------- the checks check


def test_the_docs_name_enough_things_to_check() -> None:
    """Guards against an extraction that silently finds nothing."""
    assert len(ALL_SPANS) > 1000
    assert sum(len(path_words(s)) for s in ALL_SPANS) > 100
    assert sum(len(module_words(s)) for s in ALL_SPANS) > 30
    assert sum(1 for s in ALL_SPANS if s.text.startswith("goldeval ")) > 20


@pytest.mark.parametrize(
    ("word", "problem"),
    [
        ("src/goldeval/core/limits.py", None),
        ("pytest_plugin/state.py", None),
        ("golden/<name>/dataset.yaml", None),
        ("tests/docs/test_docs_truth.py::test_the_checker_finds_drift", None),
        ("test_docs_truth.py::test_the_checker_finds_drift", None),
        ("src/goldeval/plugin.py", "no such path src/goldeval/plugin.py"),
        ("tests/docs/test_docs_truth.py::test_gone", "no test test_gone in"),
        ("test_gone.py", "no test file test_gone.py under tests/"),
    ],
)
def test_the_checker_finds_drift(word: str, problem: str | None) -> None:
    found = path_problem(word)
    assert found == problem if problem is None else (found or "").startswith(problem)


def test_the_module_and_command_checks_find_drift() -> None:
    assert module_problem("goldeval.core.limits.LimitSpec") is None
    assert module_problem("verdict.decide.decide()") is None
    assert module_problem("goldeval.retriever") == "no module goldeval.retriever"
    assert module_problem("core.limits.Nothing") == "goldeval.core.limits defines no Nothing"
    assert command_problems("goldeval gate --no-gate --root DIR") == []
    assert command_problems("goldeval gate/compare") == []
    assert command_problems("goldeval decision: exit 0") == []
    assert module_problem("dataset.rows.RESERVED_TAGS") is None
    assert not is_module_mention("judge.error")
    assert command_problems("goldeval gate --no-such-flag") == [
        "--no-such-flag is not in `goldeval gate --help`"
    ]
    assert command_problems("goldeval frobnicate") == ["goldeval has no command frobnicate"]


# ------------------------------------------------------------------- the architecture tree


def _tree_sections() -> dict[str, str]:
    """docs/architecture.md's tree block: package name -> the text of its entry."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("```\nsrc/goldeval/\n", 1)[1].split("```", 1)[0]
    sections: dict[str, str] = {}
    current = ""
    for line in block.splitlines():
        m = re.match(r"^  (\w+)/\s", line)
        if m is not None:
            current = m[1]
        sections[current] = sections.get(current, "") + line + "\n"
    return sections


def test_the_architecture_tree_lists_every_package_and_module() -> None:
    sections = _tree_sections()
    missing = []
    for package in PACKAGES:
        entry = sections.get(package)
        if entry is None:
            missing.append(f"{package}/")
            continue
        for path in sorted((SRC / package).rglob("*.py")):
            if path.stem in ("__init__", "__main__"):
                continue
            if not re.search(rf"\b{re.escape(path.stem)}\b", entry):
                missing.append(str(path.relative_to(SRC)))
    assert not missing, f"docs/architecture.md's tree does not name: {missing}"


# --------------------------------------------------------------------------- project metadata


def test_no_invented_project_address() -> None:
    """No public repository or site exists yet, so pyproject.toml names none (docs/releasing.md,
    "Project addresses"; .ci/check-wheel fails on a Project-URL in the built metadata)."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert "urls" not in project
    releasing = (ROOT / "docs" / "releasing.md").read_text(encoding="utf-8")
    assert "There is no public address yet" in releasing
    check_wheel = (ROOT / ".ci" / "check-wheel").read_text(encoding="utf-8")
    assert 'meta.get_all("Project-URL")' in check_wheel and "no public address" in check_wheel
