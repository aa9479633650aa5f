"""Reading the fenced code blocks of the Markdown docs: shell commands and ``# file:`` blocks.

Conventions the docs follow (and the docs tests rely on):

* A ```` ```bash ```` block holds shell commands, one per line. Blank lines and lines starting
  with ``#`` are comments; a ``$ `` prefix is optional; a line ending in ``\\`` continues on the
  next one. Each block starts in the project root; a ``cd DIR`` line changes the directory for
  the rest of the block.
* A trailing ``# exit N`` says which exit status the command must give (default 0); a trailing
  ``# not-run: <reason>`` marks a command that is shown but not run. Commands that install
  things (``pip install``, ``python3 -m venv``, ``apt-get``) are never run.
* A block of any language whose first line is ``# file: PATH`` is written to ``PATH`` (relative
  to the project root, first line dropped) before the commands that follow it run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)\s*$")
EXIT = re.compile(r"#\s*exit\s+(?P<code>\d+)\b")
NOT_RUN = re.compile(r"#\s*not-run:\s*(?P<reason>.+?)\s*$")
FILE_HEADER = re.compile(r"^(?:#|//)\s*file:\s*(?P<path>\S+)\s*$")
CD = re.compile(r"^cd\s+(?P<dir>\S+)$")
INSTALLS = ("pip install", "python3 -m venv", "python -m venv", "apt-get")
SHELL_LANGS = ("bash",)


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # 1-based line of the opening fence
    lang: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class Command:
    doc: Path
    line: int
    text: str
    expected: int
    skip: str | None = None

    @property
    def id(self) -> str:
        return f"{self.doc.parent.name}/{self.doc.name}:{self.line}"


@dataclass(frozen=True)
class FileBlock:
    doc: Path
    line: int
    path: str
    content: str


def blocks(doc: Path) -> list[Block]:
    found: list[Block] = []
    lines = doc.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence, lang = len(m["indent"]), m["fence"], m["lang"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        found.append(Block(doc, i + 1, lang, tuple(body)))
        i = j + 1
    return found


def file_block(block: Block) -> FileBlock | None:
    if not block.lines:
        return None
    m = FILE_HEADER.match(block.lines[0])
    if m is None:
        return None
    content = "\n".join(block.lines[1:]) + "\n"
    return FileBlock(block.doc, block.line, m["path"], content)


def commands(block: Block) -> list[Command]:
    """The commands of a bash block (``cd`` lines included: the runner interprets them)."""
    if block.lang not in SHELL_LANGS:
        return []
    out: list[Command] = []
    pending = ""
    start = 0
    for offset, raw in enumerate(block.lines, start=1):
        line = raw.strip()
        if not pending:
            start = block.line + offset
            if not line or line.startswith("#"):
                continue
            if line.startswith("$ "):
                line = line[2:]
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text = (pending + line).strip()
        pending = ""
        out.append(make_command(block.doc, start, text))
    return out


def make_command(doc: Path, line: int, text: str) -> Command:
    skip = None
    m = NOT_RUN.search(text)
    if m is not None:
        skip = m["reason"]
    elif any(word in text for word in INSTALLS):
        skip = "installs packages"
    exit_match = EXIT.search(text)
    expected = int(exit_match["code"]) if exit_match else 0
    return Command(doc, line, text, expected, skip)


def doc_steps(doc: Path) -> list[list[Command | FileBlock]]:
    """Per block, in document order: file blocks to write and commands to run."""
    steps: list[list[Command | FileBlock]] = []
    for block in blocks(doc):
        fb = file_block(block)
        if fb is not None:
            steps.append([fb])
            continue
        cmds = commands(block)
        if cmds:
            steps.append(list(cmds))
    return steps
