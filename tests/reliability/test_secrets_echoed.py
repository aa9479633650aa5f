"""A credential echoed in a normal 200 answer reaches no file, report or fixture (issue 32).

The real local server answers with the caller's ``Authorization`` header (the API key, or the
``Basic`` token of user:password) in the answer text, in tool-call arguments (a value, a key,
nested in a list) and in the judge's reasons. A live run with every writer on (run folder,
``--golden-artifacts=always``, report.md, JUnit twice, the pytest-html report, the SQLite run
store, the response cache), serial and under xdist, must leave the key in no file of the
project and in neither stdout nor stderr: the answers are masked (``***``) before anything
grades, stores, reports or records them. Record mode with ``--golden-overwrite-fixtures``
refuses a row whose answer echoed a key: ERROR ``SECRET_IN_ANSWER``, exit 4, the row named,
nothing written for that row (not even a clean answer of another attempt).
"""

from __future__ import annotations

import base64
import json
import os
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from goldeval.core.errors import SECRET_IN_ANSWER
from goldeval.testing.llm_server import FakeLLMServer, RecordedRequest, Reply
from tests.helpers import EVERY_WRITER, RunFiles

KEY = "sk-echo-PLANTED-3b9f1c7e5a2d4086e1"
#: A key with the characters URL and JSON writers quote (`sk-a/b%2Bc%3D...` passed whole).
SLASH_KEY = "sk-echo/PLANTED+3b9f=1c7e5a2d4086e1"
JUDGE_KEY = "sk-judge-PLANTED-77c1d9e0a4b8f2"
OLLAMA_USER, OLLAMA_PASSWORD = "echo-user", "pw-echo-PLANTED-8c2d7e1f"
BASIC = base64.b64encode(f"{OLLAMA_USER}:{OLLAMA_PASSWORD}".encode()).decode("ascii")
PIECE = 12

ROWS = [
    {"id": "content", "prompt": "Which header did I send?", "expect": {"contains_any": ["header"]}},
    {
        "id": "tool",
        "prompt": "Call the API for me",
        "expect": {"tool_calls": [{"name": "call_api"}]},
    },
    {"id": "clean", "prompt": "Say hello", "expect": {"contains_any": ["hello"]}},
]


def _token(auth: str) -> str:
    """The credential of an Authorization header (what a careless app would print)."""
    return auth.split(" ", 1)[-1]


def echo(request: RecordedRequest) -> Reply:
    """Echo the caller's credentials the ways a model or an app could."""
    auth = request.headers.get("authorization", "<none>")
    text = request.last_user_message or ""
    if "CANDIDATE:" in text:  # the judge: its reasons quote its own key
        return Reply(
            json.dumps(
                {"decision": "ACCEPT", "score": 0.9, "reasons": [f"the request carried {auth}"]}
            )
        )
    if text == "Which header did I send?":
        token = _token(auth)
        # as a URL writer or a JSON writer quotes it: `/` kept or not, `+` for spaces, `\/`
        escaped = token.replace("/", "\\/")
        return Reply(
            f"The header was Authorization: {auth} (token {token}; in a link {quote(token)}, "
            f"{quote_plus(token)}; in JSON {escaped}, "
            f"{token.replace('+', chr(92) + 'u002B')}; in HTML {token.replace('+', '&#43;')})."
        )
    if text == "Call the API for me":
        return Reply(
            "Calling.",
            tool_calls=[
                {
                    "name": "call_api",
                    "arguments": {
                        "headers": {"Authorization": auth},
                        "tokens": [_token(auth), {"again": f"x{_token(auth)}y"}],
                        _token(auth): "the key as an argument name",
                    },
                }
            ],
        )
    return Reply("hello there")


@pytest.fixture
def echo_project(pytester: pytest.Pytester) -> Path:
    ds = pytester.path / "golden" / "echo"
    (ds / "fixtures").mkdir(parents=True)
    (ds / "dataset.yaml").write_text("version: echo-v1\nname: echo\npack: none\n", encoding="utf-8")
    (ds / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    pytester.makeini("[pytest]\n")
    return pytester.path


def _pieces(secret: str) -> set[str]:
    return {secret[i : i + PIECE] for i in range(len(secret) - PIECE + 1)}


def leaks(root: Path, outputs: list[str], secrets: list[str]) -> list[str]:
    """Files under ``root`` (raw bytes, the SQLite file included) and outputs that hold a
    secret or any PIECE-character piece of one."""
    needles = {p.encode() for s in secrets for p in _pieces(s)}
    found = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if not path.is_symlink() and any(n in path.read_bytes() for n in needles):
                found.append(str(path.relative_to(root)))
    found += [
        f"output #{i}"
        for i, text in enumerate(outputs)
        if any(n in text.encode("utf-8", "replace") for n in needles)
    ]
    return found


WRITERS = [*EVERY_WRITER, "--golden=echo-v1", "--golden-model=fake-llm:latest"]

CONFIGS: dict[str, tuple[dict[str, str], list[str], list[str]]] = {
    # name: (environment, options, the secrets the server sees and echoes)
    "openai-key-judge-serial": (
        {"OPENAI_API_KEY": KEY, "GOLDEVAL_JUDGE_API_KEY": JUDGE_KEY},
        ["--golden-provider=openai", "--golden-judge"],
        [KEY, JUDGE_KEY],
    ),
    "openai-slash-key-serial": (
        {"OPENAI_API_KEY": SLASH_KEY},
        ["--golden-provider=openai"],
        [SLASH_KEY],
    ),
    "ollama-basic-xdist": (
        {"OLLAMA_USER": OLLAMA_USER, "OLLAMA_PASSWORD": OLLAMA_PASSWORD},
        ["-n", "2"],
        [OLLAMA_PASSWORD, BASIC],
    ),
}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_an_echoed_key_reaches_no_file_and_no_output(
    pytester: pytest.Pytester, echo_project: Path, monkeypatch: pytest.MonkeyPatch, config: str
) -> None:
    env, options, secrets = CONFIGS[config]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with FakeLLMServer() as srv:
        srv.responder = echo
        result = pytester.runpytest(
            "--golden-mode=live", f"--golden-base-url={srv.base_url}", *WRITERS, *options
        )
        sent = {r.headers.get("authorization", "") for r in srv.requests}
    outputs = [result.stdout.str(), result.stderr.str()]
    assert result.ret in (0, 1), outputs[0][-3000:]
    # the credentials really were sent (and so echoed back by `echo`)
    assert {_token(a) for a in sent} >= {s for s in secrets if s != OLLAMA_PASSWORD} and sent
    for name in ("junit.xml", "dash.xml", "report.html", "store.sqlite3", "cache"):
        assert (echo_project / name).exists(), name
    assert leaks(echo_project, outputs, secrets) == []
    # masked, not dropped: the answer is kept with *** where the credential was
    files = RunFiles(echo_project)
    cases = files.latest_dir() / "cases"
    shown = (cases / "content" / "output.md").read_text(encoding="utf-8")
    assert "The header was Authorization: " in shown and "***" in shown
    run = files.latest()
    statuses = {c["caseId"]: c["status"] for c in run["cases"]}
    assert statuses == {"content": "PASS", "tool": "PASS", "clean": "PASS"}
    if "--golden-judge" in options:
        judged = json.loads((cases / "content" / "result.json").read_text(encoding="utf-8"))
        text = json.dumps(judged)
        assert "the request carried Bearer ***" in text, text[:2000]


def _record(pytester: pytest.Pytester, srv: FakeLLMServer, *extra: str) -> Any:
    return pytester.runpytest(
        "--golden=echo-v1",
        "--golden-mode=record",
        "--golden-overwrite-fixtures",
        "--golden-provider=openai",
        "--golden-model=fake",
        f"--golden-base-url={srv.base_url}",
        "--golden-retries=0",
        "--golden-no-gate",
        "-p",
        "no:cacheprovider",
        "--golden-cache=cache",
        *extra,
    )


def test_record_mode_refuses_a_row_whose_answer_echoed_a_key(
    pytester: pytest.Pytester, echo_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    fixtures = echo_project / "golden" / "echo" / "fixtures"
    (fixtures / "content.out.md").write_text("the committed answer, header\n", encoding="utf-8")
    with FakeLLMServer() as srv:
        srv.responder = echo
        result = _record(pytester, srv)
        out = result.stdout.str()
        assert result.ret == 4, out[-3000:]
        assert leaks(echo_project, [out, result.stderr.str()], [KEY]) == []
        for row in ("content", "tool"):
            assert f"golden case {row} attempt 1: ERROR {SECRET_IN_ANSWER}" in out
            assert f"the answer for row {row} (line" in out
        # nothing written for the refused rows: the committed fixture stays as it was
        assert (fixtures / "content.out.md").read_text() == "the committed answer, header\n"
        assert not (fixtures / "tool.out.md").exists()
        assert not (fixtures / "tool.out.json").exists()
        assert (fixtures / "clean.out.md").read_text() == "hello there"
        run = RunFiles(echo_project).latest()
        kinds = {c["caseId"]: [a.get("errorKind") for a in c["attempts"]] for c in run["cases"]}
        assert kinds == {"content": [SECRET_IN_ANSWER], "tool": [SECRET_IN_ANSWER], "clean": [None]}
        # the answer was not cached either: a rerun asks the model again and refuses again
        calls = srv.request_count
        again = _record(pytester, srv)
        assert again.ret == 4
        assert srv.request_count == calls + 2  # content and tool; clean came from the cache
    assert leaks(echo_project, [again.stdout.str(), again.stderr.str()], [KEY]) == []


def test_record_mode_writes_nothing_for_a_row_that_echoed_a_key_in_one_attempt(
    pytester: pytest.Pytester, echo_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    lock, seen = threading.Lock(), set()

    def echo_once(request: RecordedRequest) -> Reply:
        """The first call of each prompt echoes the key; the later ones are clean."""
        with lock:
            first = request.last_user_message not in seen
            seen.add(request.last_user_message)
        return echo(request) if first else Reply("a clean header answer")

    with FakeLLMServer() as srv:
        srv.responder = echo_once
        result = _record(pytester, srv, "--golden-attempts=2", "-k", "content")
    assert result.ret == 4, result.stdout.str()[-3000:]
    assert not (echo_project / "golden" / "echo" / "fixtures" / "content.out.md").exists()
    run = RunFiles(echo_project).latest()
    attempts = run["cases"][0]["attempts"]
    assert sorted(str(a.get("errorKind")) for a in attempts) == ["None", SECRET_IN_ANSWER]


def test_an_app_under_test_that_echoes_a_key_in_fixture_mode_is_masked(
    pytester: pytest.Pytester, echo_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conftest ``golden_provider`` calls the app in any mode, fixture mode included: its
    answers are screened there too (only replayed fixtures are not)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for row in ROWS:  # fixture mode checks that every selected row has one
        (echo_project / "golden" / "echo" / "fixtures" / f"{row['id']}.out.md").write_text("x")
    pytester.makeconftest(
        """
        import os
        import pytest
        from goldeval.providers.base import Answer, ToolCall

        @pytest.fixture(scope="session")
        def golden_provider():
            def app(case):
                key = os.environ["OPENAI_API_KEY"]
                return Answer(f"header: my key is {key}",
                              tool_calls=[ToolCall("call_api", {"auth": key})])
            return app
        """
    )
    result = pytester.runpytest(
        "--golden=echo-v1",
        "--golden-no-gate",
        "-p",
        "no:cacheprovider",
        "--golden-artifacts=always",
        "--junitxml=junit.xml",
        "-v",
    )
    outputs = [result.stdout.str(), result.stderr.str()]
    assert result.ret in (0, 1), outputs[0][-3000:]
    assert leaks(echo_project, outputs, [KEY]) == []
    shown = (RunFiles(echo_project).latest_dir() / "cases" / "content" / "output.md").read_text()
    assert shown == "header: my key is ***"


@pytest.mark.parametrize("plugin_args", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_warning_the_app_raises_with_a_key_is_masked(
    pytester: pytest.Pytester,
    echo_project: Path,
    monkeypatch: pytest.MonkeyPatch,
    plugin_args: list[str],
) -> None:
    """pytest's warnings summary printed an app's ``warnings.warn(f"... {key}")`` as it was
    (the app's captured output and exception text were already masked)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for row in ROWS:
        (echo_project / "golden" / "echo" / "fixtures" / f"{row['id']}.out.md").write_text("x")
    pytester.makeconftest(
        """
        import os
        import warnings
        import pytest

        class KeyWarning(UserWarning):
            def __str__(self):
                return "own text " + os.environ["OPENAI_API_KEY"]

        @pytest.fixture(scope="session")
        def golden_provider():
            def app(case):
                key = os.environ["OPENAI_API_KEY"]
                warnings.warn(f"deprecated key {key}")
                warnings.warn(KeyWarning())
                return "fine"
            return app
        """
    )
    result = pytester.runpytest(
        "--golden=echo-v1",
        "--golden-no-gate",
        "-p",
        "no:cacheprovider",
        "-W",
        "always::UserWarning",  # shown in the summary, not raised (the project says error)
        *plugin_args,
    )
    outputs = [result.stdout.str(), result.stderr.str()]
    assert result.ret in (0, 1), outputs[0][-3000:]  # graded (the rows expect more)
    assert "deprecated key ***" in outputs[0], outputs[0][-3000:]
    assert "own text ***" in outputs[0]
    assert leaks(echo_project, outputs, [KEY]) == []


def test_a_key_cut_by_pytest_s_assertion_message_is_masked(
    pytester: pytest.Pytester, echo_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest shortens a long value in an assertion message with ``...``: a project test in
    the golden session comparing a token that starts with the key showed 12 of its 19
    characters in the terminal and junit.xml (the full-length line below was masked)."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for row in ROWS:
        (echo_project / "golden" / "echo" / "fixtures" / f"{row['id']}.out.md").write_text("x")
    pytester.makepyfile(
        test_app="""
        import os

        def test_token():
            token = os.environ["OPENAI_API_KEY"] + "b" * 300
            assert token == "expected"
        """
    )
    result = pytester.runpytest(
        "test_app.py", "golden", "--golden=echo-v1", "--golden-no-gate", "-p",
        "no:cacheprovider", "--junitxml=junit.xml",
    )  # fmt: skip
    outputs = [result.stdout.str(), result.stderr.str()]
    assert "AssertionError" in outputs[0] and "..." in outputs[0], outputs[0][-3000:]
    assert KEY[:10] not in outputs[0]
    assert KEY[:10] not in (echo_project / "junit.xml").read_text(encoding="utf-8")
    assert leaks(echo_project, outputs, [KEY]) == []


@pytest.mark.parametrize("pad", [476, 5])
@pytest.mark.parametrize("how", ["raise", "skip"])
def test_a_key_cut_by_a_bare_slice_of_a_message_is_masked(
    pytester: pytest.Pytester,
    echo_project: Path,
    monkeypatch: pytest.MonkeyPatch,
    how: str,
    pad: int,
) -> None:
    """A re-probe: a setup error's or a skip's message was cut at 500 characters with no
    mark, inside the key: 10 of its 19 characters went to run.json, report.md, the case files
    and the store. Every such cut ends in ``…`` now, which the masker reads."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    for row in ROWS:
        (echo_project / "golden" / "echo" / "fixtures" / f"{row['id']}.out.md").write_text("x")
    call = "raise RuntimeError" if how == "raise" else "pytest.skip"
    pytester.makeconftest(
        f"""
        import os
        import pytest

        @pytest.fixture(autouse=True)
        def breaks():
            {call}("x" * {pad} + os.environ["OPENAI_API_KEY"] + " tail")
        """
    )
    result = pytester.runpytest(
        "--golden=echo-v1", "--golden-no-gate", "-p", "no:cacheprovider",
        "--golden-artifacts=always", "--junitxml=junit.xml",
    )  # fmt: skip
    outputs = [result.stdout.str(), result.stderr.str()]
    fragment = KEY[:8]
    seen = [
        p for p in echo_project.rglob("*") if p.is_file() and fragment.encode() in p.read_bytes()
    ]
    assert seen == [], seen
    assert all(fragment not in o for o in outputs)
