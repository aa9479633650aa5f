"""Planted secrets never leak: not into any file of the project, not into the terminal.

Secrets are planted the four ways a user configures credentials (``OPENAI_API_KEY``,
``OLLAMA_USER``/``OLLAMA_PASSWORD``, ``user:password@`` in ``--golden-base-url`` and in
``OLLAMA_HOST``), and the real local server echoes the ``Authorization`` header back in error
bodies: a 500, a 401 whose body is not JSON, and a 200 carrying ``{"error": ...}``; the judge
gets 500s with the echo too. Each configuration runs in live (or record) mode with every
writer on: ``--junitxml``, ``--golden-junit``, ``--html --self-contained-html``,
``--golden-artifacts=always``, the SQLite run store, the response cache, then a
``goldeval site`` build. Then EVERY file under the project folder (the SQLite file's raw
bytes included) and the captured stdout/stderr are searched for each secret, its Basic-auth
base64 form, its URL-encoded form and any 12-character piece of it.

A secret that straddles the 200-character cut of an error excerpt is only partly masked:
pinned by the xfail tests at the end.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from goldeval.core.errors import ProviderError
from goldeval.core.settings import ProviderSettings, provider_from_env
from goldeval.dataset.case import GoldenCase
from goldeval.providers.base import ProviderRequest
from goldeval.providers.http import OllamaProvider, OpenAIProvider
from goldeval.testing.llm_server import FakeLLMServer, Reply, fixture_responder
from tests.helpers import EVERY_WRITER

API_KEY = "sk-planted-OPENAI-7f3a9c1e5b2d4f60"
OLLAMA_USER = "planted-user"
OLLAMA_PASSWORD = "pw-planted-OLLAMA-c4e1a7b9"
URL_USER = "urluser"
URL_PASSWORD = "pw-url-planted-@9d2b:x"  # '@' and ':' force percent-encoding in the URL
URL_PASSWORD_QUOTED = quote(URL_PASSWORD, safe="")


def _basic(user: str, password: str) -> str:
    return base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


#: Every form a planted secret could take on the way out.
NEEDLES: dict[str, str] = {
    "OPENAI_API_KEY": API_KEY,
    "OLLAMA_PASSWORD": OLLAMA_PASSWORD,
    "OLLAMA Basic": _basic(OLLAMA_USER, OLLAMA_PASSWORD),
    "URL password": URL_PASSWORD,
    "URL password (encoded)": URL_PASSWORD_QUOTED,
    "URL Basic": _basic(URL_USER, URL_PASSWORD),
    "URL userinfo": f"{URL_USER}:{URL_PASSWORD_QUOTED}@",
}
PIECE = 12


def _pieces(secret: str) -> set[str]:
    """Every PIECE-character window: a truncated echo must not leave half a key behind."""
    return {secret[i : i + PIECE] for i in range(max(1, len(secret) - PIECE + 1))}


SCAN_TOTALS = {"files": 0, "bytes": 0, "outputs": 0}


def scan(root: Path | None, outputs: list[str], needles: dict[str, str] = NEEDLES) -> list[str]:
    """Places (file under ``root`` or output text) holding a secret or a piece of one."""
    found = []
    patterns = {
        name: {p.encode() for p in _pieces(s)} | {s.encode()} for name, s in needles.items()
    }
    for dirpath, _dirs, files in os.walk(root) if root is not None else ():
        for fname in files:
            path = Path(dirpath) / fname
            if path.is_symlink():
                continue
            data = path.read_bytes()
            SCAN_TOTALS["files"] += 1
            SCAN_TOTALS["bytes"] += len(data)
            for name, pats in patterns.items():
                if any(p in data for p in pats):
                    found.append(f"{name} in {path.relative_to(dirpath)}")
    for n, text in enumerate(outputs):
        SCAN_TOTALS["outputs"] += 1
        data = text.encode("utf-8", "replace")
        SCAN_TOTALS["bytes"] += len(data)
        for name, pats in patterns.items():
            if any(p in data for p in pats):
                found.append(f"{name} in captured output #{n}")
    return found


def echoing_responder(project: Path) -> Any:
    """Replays the fixtures, except that some cases and every judge call get the caller's
    Authorization header echoed back in an error."""
    replay = fixture_responder(project / "golden" / "generation")

    def respond(req: Any) -> Reply | str:
        auth = req.headers.get("authorization", "<none>")
        text = req.last_user_message or ""
        if "CANDIDATE:" in text:
            return Reply(status=500, error={"message": f"judge denied: {auth}"})
        if "Unauthorized" in text:
            return Reply(status=200, error=f"invalid credentials {auth}")
        if "401" in text and "Gradle" not in text:
            return Reply(status=500, error={"message": f"upstream rejected {auth}"})
        if "пуст" in text.lower() or "empty" in text.lower():
            return Reply(status=401, raw_body=f"Unauthorized. You sent: {auth}".encode())
        return replay(req)

    return respond


REPORTS = [*EVERY_WRITER, "--golden=generation-v1", "--golden-model=fake-llm:latest"]

CONFIGS = {
    # name: (env, args builder, xdist?)
    "openai-key-serial": (
        {"OPENAI_API_KEY": API_KEY},
        lambda url: [
            "--golden-mode=live",
            "--golden-provider=openai",
            f"--golden-base-url={url}",
            "--golden-judge",
        ],
        [],
    ),
    "ollama-env-xdist": (
        {"OLLAMA_USER": OLLAMA_USER, "OLLAMA_PASSWORD": OLLAMA_PASSWORD},
        lambda url: ["--golden-mode=live", f"--golden-base-url={url}", "--golden-judge"],
        ["-n", "2"],
    ),
    "url-userinfo-arg-record": (
        {},
        lambda url: [
            "--golden-mode=record",
            "--golden-overwrite-fixtures",
            "--golden-base-url="
            + url.replace("http://", f"http://{URL_USER}:{URL_PASSWORD_QUOTED}@"),
        ],
        [],
    ),
    "ollama-host-userinfo-xdist": (
        {"OLLAMA_HOST": "URL"},
        lambda url: ["--golden-mode=live", "--golden-judge"],
        ["-n", "2"],
    ),
}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_no_secret_anywhere_after_a_live_run(
    pytester: pytest.Pytester,
    golden_project: Path,
    monkeypatch: pytest.MonkeyPatch,
    record_property: Any,
    config: str,
) -> None:
    env, build_args, extra = CONFIGS[config]
    with FakeLLMServer() as srv:
        srv.responder = echoing_responder(golden_project)
        for name, value in env.items():
            if value == "URL":
                value = srv.base_url.replace("http://", f"http://{URL_USER}:{URL_PASSWORD_QUOTED}@")
            monkeypatch.setenv(name, value)
        result = pytester.runpytest(*REPORTS, *build_args(srv.base_url), *extra)
        requests = srv.requests
    outputs = [result.stdout.str(), result.stderr.str()]
    assert result.ret in (0, 1, 4, 75), outputs[0][-3000:]  # 4: the 401 is AUTH_FAILED
    # the credentials really were sent, and really were echoed back
    auth = {r.headers.get("authorization", "") for r in requests}
    assert auth and all(a.startswith(("Bearer ", "Basic ")) for a in auth), auth
    assert any(r for r in requests if "CANDIDATE:" in (r.last_user_message or "")) or (
        config == "url-userinfo-arg-record"
    )
    run_dir = Path((golden_project / ".goldeval" / "runs" / "LATEST").read_text().strip())
    run_text = (run_dir / "run.json").read_text(encoding="utf-8")
    assert "***" in run_text  # an echo was masked, not dropped silently
    run = json.loads(run_text)
    kinds = {a.get("errorKind") for c in run["cases"] for a in c["attempts"]}
    assert {"HTTP_ERROR", "PROVIDER_ERROR"} <= kinds, kinds  # 500, 401 text, 200 {"error"}
    site = subprocess.run(
        [
            sys.executable,
            "-m",
            "goldeval.cli.main",
            "site",
            "--out",
            "site",
            "--runs",
            str(golden_project / ".goldeval" / "runs"),
        ],
        cwd=golden_project,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert site.returncode == 0, site.stdout + site.stderr
    assert (golden_project / "site" / "index.html").is_file()
    outputs += [site.stdout, site.stderr]
    for name in ("junit.xml", "dash.xml", "report.html", "store.sqlite3"):
        assert (golden_project / name).is_file(), name
    before = dict(SCAN_TOTALS)
    leaks = scan(golden_project, outputs)
    assert leaks == []
    files = SCAN_TOTALS["files"] - before["files"]
    record_property("files_scanned", files)
    record_property("bytes_scanned", SCAN_TOTALS["bytes"] - before["bytes"])
    print(f"{config}: scanned {files} files, {SCAN_TOTALS['bytes'] - before['bytes']} bytes")


#: The team's app prints and logs the key while it answers, and one row fails quoting it.
CHATTY_APP = """
import logging, os
import pytest

def app(case):
    key = os.environ["OPENAI_API_KEY"]
    print("debug: calling the model with", key)
    logging.getLogger("app").warning("using key %s", key)
    if case.id == "api-login-wrong-password-401":
        raise RuntimeError("the model refused key " + key)
    return "I cannot help with that."

@pytest.fixture(scope="session")
def golden_provider():
    return app
"""


def test_what_an_app_prints_or_logs_is_masked_in_every_report(
    pytester: pytest.Pytester,
    golden_project: Path,
    monkeypatch: pytest.MonkeyPatch,
    plugin_args: list[str],
) -> None:
    """Captured stdout, log records and the failure text of a golden item: pytest shows
    them in the JUnit XML (``junit_logging=all``), pytest-html and the terminal (``-rA``);
    the key the app printed was in all three."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    pytester.makeconftest(CHATTY_APP)
    result = pytester.runpytest(
        *REPORTS, "--golden-mode=live", "-o", "junit_logging=all", "-rA", "-l", *plugin_args
    )
    outputs = [result.stdout.str(), result.stderr.str()]
    assert result.ret == 75, outputs[0][-3000:]  # the raising row is an ERROR attempt
    junit = (golden_project / "junit.xml").read_text(encoding="utf-8")
    assert "debug: calling the model with ***" in junit  # captured, then masked
    assert "using key ***" in junit
    assert scan(golden_project, outputs, {"key": API_KEY}) == []


# --------------------------------------------------------------------------- provider errors


def _request() -> ProviderRequest:
    case = GoldenCase(id="a", prompt="p", expect={})
    return ProviderRequest(case=case, attempt=1, system="s", user="u", model="m", retrieved=[])


def _providers(base_url: str) -> list[Any]:
    userinfo = base_url.replace("http://", f"http://{URL_USER}:{URL_PASSWORD_QUOTED}@")
    return [
        OpenAIProvider(
            ProviderSettings(
                name="openai",
                model="m",
                base_url=base_url,
                api_key=API_KEY,
                retries=1,
                backoff_base=0,
            )
        ),
        OllamaProvider(
            ProviderSettings(
                name="ollama",
                model="m",
                base_url=base_url,
                user=OLLAMA_USER,
                password=OLLAMA_PASSWORD,
                retries=0,
            )
        ),
        OllamaProvider(ProviderSettings(name="ollama", model="m", base_url=userinfo, retries=0)),
    ]


def _exception_text(exc: BaseException) -> str:
    parts = [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:  # the chain could hold httpx requests
        seen.add(id(cur))
        parts.append(repr(vars(cur)) if hasattr(cur, "__dict__") else "")
        cur = cur.__cause__ or cur.__context__
    return "\n".join(parts)


ECHOES = {
    "500-json": lambda auth: Reply(status=500, error={"message": f"denied {auth}"}),
    "401-text": lambda auth: Reply(status=401, raw_body=f"you sent {auth}".encode()),
    "200-error": lambda auth: Reply(status=200, error=f"bad credentials {auth}"),
    "200-not-json": lambda auth: Reply(status=200, raw_body=f"<html>{auth}</html>".encode()),
    "429": lambda auth: Reply(status=429, error=auth, headers={"Retry-After": "0"}),
}


def test_provider_exception_messages_never_carry_a_secret() -> None:
    texts = []
    with FakeLLMServer() as srv:
        for name, make in ECHOES.items():
            srv.responder = lambda req, make=make: make(req.headers.get("authorization", ""))
            for provider in _providers(srv.base_url):
                with pytest.raises(ProviderError) as exc:
                    provider.complete(_request())
                assert exc.value.__cause__ is None and exc.value.__context__ is None, name
                texts.append(_exception_text(exc.value))
                assert "***" in exc.value.message, (name, exc.value.message)
                texts.append(repr(provider))
                provider.close()
        url = srv.base_url
    # nothing listens any more: connection refused, with the userinfo URL
    for provider in _providers(url):
        with pytest.raises(ProviderError) as exc:
            provider.complete(_request())
        assert exc.value.kind == "MODEL_UNAVAILABLE"
        texts.append(_exception_text(exc.value))
        provider.close()
    settings = provider_from_env(
        "ollama", "m", url.replace("http://", f"http://{URL_USER}:{URL_PASSWORD_QUOTED}@")
    )
    texts += [repr(settings), str(settings.public())]
    assert scan(None, texts) == []


# --------------------------------------------------------------------------- open bug


def _straddling(pad: int) -> Any:
    return lambda req: Reply(status=500, error="x" * pad + " " + req.headers["authorization"])


def test_bug_secret_straddling_the_excerpt_cut_is_partly_shown() -> None:
    leaked = []
    with FakeLLMServer() as srv:
        for pad in range(150, 200, 3):
            srv.responder = _straddling(pad)
            provider = _providers(srv.base_url)[0]
            with pytest.raises(ProviderError) as exc:
                provider.complete(_request())
            provider.close()
            leaked += [
                f"pad {pad}: {exc.value.message[-40:]}"
                for p in _pieces(API_KEY)
                if p in exc.value.message
            ][:1]
    assert leaked == []


def test_bug_straddling_secret_reaches_the_reports(
    pytester: pytest.Pytester, golden_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    with FakeLLMServer() as srv:
        # "HTTP 500 from <url>: " precedes the excerpt; 170 puts the key across the cut
        srv.responder = _straddling(170)
        result = pytester.runpytest(
            "-p",
            "no:cacheprovider",
            "--golden=generation-v1",
            "--golden-mode=live",
            "--golden-provider=openai",
            f"--golden-base-url={srv.base_url}",
            "--golden-model=m",
            "--golden-retries=0",
            "--junitxml=junit.xml",
            "-k",
            "api-login-wrong-password-401",
        )
    assert result.ret == 75
    assert scan(golden_project, [result.stdout.str()], {"key": API_KEY}) == []


def test_httpx_request_logs_show_no_credential_of_the_base_url(
    pytester: pytest.Pytester, golden_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """httpx logs each request's URL at INFO: with ``log_level=INFO`` a base URL's
    ``?api_key=`` went to the terminal (``log_cli``), the log file, JUnit XML and the HTML
    report as it was."""
    query_key = "qk-planted-QUERYSECRET999"
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    with FakeLLMServer() as srv:
        srv.responder = fixture_responder(golden_project / "golden" / "generation")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{srv.openai_base_url}/?api_key={query_key}")
        result = pytester.runpytest(
            *REPORTS,
            "--golden-mode=live",
            "--golden-provider=openai",
            "-o",
            "log_level=INFO",
            "-o",
            "log_cli=true",
            "--log-file=pytest.log",
            "-o",
            "junit_logging=all",
        )
    outputs = [result.stdout.str(), result.stderr.str()]
    assert "HTTP Request: POST" in outputs[0] and "api_key=***" in outputs[0]
    assert "api_key=***" in (golden_project / "pytest.log").read_text(encoding="utf-8")
    assert scan(golden_project, outputs, {"query key": query_key, "key": API_KEY}) == []
