"""A live run asks the server's model list once before the first call (issue 31).

Against the real fake server on 127.0.0.1 in its llama.cpp-like mode: it lists the models it
was given and answers ANY model name. Before, ``--golden-model=gpt-9-nonexistent`` ran, exited
0 and recorded that name as the model measured.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from goldeval.testing.llm_server import FakeLLMServer, fixture_responder
from tests.helpers import RunFiles, chat_calls

BASE = ("--golden=generation-v1", "--golden-mode=live", "--golden-no-gate")


def _url(srv: FakeLLMServer, protocol: str) -> str:
    return srv.openai_base_url if protocol == "openai" else srv.base_url


@pytest.mark.parametrize(
    ("protocol", "listing"), [("openai", "/v1/models"), ("ollama", "/api/tags")]
)
def test_a_model_the_server_does_not_list_is_refused_before_any_call(
    pytester: pytest.Pytester, golden_project: Path, protocol: str, listing: str
) -> None:
    with FakeLLMServer(models=["only-model", "embed-model"]) as srv:
        result = pytester.runpytest(
            *BASE,
            f"--golden-provider={protocol}",
            "--golden-model=gpt-9-nonexistent",
            f"--golden-base-url={_url(srv, protocol)}",
        )
        calls = chat_calls(srv)
        listings = [r.path for r in srv.listings]
    assert result.ret == 4, result.stdout.str()
    err = result.stderr.str()
    assert "gpt-9-nonexistent" in err and "only-model" in err and "Traceback" not in err
    assert calls == 0  # refused before any model call
    assert listings == [listing]  # asked once
    assert not (golden_project / ".goldeval" / "runs" / "LATEST").exists()


def test_xdist_refuses_too(pytester: pytest.Pytester, golden_project: Path) -> None:
    with FakeLLMServer(models=["only-model"]) as srv:
        result = pytester.runpytest(
            *BASE,
            "--golden-model=gpt-9-nonexistent",
            f"--golden-base-url={srv.base_url}",
            "-n",
            "2",
        )
        calls = chat_calls(srv)
    assert result.ret == 4, result.stdout.str()
    assert calls == 0 and "gpt-9-nonexistent" in result.stderr.str()


def test_a_listed_model_runs_and_the_served_model_is_recorded(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    with FakeLLMServer(models=["only-model"]) as srv:
        srv.responder = fixture_responder(golden_project / "golden" / "generation")
        srv.served_model = "only-model-q4_k_m.gguf"  # what the server says answered
        result = pytester.runpytest(
            *BASE,
            "--golden-provider=openai",
            "--golden-model=only-model",
            f"--golden-base-url={srv.openai_base_url}",
        )
        listings = len(srv.listings)
    assert result.ret == 0, result.stdout.str()
    assert listings == 1
    run = run_files.latest()
    attempts = [a for c in run["cases"] for a in c["attempts"]]
    assert {a["servedModel"] for a in attempts} == {"only-model-q4_k_m.gguf"}
    assert {a["model"] for a in attempts} == {"only-model"}
    # The name asked for stays the run's identity (baselines compare on it).
    assert run["protocol"]["model"] == "only-model"
    assert run["configuration"]["servedModel"] == "only-model-q4_k_m.gguf"


def test_ollama_names_without_a_tag_match_latest(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    with FakeLLMServer(models=["fake-llm:latest"]) as srv:
        srv.responder = fixture_responder(golden_project / "golden" / "generation")
        result = pytester.runpytest(
            *BASE, "--golden-model=fake-llm", f"--golden-base-url={srv.base_url}"
        )
    assert result.ret == 0, result.stdout.str()


def test_a_server_without_a_model_list_is_not_refused(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    with FakeLLMServer() as srv:  # no list of models given: the lists answer 404
        srv.responder = fixture_responder(golden_project / "golden" / "generation")
        result = pytester.runpytest(
            *BASE,
            "--golden-provider=openai",
            "--golden-model=anything-goes",
            f"--golden-base-url={srv.openai_base_url}",
        )
        listings = len(srv.listings)
    assert result.ret == 0, result.stdout.str()
    assert listings == 1
    run = run_files.latest()
    # The fake names the model asked for: recorded as such.
    attempts = [a for c in run["cases"] for a in c["attempts"]]
    assert {a["servedModel"] for a in attempts} == {"anything-goes"}


def test_a_conftest_provider_is_not_checked_against_the_server(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    """The team's own app answers: the model name is its label, the list is not asked."""
    pytester.makeconftest(
        "import pytest\n\n"
        "@pytest.fixture(scope='session')\n"
        "def golden_provider():\n"
        "    return lambda case: 'Weekdays 9-17.'\n"
    )
    with FakeLLMServer(models=["only-model"]) as srv:
        result = pytester.runpytest(
            *BASE, "--golden-model=my-app", f"--golden-base-url={srv.base_url}"
        )
        listings = len(srv.listings)
    assert result.ret in (0, 1), result.stdout.str()  # graded, whatever the answers
    assert listings == 0


def test_a_listed_name_echoing_the_key_is_masked(
    pytester: pytest.Pytester,
    golden_project: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_files: RunFiles,
) -> None:
    """A proxy that lists the caller's key as a model name (and names it as the model that
    answered): the refusal printed it, and the service showed it in ``error``."""
    key = "sk-planted-LISTECHO-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with FakeLLMServer(models=[f"echo-{key}", "m"]) as srv:
        refused = pytester.runpytest(
            *BASE,
            "--golden-provider=openai",
            "--golden-model=other",
            f"--golden-base-url={srv.openai_base_url}",
        )
        srv.responder = fixture_responder(golden_project / "golden" / "generation")
        srv.served_model = f"served-{key}"
        ran = pytester.runpytest(
            *BASE,
            "--golden-provider=openai",
            "--golden-model=m",
            f"--golden-base-url={srv.openai_base_url}",
        )
    assert refused.ret == 4
    out = refused.stdout.str() + refused.stderr.str()
    assert "the server lists echo-***" in out and key not in out
    assert ran.ret == 0, ran.stdout.str()
    text = (run_files.latest_dir() / "run.json").read_text(encoding="utf-8")
    assert key not in text and key not in ran.stdout.str() + ran.stderr.str()
