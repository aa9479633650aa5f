"""What the terminal and report.md say (issues 15 and 16), black box with pytester.

* A regression names its new failures and recovered cases (ten, then "and N more"); recovered
  cases are named under NO_REGRESSION too.
* Retries, judge PENDING / judge errors and the judge self-preference note are in the terminal
  and report.md, not only in run.json (the note used to be overwritten by the gate's notes).
* An attempt stopped by pytest-timeout is an ERROR whose message is pytest-timeout's
  ``Timeout (>Ns) ...``, not the last line of a traceback; a timeout after grading never
  leaves a PASS behind.
* Escape sequences, C1 controls, ``\\r`` overwrites and bidi overrides in answers and in
  provider errors reach no terminal line, report.md, JUnit file, HTML report or site page raw.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goldeval.reports.site import main_site
from goldeval.testing.llm_server import FakeLLMServer, Reply, fixture_responder
from tests.helpers import LIVE_NO_GATE, REPORT_WRITERS, SERIAL_ONLY, RunFiles

# --------------------------------------------------------------------------- regressions

ROWS = [f"r{n:02d}" for n in range(14)]


def _msgs_dataset(project: Path) -> Path:
    folder = project / "golden" / "msgs"
    (folder / "fixtures").mkdir(parents=True)
    (folder / "dataset.yaml").write_text(
        "version: msgs-v1\npack: none\ngate:\n  fixture:\n    allowedRegression: 0.0\n",
        encoding="utf-8",
    )
    rows = [
        json.dumps({"id": r, "prompt": f"say ok {r}", "expect": {"contains_any": ["ok"]}})
        for r in ROWS
    ]
    (folder / "rows.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


def _answers(folder: Path, bad: set[str]) -> None:
    for r in ROWS:
        (folder / "fixtures" / f"{r}.out.md").write_text(
            "bad" if r in bad else "ok", encoding="utf-8"
        )


@SERIAL_ONLY
def test_regression_names_new_failures_and_recovered_cases(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, plugin_args: list[str]
) -> None:
    folder = _msgs_dataset(golden_project)
    _answers(folder, {"r00", "r01"})
    capture = pytester.runpytest(
        "--golden=msgs-v1",
        "-p",
        "no:cacheprovider",
        "--golden-save-baseline=baselines/msgs-v1.json",
        *plugin_args,
    )
    assert capture.ret == 0, capture.stdout.str()[-2000:]

    # r00, r01 recover; the twelve others fail now
    _answers(folder, set(ROWS[2:]))
    result = pytester.runpytest("--golden=msgs-v1", "-p", "no:cacheprovider", *plugin_args)
    assert result.ret == 1, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(
        [
            "  baseline: REGRESSION vs *msgs-v1.json",
            "    new failures (12): r02, r03, r04, r05, r06, r07, r08, r09, r10, r11 and 2 more",
            "    recovered (2): r00, r01",
            "goldeval decision: exit 1*",
        ]
    )
    report = (run_files.latest_dir() / "report.md").read_text(encoding="utf-8")
    assert "### Recovered\n\nr00, r01" in report

    # everything passes again: no regression, and the recovered cases are still named
    _answers(folder, set())
    result = pytester.runpytest("--golden=msgs-v1", "-p", "no:cacheprovider", *plugin_args)
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(
        [
            "  baseline: NO_REGRESSION vs *msgs-v1.json",
            "    recovered (2): r00, r01",
        ]
    )
    result.stdout.no_fnmatch_line("*new failures*")


def test_new_failures_are_named_when_no_gate_is_applied(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    folder = _msgs_dataset(golden_project)
    _answers(folder, set())
    capture = pytester.runpytest(
        "--golden=msgs-v1",
        "-p",
        "no:cacheprovider",
        "--golden-save-baseline=baselines/msgs-v1.json",
    )
    assert capture.ret == 0
    _answers(folder, {"r05"})
    result = pytester.runpytest("--golden=msgs-v1", "-p", "no:cacheprovider", "--golden-no-gate")
    # the comparison alone decides nothing: the line says so, and names the new failure
    result.stdout.fnmatch_lines(
        [
            "  baseline: NEW_FAILURES_NOT_GATED vs *msgs-v1.json (no gate applied)",
            "    new failures (1): r05",
        ]
    )


# --------------------------------------------------------------------------- live notices

LIVE = [*LIVE_NO_GATE, "--golden-judge", "--golden-retries=1", "--golden-timeout=5"]
PENDING_CASE = "e2e-login-happy-alice"
JUDGE_ERROR_CASE = "api-login-wrong-password-401"
RETRIED_CASE = "e2e-login-empty-password"


def test_retries_judge_pending_errors_and_self_preference_are_shown(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    replay = fixture_responder(golden_project / "golden" / "generation")
    failed_once: set[str] = set()

    def responder(req):  # type: ignore[no-untyped-def]
        text = req.last_user_message or ""
        if "CANDIDATE:" in text:  # a judge call
            if f"golden.id={PENDING_CASE}\n" in text:
                return "I cannot decide on this one."
            if f"golden.id={JUDGE_ERROR_CASE}\n" in text:
                return Reply(status=500, error="judge backend down")
            return "VERDICT: ПРИНЯТО"
        reply = replay(req)
        if "пустой пароль, форма" in text and RETRIED_CASE not in failed_once:
            failed_once.add(RETRIED_CASE)
            return Reply(status=503, error="warming up")
        return reply

    with FakeLLMServer() as srv:
        srv.responder = responder
        result = pytester.runpytest(*LIVE, f"--golden-base-url={srv.base_url}")
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]
    assert failed_once, "the retried case was not found by its prompt"
    run = run_files.latest()
    attempt = next(c for c in run["cases"] if c["caseId"] == RETRIED_CASE)["attempts"][0]
    assert attempt["tries"] == 2
    expected = [
        f"retries: 1 attempt needed more than one provider try (1 retry): {RETRIED_CASE}",
        "judge: * ACCEPT, 0 REJECT, 1 PENDING, 1 error (PENDING and errors are not in "
        "judgeAcceptRate)",
        f"judge PENDING (no usable decision): {PENDING_CASE}",
        f"judge errors (judge call failed; the hard verdict stands): {JUDGE_ERROR_CASE}",
    ]
    note = "judge model fake-llm:latest is the generator model: self-preference risk"
    result.stdout.fnmatch_lines([f"  {line}" for line in expected] + [f"  note: {note}"])
    # the gate's own note does not replace it: both are kept, in run.json too
    assert note in run["notes"]
    assert any("--golden-no-gate" in n for n in run["notes"])
    report = (run_files.latest_dir() / "report.md").read_text(encoding="utf-8")
    notes = report.split("## Notes\n", 1)[1].split("\n## ", 1)[0]
    for line in [*expected, note]:
        head = line.split("*", 1)[0]
        assert head.replace("_", "\\_") in notes, (head, notes)


# --------------------------------------------------------------------------- pytest-timeout

SLOW_CASE = "api-login-wrong-password-401"
SLOW_PROVIDER = f'''
import time
from pathlib import Path
import pytest

@pytest.fixture(scope="session")
def golden_provider():
    folder = Path(__file__).parent / "golden" / "generation" / "fixtures"
    def answer(case):
        if case.id == "{SLOW_CASE}":
            time.sleep(4)
        return (folder / f"{{case.id}}.out.md").read_text(encoding="utf-8")
    return answer
'''


def test_a_pytest_timeout_is_an_error_with_the_timeout_message(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, plugin_args: list[str]
) -> None:
    pytest.importorskip("pytest_timeout")
    pytester.makeconftest(SLOW_PROVIDER)
    result = pytester.runpytest(
        "--golden=generation-v1",
        "-p",
        "no:cacheprovider",
        "--timeout=1",
        "--timeout-method=signal",
        *plugin_args,
    )
    assert result.ret == 75, result.stdout.str()[-3000:]
    run = run_files.latest()
    (attempt,) = next(c for c in run["cases"] if c["caseId"] == SLOW_CASE)["attempts"]
    assert attempt["status"] == "ERROR"
    assert attempt["errorKind"] == "TIMEOUT"
    assert attempt["errorMessage"].startswith("Timeout (>1.0s) from pytest-timeout"), attempt
    report = (run_files.latest_dir() / "report.md").read_text(encoding="utf-8")
    assert "TIMEOUT: Timeout (&gt;1.0s) from pytest-timeout" in report  # Markdown-escaped


AFTER_GRADING = f'''
import time
import pytest

def pytest_goldeval_attempt_graded(config, record):
    if record["caseId"] == "{SLOW_CASE}":
        time.sleep(4)  # pytest-timeout fires after the attempt was graded PASS
'''


def test_a_timeout_after_grading_does_not_leave_a_pass(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    pytest.importorskip("pytest_timeout")
    pytester.makeconftest(AFTER_GRADING)
    result = pytester.runpytest(
        "--golden=generation-v1", "-p", "no:cacheprovider", "--timeout=1", "--timeout-method=signal"
    )
    assert result.ret == 75, result.stdout.str()[-3000:]
    (attempt,) = next(c for c in run_files.latest()["cases"] if c["caseId"] == SLOW_CASE)[
        "attempts"
    ]
    assert (attempt["status"], attempt["errorKind"]) == ("ERROR", "TIMEOUT")
    assert attempt["errorMessage"].startswith("Timeout (>1.0s) from pytest-timeout")


# --------------------------------------------------------------------------- hostile text

HOSTILE = (
    "ok \x1b[2J \x1b]8;;http://evil\x07click\x1b]8;;\x07 \x9b31m red "
    "all good\rFAKE PASS invoice_\u202etxt.exe \x00\x08\x7f end"
)
RAW = ("\x1b", "\x07", "\x9b", "\r", "\u202e", "\x00", "\x08", "\x7f")

QUOTING_GRADER = '''
import pytest
from goldeval import ExpectKey, Grader, GraderOutcome, Violation


class Quote(Grader):
    """Fails every answer and quotes it raw in the reason, as many graders do."""

    name = "quote"
    expect_keys = (ExpectKey("quote", "bool", "fail, quoting the answer"),)

    def grade(self, ctx):
        text = ctx.answer.text or ""
        return GraderOutcome(grader=self.name, passed=False, violations=[Violation(
            case_id=ctx.case.id, category="CONTENT", severity="HIGH", grader=self.name,
            reason=f"answer was: {text}")])


@pytest.hookimpl
def pytest_goldeval_register_graders(config):
    return [Quote()]
'''

WRITERS = [
    *REPORT_WRITERS,
    "--golden-no-gate",
    "-p",
    "no:cacheprovider",
    "-o",
    "golden_junit_properties=true",
]


def _hostile_dataset(project: Path) -> None:
    folder = project / "golden" / "hostile"
    (folder / "fixtures").mkdir(parents=True)
    (folder / "dataset.yaml").write_text("version: hostile-v1\npack: none\n", encoding="utf-8")
    rows = [
        json.dumps({"id": "quoted", "prompt": "p1", "expect": {"quote": True}}),
        json.dumps({"id": "diffed", "prompt": "p2", "expect": {"equals": "hello"}}),
    ]
    (folder / "rows.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    for case_id in ("quoted", "diffed"):
        (folder / "fixtures" / f"{case_id}.out.md").write_text(
            HOSTILE, encoding="utf-8", newline=""
        )


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")  # no newline translation: a raw \r shows


def _assert_clean(where: str, text: str) -> None:
    found = [repr(ch) for ch in RAW if ch in text]
    assert not found, f"{where}: raw {found}"


def test_hostile_answers_are_escaped_in_every_view(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles, plugin_args: list[str]
) -> None:
    _hostile_dataset(golden_project)
    pytester.makeconftest(QUOTING_GRADER)
    result = pytester.runpytest("--golden=hostile-v1", *WRITERS, *plugin_args)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 1, out[-3000:]
    _assert_clean("terminal", out)
    assert "\\x1b[2J" in out and "\\u202e" in out  # shown escaped, not dropped
    run_dir = run_files.latest_dir()
    # the evidence keeps exactly what was graded; every view of it is escaped
    assert _read(run_dir / "cases" / "quoted" / "output.md") == HOSTILE
    views = {
        "report.md": run_dir / "report.md",
        "junit.xml": golden_project / "junit.xml",
        "dash.xml": golden_project / "dash.xml",
        "report.html": golden_project / "report.html",
    }
    site = golden_project / "site"
    assert main_site(["--out", str(site), "--runs", str(run_files.runs)]) == 0
    views.update({f"site/{p.relative_to(site)}": p for p in site.rglob("*.html")})
    for name, path in views.items():
        text = _read(path)
        _assert_clean(name, text)
    assert "\\x1b[2J" in (golden_project / "dash.xml").read_text(encoding="utf-8")
    assert "\\u202e" in (run_dir / "report.md").read_text(encoding="utf-8")


def test_hostile_provider_errors_are_escaped_in_the_terminal(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    with FakeLLMServer() as srv:
        srv.responder = lambda req: Reply(status=500, error=f"backend says {HOSTILE}")
        result = pytester.runpytest(
            "--golden=generation-v1",
            "--golden-mode=live",
            "--golden-model=fake-llm:latest",
            f"--golden-base-url={srv.base_url}",
            "--golden-retries=0",
            "--golden-no-gate",
            "-p",
            "no:cacheprovider",
            "-k",
            "api-login-wrong-password-401",
            *WRITERS[:5],
        )
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 75, out[-3000:]
    _assert_clean("terminal", out)
    assert "backend says ok \\x1b[2J" in out
    for path in (
        run_files.latest_dir() / "report.md",
        golden_project / "junit.xml",
        golden_project / "dash.xml",
        golden_project / "report.html",
    ):
        _assert_clean(path.name, _read(path))


def test_a_thread_method_timeout_under_xdist_is_a_worker_crash_with_a_hint(
    pytester: pytest.Pytester, golden_project: Path, run_files: RunFiles
) -> None:
    pytest.importorskip("pytest_timeout")
    pytester.makeconftest(SLOW_PROVIDER)
    result = pytester.runpytest(
        "--golden=generation-v1",
        "-p",
        "no:cacheprovider",
        "--timeout=1",
        "--timeout-method=thread",
        "-n",
        "2",
    )
    assert result.ret == 75, result.stdout.str()[-3000:]
    (attempt,) = next(c for c in run_files.latest()["cases"] if c["caseId"] == SLOW_CASE)[
        "attempts"
    ]
    assert (attempt["status"], attempt["errorKind"]) == ("ERROR", "WORKER_CRASH")
    assert "crashed while running" in attempt["errorMessage"]
    assert "pytest-timeout's thread method" in attempt["errorMessage"]
    assert "over 1.0s" in attempt["errorMessage"]


def test_a_collection_error_quoting_a_hostile_row_is_escaped(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    folder = golden_project / "golden" / "keys"
    (folder / "fixtures").mkdir(parents=True)
    (folder / "dataset.yaml").write_text("version: keys-v1\npack: none\n", encoding="utf-8")
    row = {"id": "a", "prompt": "p", "expect": {"\x1b[2Jx\u202e\x9b": 1}}
    (folder / "rows.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    (folder / "fixtures" / "a.out.md").write_text("ok", encoding="utf-8")
    result = pytester.runpytest("--golden=keys-v1", "-p", "no:cacheprovider")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED, out[-2000:]
    _assert_clean("terminal", out)
    assert "rows.jsonl:1: expect.\\x1b[2Jx\\u202e\\x9b: unknown expect key" in out
