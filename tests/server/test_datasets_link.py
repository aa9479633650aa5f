"""``goldeval serve`` (and ``goldeval worker``) refuse a datasets folder reached through a
symbolic link, as the pytest plugin refuses such a golden root. Resolved, a ``golden/`` that
linked out of the project became every run's ``golden_root`` and rows path outside the
project: pytest took its rootdir there, found no baselines, and a run that had to be refused
(65, attempts differ from the baseline's) ended COMPLETED, exit 0."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from goldeval.verdict import exit_codes
from tests.server.conftest import Service

SQLITE_ONLY = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


def _linked_out(svc: Service, tmp_path: Path, name: str = "golden") -> Path:
    """``<root>/<name>`` made a link to a copy of the datasets outside the project."""
    outside = tmp_path / "outside" / "golden"
    if not outside.exists():
        shutil.copytree(svc.root / "golden", outside)
    link = svc.root / name
    if link.is_dir() and not link.is_symlink():
        shutil.rmtree(link)
    link.symlink_to(outside, target_is_directory=True)
    return link


def _start(svc: Service, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``goldeval <args>``: it must refuse at once (a server that starts is killed at
    the timeout and fails the test)."""
    try:
        return subprocess.run(
            svc._command(*args),
            cwd=svc.root,
            env=svc.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"goldeval {args[0]} started: {exc.stderr!r}") from None


@SQLITE_ONLY
def test_serve_and_worker_refuse_a_datasets_folder_that_is_a_link(
    service_factory: Any, tmp_path: Path
) -> None:
    svc: Service = service_factory()
    link = _linked_out(svc, tmp_path)
    port = "0"
    for args in (("serve", "--port", port, "--workers", "0"), ("worker", "--workers", "1")):
        done = _start(svc, *args)
        assert done.returncode == exit_codes.USAGE, (done.returncode, done.stderr)
        message = done.stderr.strip().splitlines()[-1]
        assert message.startswith("goldeval: datasets folder:"), done.stderr
        assert f"{link} is a symbolic link" in message, message
        assert "--datasets" in message and "Traceback" not in done.stderr
    # Named with --datasets, the same.
    other = _linked_out(svc, tmp_path, "data")
    done = _start(svc, "serve", "--port", port, "--datasets", str(other))
    assert done.returncode == exit_codes.USAGE, done.stderr
    assert f"{other} is a symbolic link" in done.stderr


@SQLITE_ONLY
def test_a_datasets_folder_made_a_link_after_start_is_refused_too(
    service_factory: Any, tmp_path: Path
) -> None:
    """Checked again for each run (the API before queueing it; the worker, through the same
    datasets.resolve, before starting pytest): never a path through the link."""
    svc: Service = service_factory()
    svc.serve(workers=0)
    _linked_out(svc, tmp_path)
    with svc.client("EVAL") as client:
        refused = client.post("/api/eval/runs", json={"dataset": "demo-v1"})
        assert refused.status_code == 422, refused.text
        assert "golden is a symbolic link" in refused.json()["detail"], refused.text
        assert client.get("/api/eval/runs").json()["items"] == []
