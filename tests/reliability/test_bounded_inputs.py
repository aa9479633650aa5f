"""Bounded by construction (issue 32): no dataset file, image or template can exhaust memory,
hang the run or crash it with a traceback.

Black box, in a real subprocess with a timeout (a regression would allocate gigabytes or run
for minutes, and must not take the test process with it):

* a 3 GiB sparse ``.out.md`` / ``.out.json`` fixture is refused from its ``fstat`` size before a
  byte is read: ERROR CONFIG_ERROR naming the file, exit 4, in seconds, no MemoryError;
* a sidecar nested 100,000 deep is the file's error (exit 4), never a RecursionError;
* a conversation image: a 4 GiB sparse png, an ``image/svg+xml`` data URL and a data URL over
  ``image_bytes`` are collection errors naming file, line and field;
* each hostile prompt template (nested ``range`` loops, ``'x' * 10**10``, a self-calling macro,
  ``range(10**9)``, a format width of 10**10, a run past the time limit, an output past the
  output limit) is an ERROR TEMPLATE_ERROR of its row naming the manifest, the row, its line and
  the template line; exit 4, within a bounded time;
* a baseline nested 100,000 deep or 300 MiB (sparse) is refused as the baseline's error
  (exit 65), a saved run.json the same for ``goldeval gate``.

Sparse files (``truncate``) cost no disk.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest

from goldeval.core.errors import DatasetError
from goldeval.core.safe_files import ContainedFiles, InputFileTooLarge, read_regular_file
from goldeval.judge.calibration import load_calibration
from tests.helpers import run_cli

GiB = 1 << 30
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
)
#: Seconds a bounded run may take on a loaded machine (a regression runs for minutes).
BOUND = 60


def _sparse(path: Path, size: int) -> Path:
    with path.open("wb") as fh:
        fh.truncate(size)
    return path


def _row(case_id: str, **extra: object) -> str:
    row = {"id": case_id, "prompt": "say ok", "expect": {"contains_any": ["ok"]}, **extra}
    return json.dumps(row)


def _dataset(root: Path, rows: list[str], manifest: str = "", name: str = "bounded") -> Path:
    folder = root / "golden" / name
    (folder / "fixtures").mkdir(parents=True)
    (folder / "dataset.yaml").write_text(
        f"version: {name}-v1\npack: none\n{manifest}", encoding="utf-8"
    )
    (folder / "rows.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    for line in rows:
        (folder / "fixtures" / f"{json.loads(line)['id']}.out.md").write_text("ok")
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    return folder


def _run(pytester: pytest.Pytester, name: str = "bounded") -> tuple[pytest.RunResult, float]:
    start = time.monotonic()
    result = pytester.runpytest_subprocess(
        f"--golden={name}-v1", "-p", "no:cacheprovider", timeout=BOUND
    )
    return result, time.monotonic() - start


def _out(result: pytest.RunResult) -> str:
    return result.stdout.str() + result.stderr.str()


# -- files ------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".out.md", ".out.json"])
def test_a_huge_sparse_fixture_is_refused_before_it_is_read(
    pytester: pytest.Pytester, suffix: str
) -> None:
    folder = _dataset(pytester.path, [_row("r1"), _row("r2")])
    big = _sparse(folder / "fixtures" / f"r1{suffix}", 3 * GiB)
    result, elapsed = _run(pytester)
    out = _out(result)
    assert result.ret == 4, out
    assert f"cannot replay fixture: {big}: the file is 3072 MiB, over the limit of 16 MiB" in out
    assert "CONFIG_ERROR" in out and "MemoryError" not in out and "Traceback" not in out
    assert "golden case r2" not in out  # the other row replays normally
    assert elapsed < BOUND


def test_a_deeply_nested_sidecar_is_the_files_error(pytester: pytest.Pytester) -> None:
    folder = _dataset(pytester.path, [_row("r1")])
    (folder / "fixtures" / "r1.out.json").write_text("[" * 100_000 + "]" * 100_000)
    result, _ = _run(pytester)
    out = _out(result)
    assert result.ret == 4, out
    assert "fixtures/r1.out.json: the sidecar is nested deeper than 64 levels" in out
    assert "RecursionError" not in out and "Traceback" not in out


def _image_row(part: dict[str, str]) -> str:
    content = [{"type": "text", "text": "what is this?"}, {"type": "image", **part}]
    return json.dumps(
        {
            "id": "img",
            "messages": [{"role": "user", "content": content}],
            "expect": {"contains_any": ["ok"]},
        }
    )


def _data_url(mime: str, data: bytes) -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


@pytest.mark.parametrize(
    ("part", "reason"),
    [
        ({"path": "big.png"}, "'big.png': the file is 4096 MiB, over the limit of 5 MiB"),
        (
            {"url": _data_url("image/svg+xml", b"<svg xmlns='http://www.w3.org/2000/svg'/>")},
            "the data URL is image/svg+xml, not a png, jpeg, gif or webp image",
        ),
        (
            {"url": _data_url("image/png", bytes(6 << 20))},
            "the data URL's image is 6 MiB, over the limit of 5 MiB",
        ),
    ],
    ids=["sparse-4GiB-png", "svg-data-url", "6MiB-data-url"],
)
def test_conversation_images_are_bounded_and_typed(
    pytester: pytest.Pytester, part: dict[str, str], reason: str
) -> None:
    folder = _dataset(pytester.path, [_row("r1"), _image_row(part)])
    _sparse(folder / "big.png", 4 * GiB)
    result, elapsed = _run(pytester)
    out = _out(result)
    assert result.ret == 2, out  # a bad row is a collection error, as every other one
    assert f"{folder / 'rows.jsonl'}:2: messages[0].content[1]: {reason}" in out
    assert "MemoryError" not in out and "Traceback" not in out and "INTERNALERROR" not in out
    assert elapsed < BOUND


def test_a_png_data_url_within_the_limit_is_accepted(pytester: pytest.Pytester) -> None:
    _dataset(pytester.path, [_image_row({"url": _data_url("image/png", PNG)})])
    result, _ = _run(pytester)
    assert result.ret == 0, _out(result)


# -- templates --------------------------------------------------------------------------------

#: One manifest, one hostile branch per row (``vars.attack``); the template line of each branch
#: is the one the error must name.
HOSTILE_TEMPLATE = """\
prompt:
  user: |
    {% macro m(n) %}{{ m(n + 1) }}{% endmacro %}Answer {{ id }}.
    {% if attack == "loops" %}{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}
    {% endfor %}
    {% elif attack == "repeat" %}{{ 'x' * 10**10 }}
    {% elif attack == "macro" %}{{ m(1) }}
    {% elif attack == "range" %}{{ range(10**9) | list | length }}
    {% elif attack == "width" %}{{ '%10000000000d' % 1 }}
    {% elif attack=="slow" %}{% set y='y'*9**6 %}{%for i in range(9**6)%}{{y.find('z')}}{%endfor%}
    {% elif attack == "output" %}{% for i in range(10000) %}{{ 'z' * 1000 }}{% endfor %}
    {% endif %}
"""
#: attack: (template line, the reason in the row's TEMPLATE_ERROR)
ATTACKS = {
    # A heavily loaded machine may reach the time limit first: either stops the loops.
    "loops": (2, "the template's loops ran more than 1,000,000 iterations|the template ran"),
    "repeat": (4, "the repetition would produce 10,000,000,000 characters or items"),
    "macro": (
        1,  # the self-call, in the macro defined on line 1
        "a macro or recursive loop calls itself too deeply (RecursionError)",
    ),
    "range": (6, "range() of 1,000,000,000 items is larger than a template may iterate"),
    "width": (7, "a width in the format would produce 10,000,000,000 characters"),
    # time without text: each step counts a 900 KB string (building a new one each step is
    # stopped sooner by template_built_chars)
    "slow": (8, "the template ran longer than 3 seconds"),
    "output": (9, "the output has 4,000,"),
}


def test_hostile_templates_are_template_errors_of_their_rows(pytester: pytest.Pytester) -> None:
    rows = [_row("fine", vars={"attack": "none"})]
    rows += [_row(f"r-{attack}", vars={"attack": attack}) for attack in ATTACKS]
    _dataset(pytester.path, rows, HOSTILE_TEMPLATE)
    result, elapsed = _run(pytester)
    out = _out(result)
    assert result.ret == 4, out
    for n, (attack, (line, reasons)) in enumerate(ATTACKS.items(), start=2):
        head = (
            f"golden case r-{attack} attempt 1: ERROR TEMPLATE_ERROR after 1 try: prompt.user "
            f"of dataset.yaml for row r-{attack} (line {n}): template line {line}: "
        )
        assert any(head + reason in out for reason in reasons.split("|")), (attack, out)
    assert "golden case fine" not in out  # the harmless row renders and passes
    assert "Traceback" not in out and "RecursionError:" not in out
    # Seven rows, the slowest stopped by the 3 s limit; a regression ran for minutes.
    assert elapsed < BOUND, elapsed


def test_a_hostile_template_of_a_prompt_less_row_is_a_collection_error(
    pytester: pytest.Pytester,
) -> None:
    manifest = "prompt:\n  user: |\n    {{ topic }}\n    {{ 'x' * 10**10 }}\n"
    row = json.dumps({"id": "t1", "vars": {"topic": "a"}, "expect": {"contains_any": ["ok"]}})
    folder = _dataset(pytester.path, [row], manifest)
    result, elapsed = _run(pytester)
    out = _out(result)
    assert result.ret == 2, out
    assert (
        f"{folder / 'rows.jsonl'}:1: prompt.user: template line 2: the repetition would "
        "produce 10,000,000,000 characters or items"
    ) in out
    assert "Traceback" not in out and elapsed < BOUND


# -- baselines, saved runs, calibration, shared readers --------------------------------------


@pytest.mark.parametrize("damage", ["deep", "huge"])
def test_a_hostile_baseline_is_the_baselines_error(pytester: pytest.Pytester, damage: str) -> None:
    _dataset(pytester.path, [_row("r1")])
    (pytester.path / "baselines").mkdir()
    baseline = pytester.path / "baselines" / "bounded-v1.json"
    if damage == "deep":
        baseline.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
        reason = "invalid JSON: the document is nested deeper than 64 levels"
    else:
        _sparse(baseline, 300 << 20)
        reason = "the file is 300 MiB, over the limit of 256 MiB"
    result, elapsed = _run(pytester)
    out = _out(result)
    assert result.ret == 65, out
    assert f"{baseline}: {reason}" in out
    assert "Traceback" not in out and "RecursionError" not in out and elapsed < BOUND


def test_goldeval_gate_refuses_a_deep_run_json(tmp_path: Path) -> None:
    run = tmp_path / "run.json"
    run.write_text("[" * 100_000 + "]" * 100_000)
    proc = run_cli("gate", str(run), cwd=tmp_path)
    assert proc.returncode == 65, proc.stdout + proc.stderr
    assert f"{run}: invalid JSON: the document is nested deeper than 64 levels" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_huge_calibration_file_is_refused_unread(tmp_path: Path) -> None:
    path = _sparse(tmp_path / "calibration.jsonl", 3 * GiB)
    with pytest.raises(InputFileTooLarge) as info:
        load_calibration(path)
    assert str(info.value) == f"{path}: the file is 3072 MiB, over the limit of 256 MiB"
    assert info.value.limit == "file_bytes" and isinstance(info.value, DatasetError)


def test_the_shared_readers_check_the_size_before_reading(tmp_path: Path) -> None:
    big = _sparse(tmp_path / "a.out.md", 3 * GiB)
    with pytest.raises(InputFileTooLarge, match="over the limit of 16 MiB"):
        ContainedFiles(tmp_path).read(tmp_path, big.name, what="x", limit="fixture_bytes")
    with pytest.raises(InputFileTooLarge, match="the file is 11 bytes, over the limit of 10"):
        (tmp_path / "small").write_bytes(b"x" * 11)
        read_regular_file(tmp_path / "small", max_bytes=10)
    assert read_regular_file(tmp_path / "small", max_bytes=11) == b"x" * 11
    assert ContainedFiles(tmp_path).read(tmp_path, "small", what="x", max_bytes=11) == b"x" * 11
