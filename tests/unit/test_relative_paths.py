"""run.json names no absolute path of the machine (issue 33): the helpers that write paths
relative to the project root, and that make an older document's absolute ones relative."""

from __future__ import annotations

from pathlib import Path

from goldeval.pytest_plugin.ending import _relative_arg
from goldeval.results.run_document import project_relative, relative_origin_fields


def test_project_relative_inside_and_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "project"
    assert project_relative(root, root) == "."
    assert project_relative(root / "golden", root) == "golden"
    assert project_relative(root / ".goldeval" / "runs", root) == ".goldeval/runs"
    assert project_relative(tmp_path / "shared" / "golden", root) == "../shared/golden"
    assert str(tmp_path) not in project_relative(tmp_path / "elsewhere", root)


def test_an_older_documents_paths_are_made_relative() -> None:
    root = "/home/alice/project"
    configuration = {"outputDir": "/home/alice/project/.goldeval/runs", "mode": "FIXTURE"}
    out = relative_origin_fields(root, f"{root}/golden", f"{root}/baselines/b.json", configuration)
    assert out == {
        "projectRoot": ".",
        "goldenRoot": "golden",
        "baselinePath": "baselines/b.json",
        "configuration": {"outputDir": ".goldeval/runs", "mode": "FIXTURE"},
    }
    assert configuration["outputDir"] == "/home/alice/project/.goldeval/runs"  # not changed
    # Absent or already relative values are left as they are.
    assert relative_origin_fields(root, None, "baselines/b.json", {"mode": "x"}) == {
        "projectRoot": "."
    }


def test_rerun_arguments_lose_the_machine_paths(tmp_path: Path) -> None:
    here = tmp_path / "project"
    (here / "golden" / "demo").mkdir(parents=True)
    rows = here / "golden" / "demo" / "demo.jsonl"
    rows.write_text("{}\n", encoding="utf-8")
    (here / ".goldeval" / "runs").mkdir(parents=True)
    assert _relative_arg(str(rows), here) == "golden/demo/demo.jsonl"
    assert _relative_arg(f"{rows}::test_x", here) == "golden/demo/demo.jsonl::test_x"
    assert _relative_arg(f"--golden-out={here}/.goldeval/runs", here) == (
        "--golden-out=.goldeval/runs"
    )
    assert _relative_arg(f"golden_root={here}/golden", here) == "golden_root=golden"
    # A file not written yet, in a folder that exists: still a path.
    assert _relative_arg(f"--junitxml={here}/j.xml", here) == "--junitxml=j.xml"
    # Not paths of this machine, or not paths at all: kept as given.
    assert _relative_arg("--golden=demo-v1", here) == "--golden=demo-v1"
    assert _relative_arg("-q", here) == "-q"
    assert _relative_arg("--golden-out=/no/such/folder/x", here) == "--golden-out=/no/such/folder/x"
    assert _relative_arg("relative/path.jsonl", here) == "relative/path.jsonl"
