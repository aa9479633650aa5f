"""Faults at the end of a run (issue 16): a full disk, a store failing at the end, a folder or a
symlink where LATEST / history.jsonl belong, file modes.

The principle every test checks: a run either ends with a complete, verified record and the
right exit code, or it is marked FAILED everywhere (run folder, store, LATEST, history) with
exit 75 (4 for a link goldeval refuses to write through) and one line saying why: no
traceback, no temp file, LATEST not moved, nothing written through a link.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from goldeval.results import run_folder as artifacts
from goldeval.results.evidence import MANIFEST, verify_run_dir, write_manifest
from goldeval.store import open_store

BASE = ["--golden=generation-v1", "-p", "no:cacheprovider"]
CASES = 10


# --------------------------------------------------------------------------- helpers


def _store(project: Path) -> Path:
    return project / ".goldeval" / "goldeval.sqlite3"


def _newest_run(project: Path) -> tuple[str, str]:
    with open_store(str(_store(project))) as store:
        row = store.runs(limit=1)[0]
        return row.run_id, row.status


def _temp_files(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.name.endswith(".tmp")]


def _history(out: Path) -> list[dict]:
    path = out / "history.jsonl"
    if not path.is_file() or path.is_symlink():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _latest(out: Path) -> str | None:
    path = out / "LATEST"
    return path.read_text(encoding="utf-8") if path.is_file() and not path.is_symlink() else None


def assert_failed_everywhere(
    project: Path, out: Path, output: str, ret: int, latest_before: str | None, code: int = 75
) -> str:
    """The failed run is marked FAILED in the store, the folder and the history; LATEST is
    where it was; no temp file; one error line and no traceback. Returns the run id."""
    assert ret == code, output
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    errors = [ln for ln in output.splitlines() if ln.startswith("goldeval: error: ")]
    assert len(errors) == 1 and "could not finish the run" in errors[0], output
    assert "goldeval decision: exit 0" not in output
    run_id, status = _newest_run(project)
    assert status == "FAILED"
    assert _temp_files(out) == []
    assert _latest(out) == latest_before
    run_dir = out / run_id
    if run_dir.exists():
        assert verify_run_dir(run_dir) != []  # never a folder that verifies
        assert not (run_dir / MANIFEST).exists()
        for name in ("run.json", "summary.json"):
            if (run_dir / name).is_file():
                doc = json.loads((run_dir / name).read_text(encoding="utf-8"))
                assert doc["status"] == "FAILED" and doc["exitDecision"]["code"] == code
    ours = [h for h in _history(out) if h.get("runId") == run_id]
    assert all(h["status"] == "FAILED" and h["exitCode"] == code for h in ours), ours
    return run_id


def assert_complete(project: Path, out: Path, output: str, ret: int) -> str:
    assert ret == 0, output
    run_id, status = _newest_run(project)
    assert status == "COMPLETED"
    assert verify_run_dir(out / run_id) == []
    assert _latest(out) == str((out / run_id).resolve()) + "\n"
    assert [h["status"] for h in _history(out) if h["runId"] == run_id] == ["COMPLETED"]
    assert _temp_files(out) == []
    return run_id


# --------------------------------------------------------------------------- 1. disk full


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MB tmpfs (we run as root in CI); skipped where mounting is not allowed (the
    RLIMIT_FSIZE test below covers the same path everywhere)."""
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace')}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(disk: Path, leave_kb: int) -> None:
    st = os.statvfs(disk)
    avail = st.f_bavail * st.f_frsize
    with open(disk / "filler", "wb") as fh:
        fh.write(b"\0" * max(0, avail - leave_kb * 1024))


@pytest.mark.parametrize("leave_kb", [0, 80, 136, 600])
def test_disk_full_while_finalising(
    pytester: pytest.Pytester, golden_project: Path, small_disk: Path, leave_kb: int
) -> None:
    """0 KB: not even the folder; 80 KB: fails in the per-case files; 136 KB: fails writing
    run.json (summary.json and comparison.json already written); 600 KB: room enough."""
    out = small_disk / "runs"
    args = [*BASE, f"--golden-out={out}", "--golden-artifacts=always"]
    first = pytester.runpytest(*args)
    assert_complete(golden_project, out, first.stdout.str(), first.ret)
    latest_before = _latest(out)
    _fill(small_disk, leave_kb)
    result = pytester.runpytest(*args)
    output = result.stdout.str() + result.stderr.str()
    if leave_kb == 600:
        assert_complete(golden_project, out, output, result.ret)
        return
    assert_failed_everywhere(golden_project, out, output, result.ret, latest_before)
    assert "No space left on device" in output


def test_file_size_limit_while_finalising(golden_project: Path) -> None:
    """Runs everywhere (no mount needed): RLIMIT_FSIZE makes run.json's write fail with EFBIG
    (Python ignores SIGXFSZ), the same path as a full disk."""
    out = golden_project / "out"
    code = (
        "import resource, sys, pytest\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))\n"
        "sys.exit(pytest.main(sys.argv[1:]))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    done = subprocess.run(
        [sys.executable, "-c", code, *BASE, f"--golden-out={out}", "--golden-store=none"],
        cwd=golden_project,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 75, output
    assert "Traceback" not in output and "File too large" in output, output
    assert _temp_files(out) == []
    assert _latest(out) is None
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    assert verify_run_dir(run_dir) != [] and not (run_dir / MANIFEST).exists()
    assert not (run_dir / "run.json").exists() or (
        json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["status"] == "FAILED"
    )
    assert [h["status"] for h in _history(out)] == ["FAILED"]


# --------------------------------------------------------------------------- LATEST, history


@pytest.mark.parametrize("name", ["LATEST", "history.jsonl"])
def test_latest_or_history_being_a_directory(
    pytester: pytest.Pytester, golden_project: Path, name: str
) -> None:
    out = golden_project / ".goldeval" / "runs"
    first = pytester.runpytest(*BASE)
    assert_complete(golden_project, out, first.stdout.str(), first.ret)
    latest_before = _latest(out)
    target = out / name
    target.unlink()
    target.mkdir()
    result = pytester.runpytest(*BASE)
    output = result.stdout.str() + result.stderr.str()
    if name == "LATEST":
        latest_before = None  # it is the directory; it stays one (not replaced, not moved)
    run_id = assert_failed_everywhere(golden_project, out, output, result.ret, latest_before)
    assert target.is_dir() and list(target.iterdir()) == []
    assert f"{name} is a directory, not a file: {target}" in output
    # The earlier, complete run is untouched and still verifies.
    assert [p.name for p in out.iterdir() if p.is_dir() and p.name not in (run_id, name)]
    for p in out.iterdir():
        if p.is_dir() and p.name not in (run_id, name):
            assert verify_run_dir(p) == []


# --------------------------------------------------------------------------- 2./3. the store


def _plant_trigger(project: Path, sql: str) -> None:
    """A real SQLite trigger that makes one of the store's final writes fail."""
    with open_store(str(_store(project))):
        pass  # creates the schema
    conn = sqlite3.connect(_store(project))
    conn.execute(sql)
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    "trigger",
    [
        "CREATE TRIGGER planted BEFORE INSERT ON artifacts BEGIN "
        "SELECT RAISE(ABORT, 'planted: artifacts table refuses rows'); END",
        "CREATE TRIGGER planted BEFORE UPDATE ON runs WHEN NEW.status = 'COMPLETED' BEGIN "
        "SELECT RAISE(ABORT, 'planted: no COMPLETED'); END",
    ],
    ids=["record_artifacts", "finish_run"],
)
def test_store_failing_while_finalising_is_exit_75(
    pytester: pytest.Pytester, golden_project: Path, plugin_args: list[str], trigger: str
) -> None:
    """Was silent (exit 0, a verified folder, LATEST moved, store RUNNING). The store's final
    status is written before the manifest, so the folder never becomes a complete record."""
    _plant_trigger(golden_project, trigger)
    out = golden_project / ".goldeval" / "runs"
    result = pytester.runpytest(*BASE, *plugin_args)
    output = result.stdout.str() + result.stderr.str()
    assert_failed_everywhere(golden_project, out, output, result.ret, None)
    assert "planted" in output


def test_manifest_is_the_last_file_of_the_folder(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    out = golden_project / ".goldeval" / "runs"
    result = pytester.runpytest(*BASE, "--golden-artifacts=always")
    run_id = assert_complete(golden_project, out, result.stdout.str(), result.ret)
    run_dir = out / run_id
    manifest = (run_dir / MANIFEST).stat().st_mtime_ns
    files = [p for p in run_dir.rglob("*") if p.is_file() and p.name != MANIFEST]
    assert len(files) > 5 and all(p.stat().st_mtime_ns <= manifest for p in files)
    assert (out / "history.jsonl").stat().st_mtime_ns >= manifest
    with open_store(str(_store(golden_project))) as store:
        listed = {a.path for a in store.artifacts(run_id)}
    assert listed == {p.relative_to(run_dir).as_posix() for p in files}


# --------------------------------------------------------------------------- 3. verify


def _good_folder(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    artifacts.atomic_write(run_dir / "run.json", '{\n  "runId": "r1",\n  "status": "X"\n}\n')
    artifacts.atomic_write(run_dir / "summary.json", "{}\n")
    write_manifest(run_dir, "r1")
    assert verify_run_dir(run_dir) == []
    return run_dir


def test_verify_fails_on_a_folder_without_manifest(tmp_path: Path) -> None:
    run_dir = _good_folder(tmp_path)
    (run_dir / MANIFEST).unlink()
    (problem,) = verify_run_dir(run_dir)
    assert "missing" in problem and "did not finish" in problem


def test_verify_fails_on_leftover_temp_files(tmp_path: Path) -> None:
    run_dir = _good_folder(tmp_path)
    (run_dir / ".run.json.abc123.tmp").write_text("{", encoding="utf-8")
    assert verify_run_dir(run_dir) == [
        "leftover temp file (an unfinished write): .run.json.abc123.tmp"
    ]
    # ... also when a (hand-made) manifest lists it
    write_manifest(run_dir, "r1", [*_entries(run_dir), {"path": ".run.json.abc123.tmp"}])
    assert any("leftover temp file" in p for p in verify_run_dir(run_dir))


def _entries(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / MANIFEST).read_text(encoding="utf-8"))["artifacts"]


def test_verify_fails_on_a_manifest_without_run_json(tmp_path: Path) -> None:
    run_dir = _good_folder(tmp_path)
    (run_dir / "run.json").unlink()
    write_manifest(run_dir, "r1")  # lists summary.json only
    assert verify_run_dir(run_dir) == ["run.json is not listed in the manifest (no run record)"]


def test_verify_fails_on_a_manifest_of_another_run(tmp_path: Path) -> None:
    run_dir = _good_folder(tmp_path)
    write_manifest(run_dir, "r2")
    assert verify_run_dir(run_dir) == ["run.json: runId does not match the manifest's (r2)"]


def test_verify_fails_on_unlisted_files_and_symlinks_without_following_them(
    tmp_path: Path,
) -> None:
    run_dir = _good_folder(tmp_path)
    secret = tmp_path / "outside.txt"
    secret.write_text("outside", encoding="utf-8")
    (run_dir / "extra.md").write_text("x", encoding="utf-8")
    (run_dir / "link.md").symlink_to(secret)
    (run_dir / "cases").mkdir()
    (run_dir / "cases" / "dirlink").symlink_to(tmp_path, target_is_directory=True)
    assert sorted(verify_run_dir(run_dir)) == [
        "not in manifest: extra.md",
        "symlink (not followed): cases/dirlink",
        "symlink (not followed): link.md",
    ]


def test_goldeval_verify_cli_exit_code(tmp_path: Path) -> None:
    from goldeval.cli.main import main

    run_dir = _good_folder(tmp_path)
    assert main(["verify", str(run_dir)]) == 0
    (run_dir / MANIFEST).unlink()
    assert main(["verify", str(run_dir)]) == 65


# --------------------------------------------------------------------------- 6. links


@pytest.mark.parametrize("name", ["history.jsonl", "LATEST"])
def test_a_symlinked_history_or_latest_is_never_written_through(
    pytester: pytest.Pytester, golden_project: Path, name: str
) -> None:
    out = golden_project / ".goldeval" / "runs"
    out.mkdir(parents=True)
    outside = golden_project.parent / f"outside-{name}"
    outside.write_text("precious\n", encoding="utf-8")
    (out / name).symlink_to(outside)
    result = pytester.runpytest(*BASE)
    output = result.stdout.str() + result.stderr.str()
    assert outside.read_text(encoding="utf-8") == "precious\n"
    assert (out / name).is_symlink()
    assert_failed_everywhere(golden_project, out, output, result.ret, None, code=4)
    assert f"{name} is a symbolic link" in output


def test_a_symlinked_baselines_history_is_never_written_through(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    outside = golden_project.parent / "outside-baselines-history"
    outside.write_text("precious\n", encoding="utf-8")
    history = golden_project / "baselines" / "history.jsonl"
    history.unlink(missing_ok=True)
    history.symlink_to(outside)
    target = golden_project / "baselines" / "new.json"
    result = pytester.runpytest(*BASE, f"--golden-save-baseline={target}")
    output = result.stdout.str() + result.stderr.str()
    assert outside.read_text(encoding="utf-8") == "precious\n"
    assert history.is_symlink()
    assert result.ret != 0, output
    assert "baselines/history.jsonl is a symbolic link" in output and "Traceback" not in output
    assert not target.exists()  # "not saved" is what happened


def test_a_symlinked_run_key_folder_is_refused(
    pytester: pytest.Pytester, golden_project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    out = golden_project / ".goldeval" / "runs"
    first = pytester.runpytest(*BASE, "--golden-run-key=k1")
    run_id = assert_complete(golden_project, out, first.stdout.str(), first.ret)
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (out / run_id).rename(elsewhere / "moved")
    (out / run_id).symlink_to(elsewhere / "moved", target_is_directory=True)
    before = {p: p.stat().st_mtime_ns for p in (elsewhere / "moved").rglob("*")}
    result = pytester.runpytest(*BASE, "--golden-run-key=k1")
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, output
    assert "symbolic link" in output and "Traceback" not in output
    assert {p: p.stat().st_mtime_ns for p in (elsewhere / "moved").rglob("*")} == before
    assert _newest_run(golden_project)[1] == "FAILED"


def test_atomic_write_refuses_links(tmp_path: Path) -> None:
    target = tmp_path / "target.txt"
    target.write_text("keep", encoding="utf-8")
    (tmp_path / "a.json").symlink_to(target)
    with pytest.raises(artifacts.ArtifactError, match="symbolic link"):
        artifacts.atomic_write(tmp_path / "a.json", "x")
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "cases").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(artifacts.ArtifactError, match="symbolic link"):
        artifacts.atomic_write(tmp_path / "root" / "cases" / "b.json", "x", root=tmp_path / "root")
    assert target.read_text(encoding="utf-8") == "keep" and not (tmp_path / "b.json").exists()
    assert _temp_files(tmp_path) == []


# --------------------------------------------------------------------------- 7. file modes


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_every_artifact_has_the_umask_mode(
    pytester: pytest.Pytester, golden_project: Path, umask: int
) -> None:
    old = os.umask(umask)
    try:
        result = pytester.runpytest(*BASE, "--golden-artifacts=always")
    finally:
        os.umask(old)
    out = golden_project / ".goldeval" / "runs"
    run_id = assert_complete(golden_project, out, result.stdout.str(), result.ret)
    files = [p for p in (out / run_id).rglob("*") if p.is_file()]
    files += [out / "LATEST", out / "history.jsonl"]
    assert len(files) > 8
    modes = {p.relative_to(out).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in files}
    assert modes == dict.fromkeys(modes, 0o666 & ~umask)


# --------------------------------------------------------------------------- models side by side


@pytest.mark.parametrize("fault", [None, "history.jsonl"])
def test_models_side_by_side_finish_together(
    pytester: pytest.Pytester, golden_project: Path, fault: str | None
) -> None:
    """One store run, one folder per model: the store run gets a final status (it stayed
    RUNNING), and a failure marks every folder written so far (the first model's fails here;
    the second is then not written at all)."""
    from goldeval.testing.llm_server import FakeLLMServer, fixture_responder

    out = golden_project / ".goldeval" / "runs"
    if fault:
        (out / fault).mkdir(parents=True)
    with FakeLLMServer() as srv:
        srv.responder = fixture_responder(golden_project / "golden" / "generation")
        result = pytester.runpytest(
            *BASE,
            "--golden-mode=live",
            "--golden-models=m-one,m-two",
            f"--golden-base-url={srv.base_url}",
        )
    output = result.stdout.str() + result.stderr.str()
    folders = [p for p in out.iterdir() if p.is_dir() and p.name != fault]
    if fault is None:
        assert result.ret == 0, output
        assert len(folders) == 2
        assert _newest_run(golden_project)[1] == "COMPLETED"
        assert all(verify_run_dir(p) == [] for p in folders)
        return
    assert_failed_everywhere(golden_project, out, output, result.ret, None)
    assert folders
    for folder in folders:
        assert verify_run_dir(folder) != []
        doc = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        assert doc["status"] == "FAILED"


def test_atomic_write_creates_no_folder_through_a_link(tmp_path: Path) -> None:
    """``fixtures`` links out and ``fixtures/variant`` does not exist yet: the write is
    refused before ``mkdir`` would create ``variant`` at the link's target."""
    from goldeval.results.run_folder import ArtifactError, atomic_write

    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "dataset"
    root.mkdir()
    (root / "fixtures").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ArtifactError):
        atomic_write(root / "fixtures" / "variant" / "a.out.md", "x", root=root)
    assert list(outside.iterdir()) == []
