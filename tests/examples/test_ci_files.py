"""The CI examples parse, have the documented jobs, and use only options that exist."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ROOT

CI = ROOT / "examples" / "ci"
SEPARATORS = {";", "&&", "||", "|", ">", ">>", "2>&1", "then", "do", "fi", "done"}
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def load(name: str) -> dict[Any, Any]:
    data = yaml.safe_load((CI / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _lines(script: Any) -> list[str]:
    if script is None:
        return []
    if isinstance(script, list):
        return [line for item in script for line in _lines(item)]
    text = str(script).replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip()]


def github_scripts() -> dict[str, list[str]]:
    jobs = load("github-actions.yml")["jobs"]
    return {
        name: [line for step in job["steps"] for line in _lines(step.get("run"))]
        for name, job in jobs.items()
    }


def gitlab_scripts() -> dict[str, list[str]]:
    data = load("gitlab-ci.yml")
    default = data.get("default", {})
    scripts = {}
    for name, job in data.items():
        if not isinstance(job, dict) or "script" not in job:
            continue
        before = job.get("before_script", default.get("before_script"))
        scripts[name] = _lines(before) + _lines(job["script"]) + _lines(job.get("after_script"))
    return scripts


def invocations(lines: list[str], program: str) -> list[list[str]]:
    """Argument lists of every ``program`` call in the lines (up to a shell separator)."""
    found = []
    for line in lines:
        try:
            words = shlex.split(line.replace(";", " ; "), comments=True)
        except ValueError:  # an unbalanced quote in a multi-line construct: split naively
            words = line.split()
        for i, word in enumerate(words):
            if word == program:
                args = []
                for w in words[i + 1 :]:
                    if w in SEPARATORS:
                        break
                    args.append(w)
                found.append(args)
    return found


def _help(*argv: str) -> str:
    proc = subprocess.run(
        argv, cwd=ROOT / "examples" / "quickstart", capture_output=True, text=True, check=True
    )
    return proc.stdout


@pytest.fixture(scope="module")
def pytest_options() -> set[str]:
    text = _help(sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider")
    return set(OPTION.findall(text))


def goldeval_options(command: str) -> set[str]:
    exe = str(Path(sys.executable).with_name("goldeval"))
    return set(OPTION.findall(_help(exe, command, "--help")))


def _unknown(args: list[str], known: set[str]) -> list[str]:
    return [
        a.split("=", 1)[0] for a in args if a.startswith("-") and a.split("=", 1)[0] not in known
    ]


@pytest.mark.parametrize("scripts", [github_scripts, gitlab_scripts], ids=["github", "gitlab"])
def test_every_option_exists(scripts: Any, pytest_options: set[str]) -> None:
    bad = []
    calls = 0
    for job, lines in scripts().items():
        for args in invocations(lines, "pytest"):
            calls += 1
            bad += [f"{job}: pytest {o}" for o in _unknown(args, pytest_options)]
        for args in invocations(lines, "goldeval"):
            calls += 1
            assert args, f"{job}: goldeval without a command"
            bad += [
                f"{job}: goldeval {args[0]} {o}"
                for o in _unknown(args[1:], goldeval_options(args[0]))
            ]
    assert calls >= 6
    assert not bad, f"options that do not exist: {bad}"


def _pytest_calls(lines: list[str]) -> list[str]:
    return [" ".join(args) for args in invocations(lines, "pytest")]


def _check_jobs(pr: list[str], main: list[str], nightly: list[str]) -> None:
    pr_calls, main_calls = _pytest_calls(pr), _pytest_calls(main)
    nightly_calls = _pytest_calls(nightly)
    # PR: fixtures, red rows left out, gated (no --golden-no-gate), reports for people and CI.
    assert any(
        "--golden=generation-v1" in c
        and "-m not red" in c
        and "--junitxml=" in c
        and "--html=" in c
        and "--golden-mode" not in c
        and "--golden-no-gate" not in c
        for c in pr_calls
    ), pr_calls
    # main: the same dataset with every row, plus the holdout.
    assert any("--golden=generation-v1" in c and "not red" not in c for c in main_calls)
    assert any("--golden=holdout-v1" in c for c in main_calls)
    # nightly: live, 5 attempts, red included, one run key, gated afterwards by goldeval gate.
    live = [c for c in nightly_calls if "--golden-mode=live" in c]
    assert live and all(
        "--golden-attempts=5" in c
        and "--golden-run-key=" in c
        and "--golden-rerun-errors" in c
        and "not red" not in c
        for c in live
    )
    gates = [" ".join(a) for a in invocations(nightly, "goldeval") if a[:1] == ["gate"]]
    assert gates and all("--run-key" in g for g in gates)
    assert nightly.index(next(ln for ln in nightly if "goldeval gate" in ln)) > nightly.index(
        next(ln for ln in nightly if "--golden-mode=live" in ln)
    )


def test_github_actions_jobs() -> None:
    data = load("github-actions.yml")
    triggers = data.get("on") or data.get(True) or {}
    assert {"pull_request", "push", "schedule"} <= set(triggers)
    scripts = github_scripts()
    assert {"pr", "main", "nightly"} <= set(scripts)
    _check_jobs(scripts["pr"], scripts["main"], scripts["nightly"])
    nightly = "\n".join(scripts["nightly"])
    # GitHub has no retry on an exit code: a loop retries while the run exits 75.
    assert re.search(r"for try in .*; do", nightly) and '"$rc" -ne 75' in nightly
    assert "$GITHUB_STEP_SUMMARY" in "\n".join(scripts["pr"])
    assert "report.md" in "\n".join(scripts["pr"])
    uploads = [
        s
        for s in data["jobs"]["pr"]["steps"]
        if str(s.get("uses", "")).startswith("actions/upload-artifact")
    ]
    assert uploads and uploads[0].get("if") == "always()"
    paths = uploads[0]["with"]["path"]
    assert "junit.xml" in paths and "report.html" in paths


def test_gitlab_jobs() -> None:
    data = load("gitlab-ci.yml")
    scripts = gitlab_scripts()
    assert {"golden:pr", "golden:main", "golden:nightly"} <= set(scripts)
    _check_jobs(scripts["golden:pr"], scripts["golden:main"], scripts["golden:nightly"])
    retry = data["golden:nightly"]["retry"]
    assert retry["when"] == ["script_failure"] and retry["exit_codes"] == [75]
    assert data["golden:pr"]["artifacts"]["when"] == "always"
    assert data["golden:pr"]["artifacts"]["reports"]["junit"]
    assert "report.html" in data["golden:pr"]["artifacts"]["paths"]


def test_invocations_parser() -> None:
    lines = [
        'pytest --golden=x -m "not red" --junitxml=j.xml || rc=$?',
        "for i in 1 2; do pytest --golden=y; done",
        "goldeval gate --run-key k",
    ]
    assert invocations(lines, "pytest") == [
        ["--golden=x", "-m", "not red", "--junitxml=j.xml"],
        ["--golden=y"],
    ]
    assert invocations(lines, "goldeval") == [["gate", "--run-key", "k"]]
