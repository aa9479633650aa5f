"""A run's own log on disk (``.goldeval/service/<id>.log``, pytest's output): masked as it is
written, with the masker of the log bundle, and readable by the service's user only (0600).
A project's conftest.py that prints what the run inherited (the store URL with its password,
provider keys) left them raw in that file: only the LOG_BUNDLE download was masked."""

from __future__ import annotations

import os
import random
import stat
import uuid
from pathlib import Path
from typing import Any

import pytest

from goldeval.core.secrets import MIN_SECRET_LENGTH, run_secrets
from goldeval.core.settings import mask_secrets
from goldeval.server.logs import RUN_LOG_MODE, LineMasker, open_run_log
from tests.server.conftest import Service, _raw_connect, _with_search_path

SECRETS_ENV = {
    "OPENAI_API_KEY": "sk-probe-OPENAI-7c1e9f2a4b",
    "GOLDEVAL_JUDGE_API_KEY": "judge-probe-KEY-55aa33cc",
    "OLLAMA_USER": "probe-user",
    "OLLAMA_PASSWORD": "ollama/probe+pass=9876",
    "OPENAI_BASE_URL": "http://proxyuser:url-probe-PASS-4242@127.0.0.1:9/v1",
}
#: Printed by the project's conftest.py: every secret the run inherited, raw and in the forms
#: a program writes them (base64, percent-encoded, JSON), read at configure time, in the
#: terminal summary and at the end, there inside a line far longer than the writer keeps.
CONFTEST = """
import base64, json, os, sys
from urllib.parse import quote as _quote

NAMES = ("OPENAI_API_KEY", "GOLDEVAL_JUDGE_API_KEY", "OLLAMA_PASSWORD", "OPENAI_BASE_URL",
         "GOLDEVAL_STORE", "PROBE_STORE_PASSWORD")


def _shown(quote=_quote, b64=base64.b64encode, dumps=json.dumps, environ=os.environ):
    out = []
    for value in filter(None, (environ.get(n, "") for n in NAMES)):
        out += [value, b64(value.encode()).decode(), quote(value, safe=""), dumps(value)]
    return out


def pytest_configure(config):
    config._probe_shown = _shown()


def pytest_terminal_summary(terminalreporter, config):
    terminalreporter.write_line("conftest-summary-marker")
    for value in config._probe_shown:
        terminalreporter.write_line(f"leak: {value}")


def pytest_unconfigure(config, stderr=sys.stderr):
    pad = "x" * 70000
    stderr.write("long:" + pad.join(config._probe_shown) + pad + "\\nconftest-end-marker\\n")
    stderr.flush()
"""


def _forms(store_url: str, password: str | None) -> list[str]:
    """What the masker knows of the secrets above (every form, as the service builds them)."""
    forms = run_secrets((), SECRETS_ENV, urls=(store_url,))
    if password:
        forms.append(password)
    return sorted({f for f in forms if len(f) >= MIN_SECRET_LENGTH}, key=len, reverse=True)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"], indirect=True)
def test_the_run_log_on_disk_holds_no_secret_and_is_private(
    service_factory: Any, backend: str, request: pytest.FixtureRequest
) -> None:
    password = None
    env = dict(SECRETS_ENV)
    svc: Service = service_factory(env=env)
    if backend == "postgresql":
        server = request.getfixturevalue("postgres_server")
        if server.password_url is None:
            pytest.skip("an external PostgreSQL URL: no password role to test with")
        schema = f"pw_{uuid.uuid4().hex[:12]}"
        with _raw_connect(server.url) as conn:
            conn.execute(f"CREATE SCHEMA {schema} AUTHORIZATION goldeval_pw")

        def drop() -> None:
            with _raw_connect(server.url) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")

        request.addfinalizer(drop)
        svc.store_url = _with_search_path(server.password_url, schema)
        password = server.password
        svc.env["PROBE_STORE_PASSWORD"] = password
    (svc.root / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    svc.serve()
    with svc.client("EVAL") as client:
        created = client.post("/api/eval/runs", json={"dataset": "demo-v1"}).json()
    run = svc.wait_status(created["id"])
    assert run["status"] == "COMPLETED", run

    path = svc.root / ".goldeval" / "service" / f"{created['id']}.log"
    data = path.read_bytes()
    # The conftest's lines are there (the output was written), its secrets are not.
    assert b"conftest-summary-marker" in data and b"conftest-end-marker" in data, data[-2000:]
    assert b"leak: ***" in data
    forms = _forms(svc.store_url, password)
    assert len(forms) > 20  # raw, base64, percent-encoded, JSON... of each
    leaked = [f for f in forms if f.encode() in data]
    assert not leaked, f"{len(leaked)} secret form(s) in the log on disk"
    assert stat.S_IMODE(path.stat().st_mode) == RUN_LOG_MODE == 0o600


def test_the_masker_cuts_a_stream_anywhere_without_leaving_a_secret_whole() -> None:
    """Lines and endless lines, fed in pieces of any size: what is written is the stream as
    the bundle's masker shows it whole (mask_secrets), and never holds a secret."""
    secrets = sorted(
        ["sk-probe-0123456789abcdef", "hunter2hunter2", "aaaaaaaa", "p%40ss/word+1"],
        key=len,
        reverse=True,
    )
    rng = random.Random(7)
    for _ in range(3000):
        pieces = [
            rng.choice([*secrets, "\n", "a" * rng.randint(1, 6), "é", "x" * rng.randint(0, 9)])
            for _ in range(rng.randint(1, 14))
        ]
        data = "".join(pieces).encode() + b"\xff"  # not UTF-8: passed through as is
        masker = LineMasker(secrets, limit=rng.randint(1, 16))
        out, at = b"", 0
        while at < len(data):
            step = rng.randint(1, 9)
            out += masker.feed(data[at : at + step])
            at += step
        out += masker.feed(b"", final=True)
        assert not [s for s in secrets if s.encode() in out], (data, out)
        if not any(chain in data for chain in (b"hunter2hunter2h", b"aaaaaaaaa")):
            whole = mask_secrets(data.decode("utf-8", "surrogateescape"), secrets)
            assert out == whole.encode("utf-8", "surrogateescape"), (data, out)


def test_the_log_file_is_created_private_and_an_old_one_made_private(tmp_path: Path) -> None:
    fresh, old = tmp_path / "new.log", tmp_path / "old.log"
    old.write_text("from an older version\n")
    os.chmod(old, 0o644)
    for path in (fresh, old):
        fd = open_run_log(path)
        os.write(fd, b"line\n")
        os.close(fd)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert old.read_text() == "from an older version\nline\n"
    link = tmp_path / "link.log"
    link.symlink_to(tmp_path / "elsewhere.log")
    with pytest.raises(OSError):
        open_run_log(link)  # never written through a link
    assert not (tmp_path / "elsewhere.log").exists()
