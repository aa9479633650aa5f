"""Every path the session writes is checked before the run (pytest_plugin/write_targets.py).

Found by a probe: a ``--golden-junit`` that is a link, a folder or under a file ended in a
traceback after the run (exit 1, LAST_SESSION saying 0); a store URL of another scheme, a
runs folder that is a file or a cache folder that is a file were found after every model
call ("retry it", exit 75); a link inside the project (``baselines/sub``, ``.goldeval``) moved
the baseline and the runs out of the project. Each is now a usage error (exit 4) naming the
option, before anything runs, and nothing is written outside.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from goldeval.results.write_targets import write_target_problem
from tests.helpers import make_bot_dataset

USAGE = 4
GATE = "    thresholds:\n      overallPassRate: 0.5\n"


@pytest.fixture
def project(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory) -> Path:
    make_bot_dataset(pytester.path, GATE)
    (pytester.path / "afile").write_text("not a folder\n", encoding="utf-8")
    (pytester.path / "baselines").mkdir()
    return pytester.path


def _outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("outside")


CASES = {
    "junit is a folder": (["--golden-junit=golden"], "--golden-junit", "is a folder"),
    "junit under a file": (["--golden-junit=afile/x.xml"], "--golden-junit", "is a file"),
    "junitxml under a file": (["--junitxml=afile/j.xml"], "--junitxml", "is a file"),
    "runs folder is a file": (["--golden-out=afile"], "--golden-out", "is a file"),
    "cache folder is a file": (["--golden-cache=afile"], "--golden-cache", "is a file"),
    "store of another scheme": (
        ["--golden-store=mysql://u:pw-Planted-4711@127.0.0.1/db"],
        "--golden-store",
        "unsupported store URL scheme 'mysql'",
    ),
    "store in libpq keyword form": (
        ["--golden-store=host=127.0.0.1 port=1 dbname=x user=u password=kvSecret12345"],
        "--golden-store",
        "keyword form",
    ),
    "baseline under a file": (
        ["--golden-save-baseline=afile/b.json"],
        "--golden-save-baseline",
        "is a file",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_path_no_retry_fixes_is_refused_before_the_run(
    pytester: pytest.Pytester, project: Path, case: str
) -> None:
    options, option, problem = CASES[case]
    result = pytester.runpytest("--golden=bot-v1", *options)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == USAGE, out[-2000:]
    assert option in out and problem in out, out[-2000:]
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert "pw-Planted-4711" not in out and "kvSecret12345" not in out
    assert not (project / ".goldeval" / "runs" / "LATEST").exists()  # no run was made
    assert not list(project.glob("host=*"))  # no SQLite file named after a DSN


@pytest.mark.parametrize(
    ("link", "options", "option"),
    [
        (
            "baselines/sub",
            ["--golden-save-baseline=baselines/sub/b.json"],
            "--golden-save-baseline",
        ),
        (".goldeval", [], "--golden-out"),
        ("dash", ["--golden-junit=dash/d.xml"], "--golden-junit"),
    ],
)
def test_nothing_is_written_out_of_the_project_through_a_link(
    pytester: pytest.Pytester,
    project: Path,
    tmp_path_factory: pytest.TempPathFactory,
    link: str,
    options: list[str],
    option: str,
) -> None:
    outside = _outside(tmp_path_factory)
    (project / link).symlink_to(outside, target_is_directory=True)
    result = pytester.runpytest("--golden=bot-v1", *options)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == USAGE, out[-2000:]
    assert option in out and "is a symbolic link" in out, out[-2000:]
    assert list(outside.iterdir()) == []


def test_a_linked_store_file_is_refused(
    pytester: pytest.Pytester, project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = _outside(tmp_path_factory)
    (project / ".goldeval").mkdir()
    (project / ".goldeval" / "goldeval.sqlite3").symlink_to(outside / "store.sqlite3")
    result = pytester.runpytest("--golden=bot-v1")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == USAGE, out[-2000:]
    assert "the run store" in out and "symbolic link" in out
    assert list(outside.iterdir()) == []


def test_a_good_session_still_writes_every_report(pytester: pytest.Pytester, project: Path) -> None:
    result = pytester.runpytest(
        "--golden=bot-v1",
        "--golden-junit=reports/dash.xml",
        "--junitxml=reports/j.xml",
        "--golden-save-baseline=baselines/new/b.json",
        "--golden-cache=cache",
    )
    assert result.ret == 0, result.stdout.str()[-2000:]
    for path in ("reports/dash.xml", "reports/j.xml", "baselines/new/b.json"):
        assert (project / path).is_file(), path


def test_the_check_itself(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "sub").mkdir(parents=True)
    (project / "f").write_text("x", encoding="utf-8")
    assert write_target_problem(project / "new" / "a.json", project=project, kind="file") is None
    assert write_target_problem(project / "sub", project=project, kind="folder") is None
    assert "is a folder" in str(write_target_problem(project / "sub", project=project, kind="file"))
    assert "is a file" in str(
        write_target_problem(project / "f" / "x", project=project, kind="file")
    )
    (project / "out").symlink_to(tmp_path, target_is_directory=True)
    found = write_target_problem(project / "out" / "x" / "y.json", project=project, kind="file")
    assert found is not None and "out is a symbolic link" in found
    # outside the project, the user's choice: links on the way are theirs
    assert (
        write_target_problem(tmp_path / "p" / "sub", project=project / "sub", kind="folder") is None
    )


def test_a_linked_last_session_is_said_not_silent(
    pytester: pytest.Pytester, project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """LAST_SESSION as a link was left as it was with nothing said (a probe): `goldeval gate`
    with no run then took LATEST for this session."""
    assert pytester.runpytest("-p", "no:cacheprovider", "--golden=bot-v1").ret == 0
    last = project / ".goldeval/runs/LAST_SESSION"
    outside = _outside(tmp_path_factory) / "last"
    last.unlink()
    last.symlink_to(outside)
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=bot-v1")
    assert "LAST_SESSION was not written" in result.stderr.str() + result.stdout.str()
    assert not outside.exists()


@pytest.mark.parametrize(
    "spell",
    [
        lambda root: f"--golden-save-baseline=/{root}/lnk/b.json",  # //tmp/...: POSIX keeps it
        lambda root: f"--golden-junit={root.parent / (root.name + '-alias')}/lnk/d.xml",
        lambda root: "--golden-store=sqlite:///lnk/s.db",
        lambda root: f"--golden-store=sqlite:///{root}/lnk/s.db",
        lambda root: "--junitxml=$LINKED_FOLDER/j.xml",
    ],
    ids=["double-slash", "project-alias", "sqlite-relative", "sqlite-absolute", "env-var"],
)
def test_other_spellings_of_a_path_through_a_link_are_refused(
    pytester: pytest.Pytester,
    project: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    spell: object,
) -> None:
    """A re-probe: ``//`` paths, a link to the project, ``sqlite:///`` store URLs and $VARS
    in --junitxml went around the link check and wrote outside the project."""
    outside = _outside(tmp_path_factory)
    (project / "lnk").symlink_to(outside, target_is_directory=True)
    (project.parent / (project.name + "-alias")).symlink_to(project, target_is_directory=True)
    monkeypatch.setenv("LINKED_FOLDER", "lnk")
    option = spell(project)  # type: ignore[operator]
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=bot-v1", option)
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == USAGE, out[-2000:]
    assert "is a symbolic link" in out
    assert list(outside.iterdir()) == []
