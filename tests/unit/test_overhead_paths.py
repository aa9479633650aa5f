"""The cheaper paths taken for issue 19 give the same answers as the paths they replace.

Each test compares the fast path with the general one (or with a reference written out here),
on the inputs where they could differ: links, FIFOs, odd names, null expect values, graders
with rules of their own, the dataset hash of a large set.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from goldeval.core.errors import DatasetError
from goldeval.core.safe_files import ContainedFiles, contained_file, read_regular_file
from goldeval.dataset.case import GoldenCase, canonical_text, dataset_hash
from goldeval.graders.applicability import Applicability
from goldeval.graders.base import GradeContext
from goldeval.graders.budget import budget, grader_timeout
from goldeval.graders.common import BuiltinGrader
from goldeval.graders.contract import ContractGrader
from goldeval.graders.registry import builtin_graders

# -- ContainedFiles: one lstat for a plain file, the full check for anything else --------------


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    dataset = tmp_path / "ds"
    (dataset / "fixtures").mkdir(parents=True)
    (dataset / "fixtures" / "a.out.md").write_text("answer a")
    (dataset / "inside.md").write_text("inside")
    (tmp_path / "secret.txt").write_text("outside")
    return dataset


Fetch = Callable[[ContainedFiles, Path, str], "bytes | None"]


def _through_file(files: ContainedFiles, folder: Path, name: str) -> bytes | None:
    real = files.file(folder, name, what="recorded answer")
    return None if real is None else read_regular_file(real)


def _through_read(files: ContainedFiles, folder: Path, name: str) -> bytes | None:
    return files.read(folder, name, what="recorded answer")


@pytest.fixture(params=[_through_file, _through_read], ids=["file", "read"])
def fetch(request: pytest.FixtureRequest) -> Fetch:
    """Both ways of reading a fixture: resolve it with ``file`` then read it, or ``read``
    (open without following a link, check the open file): the same answers everywhere."""
    return request.param  # type: ignore[no-any-return]


def test_plain_file_resolves_like_contained_file(folder: Path) -> None:
    files = ContainedFiles(folder)
    got = files.file(folder / "fixtures", "a.out.md", what="recorded answer")
    expected = contained_file(folder / "fixtures" / "a.out.md", folder, what="recorded answer")
    assert got == str(expected)
    # Asked again (the directory is cached): the same answer.
    assert files.file(folder / "fixtures", "a.out.md", what="recorded answer") == got


def test_plain_file_reads_its_bytes(folder: Path, fetch: Fetch) -> None:
    files = ContainedFiles(folder)
    assert fetch(files, folder / "fixtures", "a.out.md") == b"answer a"
    assert fetch(files, folder / "fixtures", "a.out.md") == b"answer a"  # directory cached


def test_missing_file_is_none(folder: Path, fetch: Fetch) -> None:
    assert fetch(ContainedFiles(folder), folder / "fixtures", "b.out.md") is None


def test_link_out_of_the_folder_is_refused(folder: Path, fetch: Fetch) -> None:
    os.symlink(folder.parent / "secret.txt", folder / "fixtures" / "b.out.md")
    with pytest.raises(DatasetError, match="outside"):
        fetch(ContainedFiles(folder), folder / "fixtures", "b.out.md")


def test_link_inside_the_folder_is_followed(folder: Path, fetch: Fetch) -> None:
    os.symlink(folder / "inside.md", folder / "fixtures" / "b.out.md")
    got = ContainedFiles(folder).file(folder / "fixtures", "b.out.md", what="x")
    assert got == str((folder / "inside.md").resolve())
    assert fetch(ContainedFiles(folder), folder / "fixtures", "b.out.md") == b"inside"


def test_dangling_link_is_not_found_rather_than_absent(folder: Path, fetch: Fetch) -> None:
    os.symlink(folder / "nowhere.md", folder / "fixtures" / "b.out.md")
    with pytest.raises(DatasetError, match="not found"):
        fetch(ContainedFiles(folder), folder / "fixtures", "b.out.md")


def test_fifo_is_refused_without_blocking(folder: Path, fetch: Fetch) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(folder / "fixtures" / "b.out.md")
    with pytest.raises(DatasetError, match="FIFO"):
        fetch(ContainedFiles(folder), folder / "fixtures", "b.out.md")


def test_directory_in_a_files_place_is_refused(folder: Path, fetch: Fetch) -> None:
    (folder / "fixtures" / "b.out.md").mkdir()
    with pytest.raises(DatasetError, match="directory"):
        fetch(ContainedFiles(folder), folder / "fixtures", "b.out.md")


def test_fixtures_folder_swapped_for_a_link_out_is_noticed(
    folder: Path, tmp_path: Path, fetch: Fetch
) -> None:
    files = ContainedFiles(folder)
    assert fetch(files, folder / "fixtures", "a.out.md") is not None  # cached
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "a.out.md").write_text("not ours")
    (folder / "fixtures").rename(folder / "old-fixtures")
    os.symlink(outside, folder / "fixtures")
    with pytest.raises(DatasetError, match="outside"):
        fetch(files, folder / "fixtures", "a.out.md")


@pytest.mark.parametrize("name", ["../secret.txt", "..", "sub/../../secret.txt"])
def test_names_that_are_paths_take_the_full_check(folder: Path, name: str, fetch: Fetch) -> None:
    with pytest.raises(DatasetError):
        fetch(ContainedFiles(folder), folder, name)


# -- Applicability: memoised by row shape, same answers as asking every grader ---------------


class _ByPrompt(BuiltinGrader):
    """A grader whose rule reads the prompt: it must be asked about every case."""

    name = "by_prompt"
    primary = ("layer",)

    def applies(self, case: Any) -> bool:
        return case.prompt.startswith("yes")

    def grade(self, ctx: GradeContext) -> Any:  # pragma: no cover - never graded here
        raise AssertionError


def _cases() -> list[GoldenCase]:
    shapes: list[dict[str, Any]] = [
        {},
        {"layer": "api"},
        {"layer": None},  # a null key counts for the contract, not for key-value rules
        {"regex": "x"},
        {"regex": None, "contains_any": ["a"]},
        {"json_schema": {"type": "object"}},
        {"refuse": True},
        {"similar_to": "s"},
    ]
    out = []
    for n, expect in enumerate(shapes):
        for must_not in ((), ("bad",)):
            for prompt in ("yes please", "no thanks"):
                out.append(
                    GoldenCase(
                        f"c{n}-{len(must_not)}-{prompt[:2]}",
                        prompt,
                        dict(expect),
                        must_not=must_not,
                    )
                )
    return out


def test_flags_equal_asking_every_grader() -> None:
    graders = [ContractGrader(), *builtin_graders(), _ByPrompt()]
    memo = Applicability(graders)
    for _ in range(2):  # the second pass answers from the memo
        for case in _cases():
            assert memo.flags(case) == [g.applies(case) for g in graders], case
            assert memo.graders_for(case) == [g for g in graders if g.applies(case)]


def test_used_by_any_equals_the_plain_scan() -> None:
    graders = [ContractGrader(), *builtin_graders(), _ByPrompt()]
    cases = _cases()
    expected = [g for g in graders if any(g.applies(c) for c in cases)]
    assert Applicability(graders).used_by_any(cases) == expected
    only_no = [c for c in cases if c.prompt.startswith("no")]
    assert Applicability([_ByPrompt()]).used_by_any(only_no) == []
    assert [g.name for g in Applicability([_ByPrompt()]).used_by_any(cases)] == ["by_prompt"]


# -- dataset hash fed piece by piece: the same digest as hashing the joined text -----------


def test_dataset_hash_equals_hash_of_the_joined_text() -> None:
    cases = [
        GoldenCase(f"id-{i:04d}", f"prompt {i} — ü", {"rag": ["x"], "layer": "api"})
        for i in range(300)
    ] + [GoldenCase("z-meta", "p", {"regex": "a"}, metadata={"k": [1, 2]})]
    ordered = sorted(cases, key=lambda c: c.id)
    joined = "[ " + ", ".join(canonical_text(c) for c in ordered) + " ]"
    assert dataset_hash(cases) == hashlib.sha256(joined.encode("utf-8")).hexdigest()
    assert dataset_hash([]) == hashlib.sha256(b"[ ]").hexdigest()


# -- budget as a class: nests and restores like the context manager it replaced --------------


def test_budget_nests_and_restores() -> None:
    from goldeval.graders import budget as budget_module

    assert getattr(budget_module._local, "state", None) is None
    with budget("outer", 5.0):
        outer = budget_module._local.state
        assert outer[:2] == ("outer", 5.0)
        with budget("inner"):
            assert budget_module._local.state[:2] == ("inner", grader_timeout())
        assert budget_module._local.state == outer
    assert getattr(budget_module._local, "state", None) is None
    with pytest.raises(ValueError), budget("raising", 1.0):
        raise ValueError
    assert getattr(budget_module._local, "state", None) is None


# -- read_fd: whole files of any size, from files and pipes ----------------------------------


@pytest.mark.parametrize("size", [0, 1, 300, 65_535, 65_536, 65_537, 3_000_001])
def test_read_fd_reads_whole_files(tmp_path: Path, size: int) -> None:
    from goldeval.core.safe_files import read_fd

    data = os.urandom(size)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert read_fd(fd) == data
    finally:
        os.close(fd)


def test_read_fd_reads_a_pipe_to_its_end() -> None:
    from goldeval.core.safe_files import read_fd

    read_end, write_end = os.pipe()
    data = b"x" * 200_000
    try:
        import threading

        writer = threading.Thread(target=lambda: (os.write(write_end, data), os.close(write_end)))
        writer.start()
        assert read_fd(read_end) == data
        writer.join()
    finally:
        os.close(read_end)
