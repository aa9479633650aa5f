"""Variants on their own servers (issue 35): each variant's provider and base URL, its own
limiter, the two servers called at once, its key masked, its protocol naming its provider;
against two real fake model servers on 127.0.0.1, serially and under two xdist workers."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from goldeval.testing.llm_server import FakeLLMServer
from goldeval.testing.llm_server.fixtures import fixture_responder

SECRET = "sk-variant-secret-0123456789abcdef"


@pytest.fixture
def second_server(golden_project: Path) -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        srv.responder = fixture_responder(golden_project / "golden" / "generation")
        yield srv


def _manifest(project: Path, other: FakeLLMServer) -> None:
    path = project / "golden/generation/dataset.yaml"
    text = path.read_text(encoding="utf-8").replace(
        "\ngate:\n",
        "\ngate:\n  compare: {control: local, candidate: remote, nonInferiority: 0.3}\n",
        1,
    )
    text += (
        "variants:\n"
        "  - {name: local, model: m-local}\n"
        f"  - {{name: remote, provider: openai, baseUrl: '{other.base_url}', model: m-remote}}\n"
    )
    path.write_text(text, encoding="utf-8")


def _add_variants(project: Path, entries: str) -> None:
    """The dataset's manifest with a ``variants:`` block of these entries (YAML lines)."""
    path = project / "golden/generation/dataset.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "variants:\n" + entries, encoding="utf-8")


def _runs(project: Path) -> dict[str, dict[str, Any]]:
    runs = [json.loads(p.read_text()) for p in (project / ".goldeval/runs").glob("*/run.json")]
    return {r["variant"]: r for r in runs}


def test_each_variant_calls_its_own_server_and_both_run_at_once(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    second_server: FakeLLMServer,
    golden_project: Path,
    plugin_args: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    _manifest(golden_project, second_server)
    llm_server.latency = second_server.latency = 0.05
    both: list[bool] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            both.append(llm_server.in_flight > 0 and second_server.in_flight > 0)
            time.sleep(0.002)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = pytester.runpytest(
            "--golden=generation-v1",
            "--golden-mode=live",
            f"--golden-base-url={llm_server.base_url}",
            "--golden-attempts=2",
            *plugin_args,
        )
    finally:
        stop.set()
        watcher.join()
    assert result.ret == 0, result.stdout.str()
    result.assert_outcomes(passed=40)
    local = [r for r in llm_server.requests if r.messages]
    remote = [r for r in second_server.requests if r.messages]
    assert {r.model for r in local} == {"m-local"} and {r.model for r in remote} == {"m-remote"}
    # Every row, twice, on each server (under xdist's work stealing a prefetched call can be
    # made again by the other worker: at least, not exactly; see pytest_plugin/prefetch.py).
    for calls in (local, remote):
        asked = [r.last_user_message for r in calls]
        assert len(set(asked)) == 10 and all(asked.count(m) >= 2 for m in asked)
        assert len(calls) >= 20
    # The remote variant speaks OpenAI with its own key; the local one Ollama without it.
    assert all(r.path == "/v1/chat/completions" for r in remote)
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in remote)
    assert all("authorization" not in r.headers for r in local)
    # Interleaved items and a pool sized per server: both servers were busy at once.
    assert any(both)
    runs = _runs(golden_project)
    assert runs["remote"]["protocol"]["provider"] == "openai"
    assert runs["local"]["protocol"]["provider"] == "ollama"
    assert runs["remote"]["configuration"]["providerSettings"]["baseUrl"] == (
        second_server.base_url
    )
    assert runs["remote"]["variantComparison"]["decision"] == "NON_INFERIOR"
    # The key reached the server, never an artifact.
    for path in (golden_project / ".goldeval").rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(encoding="utf-8", errors="replace"), path


def test_a_variant_provider_nobody_knows_is_a_usage_error(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    _add_variants(
        golden_project, "  - {name: a, model: m1}\n  - {name: b, provider: nosuch, model: m2}\n"
    )
    result = pytester.runpytest(
        "--golden=generation-v1", "--golden-mode=live", f"--golden-base-url={llm_server.base_url}"
    )
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*variant 'b': unknown provider 'nosuch'*"])
    assert llm_server.requests == []


def test_a_variant_s_request_options_go_over_the_manifest_s(
    pytester: pytest.Pytester, llm_server: FakeLLMServer, golden_project: Path
) -> None:
    _add_variants(
        golden_project, "  - {name: cold}\n  - {name: hot, options: {temperature: 0.7, seed: 3}}\n"
    )
    result = pytester.runpytest(
        "--golden=generation-v1",
        "--golden-mode=live",
        f"--golden-base-url={llm_server.base_url}",
        "--golden-model=m",
        "--golden-no-gate",
    )
    assert result.ret == 0, result.stdout.str()
    bodies = [r.json for r in llm_server.requests if r.json and "messages" in r.json]
    temperatures = sorted(b["options"].get("temperature") for b in bodies)
    # Ten calls each: the session's temperature 0 for cold, the variant's 0.7 for hot.
    assert temperatures == [0.0] * 10 + [0.7] * 10
    assert sorted(b["options"].get("seed") for b in bodies if b["options"].get("seed")) == [3] * 10
    runs = _runs(golden_project)
    assert runs["hot"]["protocol"]["optionsHash"]
    assert "optionsHash" not in runs["cold"]["protocol"]


def test_a_variant_s_key_echoed_by_its_model_lands_nowhere(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    second_server: FakeLLMServer,
    golden_project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The remote variant's own key (not the session's) is known to the masker: a model that
    echoes it back gets no recorded fixture, and no file of the run holds it."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    _manifest(golden_project, second_server)
    replay = second_server.responder
    second_server.responder = lambda req: f"here is your key: {SECRET}\n{replay(req)}"
    pytester.runpytest(
        "--golden=generation-v1",
        "--golden-mode=record",
        f"--golden-base-url={llm_server.base_url}",
    )
    assert second_server.requests, "the remote variant was not called"
    for path in golden_project.rglob("*"):
        if path.is_file() and ".pytest_cache" not in path.parts:
            assert SECRET not in path.read_text(encoding="utf-8", errors="replace"), path
    assert not list((golden_project / "golden/generation/fixtures/remote").glob("*.out.md"))


def test_an_echoed_key_is_masked_in_the_answer_excerpts(
    pytester: pytest.Pytester,
    llm_server: FakeLLMServer,
    second_server: FakeLLMServer,
    golden_project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Live mode grades the masked answer: the matrix's excerpts and the side-by-side answers
    (run.json, report.md, the HTML report) show ``***``, never the key."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    _manifest(golden_project, second_server)
    second_server.responder = lambda req: f"here is your key: {SECRET}"
    pytester.runpytest(
        "--golden=generation-v1",
        "--golden-mode=live",
        f"--golden-base-url={llm_server.base_url}",
        "--html=report.html",
        "--self-contained-html",
    )
    cmp = _runs(golden_project)["remote"]["variantComparison"]
    excerpts = [row["cells"][1]["excerpt"] for row in cmp["matrix"]["rows"]]
    assert excerpts and all(e == "here is your key: ***" for e in excerpts)
    assert cmp["answers"] and all(a["candidate"] == excerpts[0] for a in cmp["answers"])
    for path in golden_project.rglob("*"):
        if path.is_file() and ".pytest_cache" not in path.parts:
            assert SECRET not in path.read_text(encoding="utf-8", errors="replace"), path
