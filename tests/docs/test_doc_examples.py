"""The docs and the examples tell the same story: shared code is identical, links resolve."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.mdcode import blocks, file_block
from tests.helpers import ROOT

DOCS = [
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "README.md",
    *sorted((ROOT / "examples").glob("*/README.md")),
]
LINK = re.compile(r"\]\((?P<target>[^)\s#]+)(?:#(?P<anchor>[^)\s]+))?\)")


def _file_blocks() -> list[tuple[Path, str, str]]:
    found = []
    for doc in DOCS:
        for block in blocks(doc):
            fb = file_block(block)
            if fb is not None:
                found.append((doc, fb.path, fb.content))
    return found


FILE_BLOCKS = _file_blocks()


def test_docs_carry_file_blocks() -> None:
    paths = {path for _, path, _ in FILE_BLOCKS}
    assert {
        "examples/custom-grader/snake_case_grader.py",
        "examples/quickstart/conftest.py",
        "gateway_provider.py",
        "conftest.py",
    } <= paths


@pytest.mark.parametrize(
    ("doc", "path", "content"),
    [b for b in FILE_BLOCKS if b[1].startswith("examples/")],
    ids=[f"{b[0].name}:{b[1]}" for b in FILE_BLOCKS if b[1].startswith("examples/")],
)
def test_example_code_in_docs_matches_the_example(doc: Path, path: str, content: str) -> None:
    """A doc that shows an example's file shows it verbatim (the docs test runs the doc's copy,
    tests/examples runs the file: both must be the same code)."""
    assert (ROOT / path).read_text(encoding="utf-8") == content, (
        f"{doc.name} shows {path} differently from the file; copy the file into the doc"
    )


def _anchors(doc: Path) -> set[str]:
    out = set()
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
            out.add(slug)
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for m in LINK.finditer(doc.read_text(encoding="utf-8")):
        target = m["target"]
        if "://" in target or target.startswith("mailto:"):
            continue
        path = (doc.parent / target).resolve()
        if not path.exists():
            broken.append(target)
        elif m["anchor"] and path.suffix == ".md" and m["anchor"] not in _anchors(path):
            broken.append(f"{target}#{m['anchor']}")
    assert not broken, f"broken links in {doc.name}: {broken}"


def test_exit_code_table_is_the_code_s_table() -> None:
    """docs/methodology.md's precedence table is the one table of goldeval.verdict.exit_codes."""
    from goldeval.verdict.exit_codes import RULES, markdown_table

    text = (ROOT / "docs" / "methodology.md").read_text(encoding="utf-8")
    section = text.split("## 7. Exit codes", 1)[1].split("\n## ", 1)[0]
    table = section.split("-->", 1)[1].split("<!-- exit-table:end -->", 1)[0].strip()
    assert len(RULES) >= 10
    assert table == markdown_table()
