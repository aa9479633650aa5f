"""What the service shows of a text: its own folders by role or relative name, any other path
of this machine as ``<server path>``; API routes and URLs are not paths of this machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from goldeval.server.settings import ServiceSettings


@pytest.fixture
def settings(tmp_path: Path) -> ServiceSettings:
    return ServiceSettings.build(store_url="store.sqlite3", root=tmp_path / "proj", datasets=None)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("pack 'x' resolves to /tmp/far/away/nopack", "pack 'x' resolves to <server path>"),
        ('File "/usr/lib/python3/json/decoder.py", line 3', 'File "<server path>", line 3'),
        ("see file:///tmp/x/report.html -", "see file:<server path> -"),
        ("--junitxml=/tmp/x/junit.xml", "--junitxml=<server path>"),
        ("/tmp/x/stopping.py:16: KeyboardInterrupt", "<server path>:16: KeyboardInterrupt"),
        (
            "resume with POST /api/eval/runs/abc/resume",
            "resume with POST /api/eval/runs/abc/resume",
        ),
        ("http://127.0.0.1:8000/ui/runs/x.html", "http://127.0.0.1:8000/ui/runs/x.html"),
        ("golden/demo/demo.jsonl:3 and a/tmp/b", "golden/demo/demo.jsonl:3 and a/tmp/b"),
        ("<runs>/2026-12-07/run.json", "<runs>/2026-12-07/run.json"),
    ],
)
def test_other_paths_of_this_machine_are_hidden(
    settings: ServiceSettings, text: str, shown: str
) -> None:
    assert settings.public_text(text) == shown


def test_the_services_own_folders_keep_their_names(settings: ServiceSettings) -> None:
    root = settings.root
    text = f"{root}/golden/demo/demo.jsonl:3; {settings.runs_dir}/r1/run.json; {root}"
    assert settings.public_text(text) == "golden/demo/demo.jsonl:3; .goldeval/runs/r1/run.json; ."


def test_the_store_password_and_inherited_credentials_are_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a run's pytest process inherits (the store URL, provider credentials in the
    environment) is masked in every text the service shows, in each echoed form."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key-0123456789")
    url = "postgresql://goldeval:store%2Fpass-123456@127.0.0.1:5432/evals"
    settings = ServiceSettings.build(store_url=url, root=tmp_path / "proj", datasets=None)
    text = f"connect {url} failed; raw store/pass-123456; key sk-env-key-0123456789"
    shown = settings.public_text(text)
    assert (
        shown == "connect postgresql://goldeval:***@127.0.0.1:5432/evals failed; raw ***; key ***"
    )
    # Nothing to mask: the text itself.
    assert settings.public_text("ok") == "ok"
