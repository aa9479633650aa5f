"""``goldeval init [NAME]``: a dataset a newcomer can run at once.

The scaffold is generic on purpose: no RAG pack, two rows graded by two different built-in
graders, their recorded answers and a fixture-mode gate. Nothing that exists is overwritten.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from goldeval.core.errors import GoldevalError
from goldeval.dataset.discovery import check_golden_root

#: Files that make a folder a pytest root (the plugin's project root, see docs/configuration.md).
PYTEST_INI_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")

_MANIFEST = """\
# A golden dataset: this manifest, one rows file (*.jsonl) and fixtures/<id>.out.md.
version: {version}         # the dataset id: pytest --golden={version}; bump it when a row changes
name: {name}
description: >-
  Example rows made by `goldeval init`; replace them with cases of your own application.
changelog:
  - "{version}: two example rows (contains_any, regex)."
pack: none                 # no RAG pack: retrieval is not graded
gate:
  fixture:                 # recorded answers: everything must pass
    thresholds:
      overallPassRate: 1.0
    # Gate on the comparison with the committed baseline too: a case that passed there and
    # fails now (a new failure) fails the run even when the thresholds above still hold.
    # allowedRegression: 0.0
"""

_ROWS = [
    {
        "id": "greeting",
        "prompt": "Say hello to a new customer.",
        "expect": {"contains_any": ["hello", "welcome"]},
        "tags": ["smoke"],
    },
    {
        "id": "order-number",
        "prompt": "Which format does an order number have?",
        "expect": {"regex": r"ORD-\d{6}"},
        "tags": ["orders"],
    },
]

_FIXTURES = {
    "greeting": "Hello and welcome! How can I help you today?\n",
    "order-number": "An order number looks like ORD-123456: ORD, a dash and six digits.\n",
}


@dataclass
class Scaffold:
    """What ``init`` wrote (paths relative to the project root) and what it left alone."""

    root: Path
    dataset_id: str
    created: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)

    def next_steps(self) -> list[str]:
        return [
            f"pytest --golden={self.dataset_id}",
            f"pytest --golden={self.dataset_id} "
            f"--golden-save-baseline=baselines/{self.dataset_id}.json",
            f"pytest --golden={self.dataset_id} --golden-mode=live --golden-model=MODEL",
        ]


def find_project_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` with a pytest configuration file."""
    for folder in (start, *start.parents):
        for name in PYTEST_INI_FILES:
            candidate = folder / name
            if not candidate.is_file():
                continue
            if name == "pyproject.toml" and "[tool.pytest.ini_options]" not in _read(candidate):
                continue
            if name in ("tox.ini", "setup.cfg") and not re.search(
                r"^\[(tool:)?pytest\]", _read(candidate), re.M
            ):
                continue
            return folder
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def init_dataset(name: str, cwd: Path) -> Scaffold:
    """Create ``golden/NAME/`` under the project root (the pytest root, else ``cwd``)."""
    if not _NAME.match(name):
        raise GoldevalError(
            f"dataset name {name!r}: use lower-case letters, digits, '-' or '_', "
            "starting with a letter (e.g. support-bot)"
        )
    root = find_project_root(cwd) or cwd
    scaffold = Scaffold(root=root, dataset_id=f"{name}-v1")
    # Written into: never through a link out of the project (pytest would refuse to read it).
    check_golden_root(root / "golden", root)
    folder = root / "golden" / name
    if folder.exists():
        raise GoldevalError(
            f"golden/{name} exists already: choose another name or edit that dataset",
            path=folder,
        )
    (folder / "fixtures").mkdir(parents=True)
    files: dict[Path, str] = {
        folder / "dataset.yaml": _MANIFEST.format(version=scaffold.dataset_id, name=name),
        folder / f"{name}.jsonl": "".join(json.dumps(row) + "\n" for row in _ROWS),
    }
    for case_id, text in _FIXTURES.items():
        files[folder / "fixtures" / f"{case_id}.out.md"] = text
    if find_project_root(cwd) is None:
        # Without a pytest configuration file the rootdir (and so golden/ and .goldeval/)
        # would depend on the folder pytest is started from.
        files[root / "pytest.ini"] = "[pytest]\ngolden_root = golden\n"
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
        scaffold.created.append(path.relative_to(root).as_posix())
    _ignore_run_folders(root, scaffold)
    return scaffold


def _ignore_run_folders(root: Path, scaffold: Scaffold) -> None:
    gitignore = root / ".gitignore"
    if gitignore.is_symlink():
        scaffold.kept.append(".gitignore (a link: not written through)")
        return
    text = _read(gitignore) if gitignore.is_file() else ""
    if any(line.strip().rstrip("/") in (".goldeval", "/.goldeval") for line in text.splitlines()):
        scaffold.kept.append(".gitignore (already ignores .goldeval/)")
        return
    prefix = "" if not text or text.endswith("\n") else "\n"
    with gitignore.open("a", encoding="utf-8") as fh:
        fh.write(f"{prefix}# pytest-goldeval run folders and run store\n.goldeval/\n")
    scaffold.created.append(".gitignore (.goldeval/ added)")
