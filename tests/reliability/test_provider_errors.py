"""Providers: async providers, non-retryable error kinds, retry messages (issue 15).

Black box with pytester against the real local LLM server; the team's own async provider is a
conftest override of ``golden_provider``, run serially and with ``-n 2``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import RunFiles

CASES = 10

# --------------------------------------------------------------------------- async providers

ASYNC_CALLABLE = '''
import asyncio, json, os, threading
from pathlib import Path
import pytest

FIX = Path(__file__).parent / "golden" / "generation" / "fixtures"
_lock = threading.Lock()
_state = {"now": 0, "max": 0}

def _enter():
    with _lock:
        _state["now"] += 1
        _state["max"] = max(_state["max"], _state["now"])

def _leave():
    with _lock:
        _state["now"] -= 1
    name = "inflight-" + os.environ.get("PYTEST_XDIST_WORKER", "main") + ".json"
    Path(name).write_text(json.dumps(_state["max"]))

@pytest.fixture(scope="session")
def golden_provider():
    async def answer(case):
        _enter()
        try:
            await asyncio.sleep(0.05)
            return (FIX / f"{case.id}.out.md").read_text(encoding="utf-8")
        finally:
            _leave()
    return answer
'''

ASYNC_PROVIDER_CLASS = '''
import asyncio
from pathlib import Path
import pytest
from goldeval.providers.base import Answer, Provider

FIX = Path(__file__).parent / "golden" / "generation" / "fixtures"

class AsyncApp(Provider):
    name = "async-app"
    async def complete(self, request):
        await asyncio.sleep(0.01)
        return Answer(text=(FIX / f"{request.case.id}.out.md").read_text(encoding="utf-8"))

@pytest.fixture(scope="session")
def golden_provider():
    return AsyncApp()
'''

RETURNS_COROUTINE = '''
import asyncio
from pathlib import Path
import pytest

FIX = Path(__file__).parent / "golden" / "generation" / "fixtures"

async def _fetch(case_id):
    await asyncio.sleep(0)
    return (FIX / f"{case_id}.out.md").read_text(encoding="utf-8")

class App:
    def __call__(self, case):  # a plain callable that hands back a coroutine
        return _fetch(case.id)

@pytest.fixture(scope="session")
def golden_provider():
    return App()
'''


def _outputs(run: dict) -> list[str]:
    return [a.get("output") or "" for c in run["cases"] for a in c["attempts"]]


@pytest.mark.parametrize(
    "conftest",
    [ASYNC_CALLABLE, ASYNC_PROVIDER_CLASS, RETURNS_COROUTINE],
    ids=["async-def-callable", "async-complete", "callable-returning-coroutine"],
)
def test_async_provider_is_awaited_in_fixture_mode(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles,
    plugin_args: list[str], conftest: str,
) -> None:
    pytester.makeconftest(conftest)
    result = pytester.runpytest("--golden=generation-v1", "--golden-artifacts=always",
                                "-p", "no:cacheprovider", *plugin_args)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=CASES)
    outputs = _outputs(run_files.latest())
    assert len(outputs) == CASES
    assert not any("coroutine" in o for o in outputs)


def test_async_callable_runs_concurrently_through_the_live_prefetch_pool(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles,
    plugin_args: list[str],
) -> None:
    pytester.makeconftest(ASYNC_CALLABLE)
    result = pytester.runpytest("--golden=generation-v1", "--golden-mode=live",
                                "--golden-model=app", "--golden-no-gate",
                                "--golden-concurrency=4", "--golden-artifacts=always",
                                "-p", "no:cacheprovider", *plugin_args)
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=CASES)
    run = run_files.latest()
    assert not any("coroutine" in o for o in _outputs(run))
    peaks = [json.loads(p.read_text()) for p in golden_project.glob("inflight-*.json")]
    assert peaks and max(peaks) >= 2, peaks  # calls overlapped on the shared loop
