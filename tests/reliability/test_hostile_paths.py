"""Hostile ids and paths: rejected at collection with file:line:field; nothing is written outside
the run folder.

A case id becomes a file name (``fixtures/<id>.out.md``, ``runs/<run>/cases/<id>/``), so an id
that climbs (``../x``), is absolute (``/etc/passwd``), names a Windows device (``CON``,
``nul.txt``), nests (``a/b``), is too long, or holds NUL / a newline must never reach the file
system.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goldeval.core.errors import DatasetError
from goldeval.dataset.rows import check_case_id, parse_rows
from goldeval.results.run_folder import safe_child
from tests.reliability.test_bad_input_properties import GRADERS, KEYS

HOSTILE_IDS = [
    "../x",
    "/etc/passwd",
    "..",
    ".",
    "CON",
    "con",
    "nul.txt",
    "NUL",
    "aux.log",
    "COM1",
    "lpt9.out",
    "a/b",
    "a\\b",
    "x" * 129,
    "y" * 500,
    "a\x00b",
    "a\nb",
    "a\rb",
    " lead",
    "-lead",
    ".hidden",
    "",
    "   ",
    "caf\u00e9",
    "\U0001f99c",
    "a b",
    "C:x",
]
#: Ids at the edge of what is allowed: they are file names, and stay inside the run folder.
EDGE_IDS = ["x" * 128, "a..b", "z.", "a-_.9", "con1", "conx.txt", "Nul0", "prn_", "0"]


def _row(case_id: str, prompt: str = "p") -> str:
    return json.dumps({"id": case_id, "prompt": prompt, "expect": {"contains_any": ["ok"]}})


@pytest.mark.parametrize("case_id", HOSTILE_IDS, ids=lambda s: repr(s)[:20])
def test_check_case_id_refuses(case_id: str) -> None:
    assert check_case_id(case_id) is not None


@pytest.mark.parametrize("case_id", EDGE_IDS, ids=lambda s: s[:20])
def test_check_case_id_accepts_the_edge(case_id: str) -> None:
    assert check_case_id(case_id) is None


def test_every_hostile_id_is_reported_with_file_line_field(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    lines = [_row("fine")] + [_row(i) for i in HOSTILE_IDS]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError) as exc:
        parse_rows(path, KEYS, GRADERS)
    errors = exc.value.errors  # type: ignore[attr-defined]
    assert [e.line for e in errors] == list(range(2, len(HOSTILE_IDS) + 2))
    for err in errors:
        assert err.field == "id"
        assert str(err).startswith(f"{path}:{err.line}: id: ")
        # the message never carries a raw control character (it is printed on one line)
        assert "\x00" not in str(err) and "\n" not in str(err)


def test_hostile_ids_stop_collection_black_box(
    pytester: pytest.Pytester, golden_project: Path
) -> None:
    rows = golden_project / "golden" / "generation" / "golden-generation.jsonl"
    before = rows.read_text(encoding="utf-8")
    first = len(before.splitlines()) + 1
    with rows.open("a", encoding="utf-8") as fh:
        for case_id in HOSTILE_IDS:
            fh.write(_row(case_id) + "\n")
    result = pytester.runpytest("--golden=generation-v1", "--golden-artifacts=always")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # collection error: nothing ran
    out = result.stdout.str()
    for n in range(first, first + len(HOSTILE_IDS)):
        if n - first < 20:  # the report lists the first 20 problems, then "... and N more"
            assert f"golden-generation.jsonl:{n}: id: " in out, n
    assert f"and {len(HOSTILE_IDS) - 20} more" in out
    assert "Traceback" not in out
    assert not (golden_project / ".goldeval" / "runs").exists()  # no run folder for no run
    # nothing named after a hostile id appeared anywhere
    assert not any(
        p.name in ("passwd", "x", "b") for p in golden_project.rglob("*") if ".goldeval" in p.parts
    )


# --------------------------------------------------------------------------- safe_child


@pytest.mark.parametrize(
    "parts",
    [
        ("..",),
        ("../x",),
        ("/etc/passwd",),
        ("a", "..", "..", "b"),
        ("cases", "../../x"),
        ("cases", "/tmp"),
    ],
)
def test_safe_child_refuses_escapes(tmp_path: Path, parts: tuple[str, ...]) -> None:
    with pytest.raises(ValueError, match="escapes"):
        safe_child(tmp_path / "run", *parts)


def test_safe_child_refuses_a_symlink_that_leads_out(tmp_path: Path) -> None:
    root = tmp_path / "run"
    (root / "cases").mkdir(parents=True)
    (root / "cases" / "link").symlink_to(tmp_path)
    with pytest.raises(ValueError, match="escapes"):
        safe_child(root, "cases", "link", "x")
    assert safe_child(root, "cases", "a..b") == (root / "cases" / "a..b").resolve()


def test_safe_child_property(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    seen = {"inside": 0, "refused": 0}

    @settings(max_examples=300, deadline=None, database=None)
    @given(
        parts=st.lists(
            st.one_of(
                st.sampled_from(
                    ["..", ".", "/", "a", "../..", "/etc", "x/../..", "\x00", "~", "//x"]
                ),
                st.text(max_size=8),
            ),
            min_size=1,
            max_size=4,
        )
    )
    def prop(parts: list[str]) -> None:
        try:
            target = safe_child(root, *parts)
        except ValueError:
            seen["refused"] += 1
            return
        seen["inside"] += 1
        assert target == root.resolve() or root.resolve() in target.parents

    prop()
    assert seen["inside"] and seen["refused"]


# --------------------------------------------------------------------------- black box


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = Path(dirpath) / name
            st_ = p.lstat()
            out[str(p.relative_to(root))] = (st_.st_size, st_.st_mtime_ns)
    return out


def _edge_dataset(project: Path) -> None:
    folder = project / "golden" / "edge"
    (folder / "fixtures").mkdir(parents=True)
    (folder / "dataset.yaml").write_text("version: edge-v1\npack: none\n", encoding="utf-8")
    rows = [_row(i, f"prompt {n}") for n, i in enumerate(EDGE_IDS)]
    (folder / "rows.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    for n, case_id in enumerate(EDGE_IDS):
        answer = "ok" if n % 2 else "nope"  # half fail: failure artifacts too
        (folder / "fixtures" / f"{case_id}.out.md").write_text(answer, encoding="utf-8")


@pytest.mark.parametrize("out", [None, "new/nested/folder/runs"], ids=["default-out", "nested-out"])
def test_artifacts_always_stay_inside_the_run_folder(
    pytester: pytest.Pytester, golden_project: Path, out: str | None
) -> None:
    _edge_dataset(golden_project)
    parent = golden_project.parent
    siblings = {p.name for p in parent.iterdir()}
    before = _snapshot(golden_project)
    args = [
        "-p",
        "no:cacheprovider",
        "--golden=edge-v1",
        "--golden-artifacts=always",
        "--golden-attempts=2",
        "--golden-no-gate",
        "--junitxml=junit.xml",
    ]
    if out:
        args.append(f"--golden-out={out}")
        assert not (golden_project / "new").exists()
    result = pytester.runpytest(*args)
    assert result.ret == 1, result.stdout.str()  # the failing half
    runs = golden_project / (out or ".goldeval/runs")
    run_dir = Path((runs / "LATEST").read_text(encoding="utf-8").strip())
    assert run_dir.parent == runs.resolve()
    after = _snapshot(golden_project)
    changed = {p for p in after if before.get(p) != after[p]}
    removed = set(before) - set(after)
    assert not removed
    rel_run = run_dir.relative_to(golden_project.resolve())
    rel_runs = runs.relative_to(golden_project)
    allowed_outside_run = {
        str(rel_runs / "LATEST"),
        str(rel_runs / "history.jsonl"),
        str(rel_runs / "LAST_SESSION"),  # how the session ended, for `goldeval gate` with no run
        ".goldeval/goldeval.sqlite3",  # the default run store
        "junit.xml",
    }
    outside = {
        p
        for p in changed
        if not p.startswith(str(rel_run) + os.sep) and p not in allowed_outside_run
    }
    assert outside == set(), outside
    # every case got its folder, named exactly after its id, with both attempts
    for case_id in EDGE_IDS:
        case_dir = run_dir / "cases" / case_id
        assert (case_dir / "result.json").is_file(), case_id
        assert (case_dir / "attempts" / "2" / "result.json").is_file(), case_id
    assert {p.name for p in parent.iterdir()} == siblings  # nothing beside the project
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert run["attemptsTotal"] == 2 * len(EDGE_IDS)


@pytest.mark.parametrize("entry", ["fifo", "device-link", "link-out"])
def test_the_default_baseline_lookup_refuses_what_is_no_baseline_file(
    pytester: pytest.Pytester,
    golden_project: Path,
    tmp_path_factory: pytest.TempPathFactory,
    entry: str,
) -> None:
    """baselines/<id>.json as a FIFO or a link to a device was skipped in silence (GATE PASS
    with no comparison); a link out of the project was read (/proc/self/environ parsed as
    JSON). Each is refused now (65, naming the file), as the explicit option refuses them."""
    path = golden_project / "baselines" / "generation-v1.json"
    good = path.read_text(encoding="utf-8")  # a baseline this run compares with and passes
    path.unlink()
    if entry == "fifo":
        os.mkfifo(path)
    elif entry == "device-link":
        path.symlink_to("/dev/zero")
    else:
        outside = tmp_path_factory.mktemp("elsewhere") / "b.json"
        outside.write_text(good, encoding="utf-8")
        path.symlink_to(outside)
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 65, out
    assert "baselines/generation-v1.json" in out and "GATE PASS" not in out


def _moved_out(project: Path, name: str, factory: pytest.TempPathFactory) -> Path:
    """``project/name`` moved out of the project, a link to it left in its place."""
    outside = factory.mktemp("elsewhere") / name
    (project / name).rename(outside)
    (project / name).symlink_to(outside)
    return outside


def test_a_baselines_folder_that_links_out_of_the_project_is_refused(
    pytester: pytest.Pytester, golden_project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``baselines -> /elsewhere``: the check resolved the folder first, so everything in it
    looked inside the project and its baseline gated the run (NO_REGRESSION, exit 0)."""
    _moved_out(golden_project, "baselines", tmp_path_factory)
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 65, out
    assert "a link out of the project" in out and "GATE PASS" not in out


def test_a_golden_root_reached_through_a_link_is_refused(
    pytester: pytest.Pytester, golden_project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``golden -> /elsewhere`` was read (and record mode wrote fixtures there), while a link
    below the golden root was refused: refused before collection, naming the link."""
    outside = _moved_out(golden_project, "golden", tmp_path_factory)
    result = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out
    assert f"golden_root: {golden_project / 'golden'} is a symbolic link" in out, out
    # named as the real folder, the golden root is the user's to choose (this dataset's
    # pack, ../../pack, is then outside the project: refused on its own terms)
    pytester.makeini(f"[pytest]\ngolden_root = {outside}\n")
    named = pytester.runpytest("-p", "no:cacheprovider", "--golden=generation-v1")
    shown = named.stdout.str() + named.stderr.str()
    assert "is a symbolic link" not in shown and "generation/dataset.yaml" in shown, shown
