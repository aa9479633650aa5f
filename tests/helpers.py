"""Helpers shared by the black-box tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Overrides tests/conftest.py's ``plugin_args`` (serial and ``-n 2``) with the serial run
#: alone, for a black-box test whose behaviour does not depend on xdist: refused before any
#: worker starts, decided on the controller from the same run document, or per attempt in
#: code a worker runs exactly as a serial session does. The ``[xdist2]`` twins stay where
#: xdist is what is under test (issue 34): stops and duplicates reported through workers,
#: the store and recordings written by workers, reports built from workers' reports, the
#: prefetch pool, signals, and the serial == ``-n 2`` figures of each surface.
SERIAL_ONLY = pytest.mark.parametrize("plugin_args", [[]], ids=["serial"])

#: Every report of a run written (JUnit, the dashboard JUnit, pytest-html, every artifact):
#: the tests of what reaches those files add their dataset and options.
REPORT_WRITERS = [
    "--junitxml=junit.xml",
    "--golden-junit=dash.xml",
    "--html=report.html",
    "--self-contained-html",
    "--golden-artifacts=always",
]

#: Every writer of a run's files switched on (the reports, the store, the response cache), no
#: retries, not gated: the secrets tests look in all of them. The dataset and the model are
#: added by each test.
EVERY_WRITER = [
    *REPORT_WRITERS,
    "--golden-store=store.sqlite3",
    "--golden-cache=cache",
    "--golden-retries=0",
    "--golden-no-gate",
    "-p",
    "no:cacheprovider",
]

#: A live run of generation-v1 against the fake server's model, not gated, no pytest cache:
#: the reliability tests' common start (the base URL and the case's options are added).
LIVE_NO_GATE = [
    "--golden=generation-v1",
    "--golden-mode=live",
    "--golden-model=fake-llm:latest",
    "--golden-no-gate",
    "-p",
    "no:cacheprovider",
]


class RunFiles:
    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def runs(self) -> Path:
        return self.root / ".goldeval" / "runs"

    def latest_dir(self) -> Path:
        return Path((self.runs / "LATEST").read_text(encoding="utf-8").strip())

    def latest(self) -> dict[str, Any]:
        return json.loads((self.latest_dir() / "run.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def strip_timings(value: Any) -> Any:
    """Drop fields that legitimately differ between two runs of the same thing."""
    volatile = {
        "durationMs",
        "queueMs",
        "ttftMs",
        "queueWait",
        "timeToFirstToken",
        "runId",
        "timestamp",
        "latency",
        "configFingerprint",
        "gitCommit",
        "outputDir",
        "environment",
        "baselinePath",
        "exitDecision",
        "notes",
    }
    if isinstance(value, dict):
        return {k: strip_timings(v) for k, v in value.items() if k not in volatile}
    if isinstance(value, list):
        return [strip_timings(v) for v in value]
    return value


def spawn_pytest(project: Path, *args: str) -> subprocess.Popen[str]:
    """``python -m pytest ARGS`` started in ``project`` as a process of its own (to signal or
    kill it), output merged; not an xdist worker of the suite (its PYTEST_XDIST variables
    are left out)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", *args],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def chat_calls(server: Any) -> int:
    """Chat requests a FakeLLMServer received, over both protocols."""
    return sum(1 for r in server.requests if r.path in ("/api/chat", "/v1/chat/completions"))


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``goldeval ARGS`` in a real subprocess (as a user or CI would call it)."""
    return subprocess.run(
        [sys.executable, "-m", "goldeval.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def decide_run_exit(
    run: Any, comparison: Any = None, gate: Any = None, *, pytest_status: int = 0, **facts: Any
) -> Any:
    """The one exit decision for a run document (``RunOutcome.from_run`` → ``decide_exit``);
    ``run``: the JSON document, typed here as every caller types it."""
    from goldeval.results.documents import typed_run
    from goldeval.verdict.exit_codes import decide_exit
    from goldeval.verdict.outcome import RunOutcome

    return decide_exit(
        RunOutcome.from_run(typed_run(run), comparison, gate, pytest_status=pytest_status, **facts)
    )


def assert_manifest_refused(path: Path, field: str, fragment: str) -> None:
    """Reading the manifest at ``path`` is refused with an error that starts with the file and
    the field (``path: field: ``) and says ``fragment``."""
    from goldeval.core.errors import DatasetError
    from goldeval.dataset.manifest import read_manifest

    with pytest.raises(DatasetError) as info:
        read_manifest(path)
    text = str(info.value)
    assert text.startswith(f"{path}: {field}: "), text
    assert fragment in text


def app_provider_conftest(fixtures: str, case_id: str, how: str) -> str:
    """conftest.py source of a team's own app as the provider (the ``golden_provider``
    fixture): each row answers its recorded fixture from the folder ``fixtures`` (relative to
    the conftest), except ``case_id``, which fails (``pytest.fail``) when the Python
    expression ``how`` gives "fail" and stalls 4 s (past pytest-timeout's limit) when it
    gives "stall"."""
    return f"""
import os, time
from pathlib import Path
import pytest

ROOT = Path(__file__).parent
FIXTURES = ROOT / {fixtures!r}

def app(case):
    if case.id == {case_id!r}:
        how = {how}
        if how == "fail":
            pytest.fail("the app refused this row")
        if how == "stall":
            time.sleep(4)
    return (FIXTURES / f"{{case.id}}.out.md").read_text(encoding="utf-8")

@pytest.fixture(scope="session")
def golden_provider():
    return app
"""


#: A two-row fixture dataset (``bot-v1``): the rows ``goldeval init`` makes, answered right.
BOT_ANSWERS = {"greeting": "Hello there.", "order-number": "Your order ORD-123456 is on its way."}
BOT_EXPECT = {"greeting": ["Hello"], "order-number": ["ORD-"]}


def make_bot_dataset(root: Path, gate: str) -> Path:
    """``root/golden/bot``: the ``bot-v1`` manifest with ``gate`` (YAML under ``gate:``
    ``fixture:``, indented four spaces), its two rows and their recorded answers."""
    ds = root / "golden" / "bot"
    (ds / "fixtures").mkdir(parents=True)
    (ds / "dataset.yaml").write_text(
        f"version: bot-v1\nname: bot\npack: none\ngate:\n  fixture:\n{gate}", encoding="utf-8"
    )
    rows = [
        {"id": cid, "prompt": f"say {cid}", "expect": {"contains_any": BOT_EXPECT[cid]}}
        for cid in BOT_ANSWERS
    ]
    (ds / "bot.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for cid, answer in BOT_ANSWERS.items():
        (ds / "fixtures" / f"{cid}.out.md").write_text(answer + "\n", encoding="utf-8")
    return ds
