"""Helpers for the report tests: the JUnit schema and a real headless Chromium.

Chromium is driven through its command line only (no new Python dependency):
``--dump-dom`` prints the DOM after scripts ran (``--virtual-time-budget`` lets them finish),
``--screenshot`` writes a PNG, and ``--enable-logging=stderr`` prints every console message
as a ``CONSOLE`` line (uncaught errors read ``Uncaught ...``), which the tests treat as errors.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
JUNIT_XSD = HERE / "junit.xsd"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]
_CONSOLE = re.compile(r":CONSOLE[:(\]]|Uncaught ")


@pytest.fixture(scope="session")
def junit_schema() -> Any:
    import xmlschema

    return xmlschema.XMLSchema(str(JUNIT_XSD))


@dataclass
class Page:
    dom: str
    console: list[str]
    stderr: str


@dataclass
class Browser:
    executable: str
    workdir: Path
    runs: int = field(default=0)

    def _run(self, extra: list[str], url: str) -> subprocess.CompletedProcess[str]:
        self.runs += 1
        profile = self.workdir / f"profile-{self.runs}"
        cmd = [self.executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url]
        return subprocess.run(
            cmd, capture_output=True, text=True, timeout=180, check=False, stdin=subprocess.DEVNULL
        )

    def dump_dom(self, path: Path) -> Page:
        proc = self._run(["--virtual-time-budget=3000", "--dump-dom"], path.resolve().as_uri())
        assert proc.returncode == 0, f"chromium failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        assert "<html" in proc.stdout.lower(), f"no DOM dumped:\n{proc.stderr[-3000:]}"
        console = [ln for ln in proc.stderr.splitlines() if _CONSOLE.search(ln)]
        return Page(proc.stdout, console, proc.stderr)

    def screenshot(self, path: Path, png: Path, size: str = "1280,2000") -> Page:
        proc = self._run(
            ["--virtual-time-budget=3000", f"--screenshot={png}", f"--window-size={size}"],
            path.resolve().as_uri(),
        )
        assert proc.returncode == 0, f"chromium failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        console = [ln for ln in proc.stderr.splitlines() if _CONSOLE.search(ln)]
        return Page("", console, proc.stderr)


@pytest.fixture
def browser(tmp_path: Path) -> Browser:
    """Headless Chromium; missing it fails the test unless GOLDEVAL_ALLOW_NO_BROWSER=1."""
    executable = shutil.which("chromium")
    if executable is None:
        if os.environ.get("GOLDEVAL_ALLOW_NO_BROWSER") == "1":
            pytest.skip("chromium not installed and GOLDEVAL_ALLOW_NO_BROWSER=1")
        pytest.fail(
            "chromium is required for the HTML report tests: install it with "
            "`apt-get update && apt-get install -y chromium` (or set "
            "GOLDEVAL_ALLOW_NO_BROWSER=1 to skip them)",
            pytrace=False,
        )
    workdir = tmp_path / "chromium"
    workdir.mkdir()
    return Browser(executable, workdir)


class DomIndex(HTMLParser):
    """The elements of a dumped DOM: tag, attributes and the text inside each script."""

    def __init__(self, dom: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self.title = ""  # the document's title (the first <title>, not SVG ones)
        self._titles = 0
        self._in: str | None = None
        self.feed(dom)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag == "script":
            self._in = tag
            self.scripts.append("")
        elif tag == "title":
            self._titles += 1
            self._in = tag if self._titles == 1 else None

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "script":
            self.scripts[-1] += data
        elif self._in == "title":
            self.title += data

    def with_attr(self, name: str) -> list[tuple[str, dict[str, str | None]]]:
        return [(t, a) for t, a in self.elements if name in a]
