"""Issue 32 (`goldeval import` bounded by construction): no source file can crash, hang or
half-write an import.

Each hostile source runs through the real command (``python -m goldeval.cli.main import``
in a subprocess) and must end with exit 4 (usage error), a message naming the file, the line
(or row) and the field, no traceback, and nothing in ``golden/``: no dataset folder and no
``.<name>.import-*`` temporary folder. Parallel imports of one name, SIGTERM and SIGKILL run
real processes too.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from goldeval.core.limits import default
from goldeval.verdict.exit_codes import USAGE
from tests.helpers import run_cli

NAME = "ds"


def _import(tmp_path: Path, source: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    golden = tmp_path / "golden"
    return run_cli(
        "import", str(source), "--name", NAME, "--golden-root", str(golden), *extra, cwd=tmp_path
    )


def _refused(done: subprocess.CompletedProcess[str], tmp_path: Path, *said: str) -> None:
    """Exit 4, each of ``said`` in the message, no traceback, nothing left in golden/."""
    assert done.returncode == USAGE, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    for text in said:
        assert text in done.stderr, done.stderr
    golden = tmp_path / "golden"
    assert not golden.exists() or list(golden.iterdir()) == [], list(golden.iterdir())


def _rows(tmp_path: Path) -> list[dict]:  # type: ignore[type-arg]
    text = (tmp_path / "golden" / NAME / f"{NAME}.jsonl").read_text(encoding="utf-8")

    def strict(token: str) -> None:
        raise AssertionError(f"{token} is not JSON")

    return [json.loads(line, parse_constant=strict) for line in text.splitlines()]


# --------------------------------------------------------------------------- Hugging Face


def _hf_folder(tmp_path: Path, splits: list[str]) -> Path:
    hf = tmp_path / "hf"
    (hf / "train").mkdir(parents=True)
    (hf / "train" / "data.jsonl").write_text('{"prompt": "a", "answer": "b"}\n')
    (hf / "dataset_dict.json").write_text(json.dumps({"splits": splits}))
    return hf


@pytest.mark.parametrize("split", [".", "..", "../train", "train/..", "a\\b", ""])
def test_hf_split_that_is_not_a_name_is_refused(tmp_path: Path, split: str) -> None:
    # {"splits": ["."]} made the importer read its own folder again: RecursionError
    hf = _hf_folder(tmp_path, ["train", split])
    _refused(_import(tmp_path, hf), tmp_path, "dataset_dict.json: splits:", "not a split name")


def test_hf_split_folder_linking_out_is_refused(tmp_path: Path) -> None:
    hf = _hf_folder(tmp_path, ["train", "test"])
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "data.jsonl").write_text('{"prompt": "x", "answer": "y"}\n')
    (hf / "test").symlink_to(outside, target_is_directory=True)
    _refused(_import(tmp_path, hf), tmp_path, "dataset_dict.json: splits:", "'test'", "not a link")


def test_hf_json_line_nested_too_deep_and_nan(tmp_path: Path) -> None:
    hf = tmp_path / "rows.jsonl"
    ok = '{"prompt": "a", "answer": "b", "score": NaN}\n'
    hf.write_text(ok + '{"prompt": "a", "meta": ' + "[" * 50_000 + "]" * 50_000 + "}\n")
    _refused(_import(tmp_path, hf), tmp_path, "rows.jsonl:2:", "nested deeper than 64")
    hf.write_text(ok)  # NaN is a missing value: no bare NaN in the rows file
    done = _import(tmp_path, hf)
    assert done.returncode == 0, done.stderr
    assert "score" not in _rows(tmp_path)[0].get("metadata", {})


# --------------------------------------------------------------------------- CSV


def test_csv_field_over_the_limit_names_line_and_column(tmp_path: Path) -> None:
    limit = int(default("import_csv_field"))
    src = tmp_path / "big.csv"
    big = "x" * (limit + 1)
    src.write_text(f'id,prompt,answer\na,hi,hello\nb,"two\nlines",{big}\n', encoding="utf-8")
    _refused(_import(tmp_path, src), tmp_path, "big.csv:3:", "column 'answer'", "import_csv_field")


def test_csv_field_over_the_old_128_kib_default_imports(tmp_path: Path) -> None:
    # csv.field_size_limit's own default (128 KiB) raised _csv.Error; the limit is ours now
    src = tmp_path / "long.csv"
    src.write_text("prompt,answer\nhi," + "y" * 200_000 + "\n", encoding="utf-8")
    done = _import(tmp_path, src)
    assert done.returncode == 0, done.stderr
    assert len(_rows(tmp_path)[0]["expect"]["equals"]) == 200_000


def test_csv_expect_cell_nested_too_deep(tmp_path: Path) -> None:
    src = tmp_path / "deep.csv"
    deep = "[" * 40_000 + "]" * 40_000
    src.write_text(f"prompt,expect.json_equals\nok,1\nhi,{deep}\n", encoding="utf-8")
    _refused(
        _import(tmp_path, src),
        tmp_path,
        "deep.csv:3:",
        "expect.json_equals is nested deeper than 64 levels",
    )


def test_csv_expect_cell_with_nan_and_infinity(tmp_path: Path) -> None:
    src = tmp_path / "inf.csv"
    src.write_text('prompt,expect.json_equals\nhi,"{""v"": Infinity}"\n', encoding="utf-8")
    _refused(_import(tmp_path, src), tmp_path, "inf.csv:2:", "expect.json_equals.v", "inf")


def test_input_file_over_the_size_limit_is_refused_before_reading(tmp_path: Path) -> None:
    src = tmp_path / "huge.csv"
    with src.open("wb") as fh:  # sparse: no disk used, but fstat says 257 MiB
        fh.truncate(int(default("file_bytes")) + (1 << 20))
    started = time.monotonic()
    _refused(_import(tmp_path, src), tmp_path, "huge.csv:", "over the limit of 256 MiB")
    assert time.monotonic() - started < 20


# --------------------------------------------------------------------------- Arrow / parquet


def _parquet(path: Path, records: list[dict]) -> None:  # type: ignore[type-arg]
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(records), str(path))


def test_parquet_decimal_date_nan_become_json(tmp_path: Path) -> None:
    import datetime
    from decimal import Decimal

    _parquet(
        tmp_path / "hf" / "train.parquet",
        [
            {
                "question": "q?",
                "answer": "a",
                "price": Decimal("1.10"),
                "count": Decimal("12.00"),
                "exact": Decimal("0.10000000000000000000000001"),
                "day": datetime.date(2024, 5, 1),
                "at": datetime.datetime(2024, 5, 1, 12, 30),
                "score": math.nan,
            }
        ],
    )
    done = _import(tmp_path, tmp_path / "hf")
    assert done.returncode == 0, done.stderr
    meta = _rows(tmp_path)[0]["metadata"]
    assert meta["day"] == "2024-05-01" and meta["at"] == "2024-05-01T12:30:00"
    assert meta["count"] == 12 and meta["price"] == 1.1
    assert meta["exact"] == "0.10000000000000000000000001"  # no float says it: kept as text
    assert "score" not in meta  # NaN: a missing value


@pytest.mark.parametrize(
    "value,said",
    [(math.inf, "score: is inf"), (b"\x00png", "score: holds a bytes value")],
    ids=["inf", "bytes"],
)
def test_parquet_value_json_cannot_hold_names_row_and_column(
    tmp_path: Path, value: object, said: str
) -> None:
    _parquet(
        tmp_path / "hf" / "train.parquet",
        [{"question": "q?", "answer": "a", "score": None}, {"question": "r?", "score": value}],
    )
    _refused(_import(tmp_path, tmp_path / "hf"), tmp_path, "train.parquet row 2:", said)


def test_an_answer_too_long_to_replay_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    """A 4 KB parquet file (compressed) held a 100 MB answer: the import said 0 and wrote a
    dataset pytest could not replay (its fixture over fixture_bytes)."""
    long = "a" * (int(default("fixture_bytes")) + 1)
    _parquet(
        tmp_path / "hf" / "train.parquet",
        [{"question": "q?", "answer": "short"}, {"question": "r?", "answer": long}],
    )
    _refused(_import(tmp_path, tmp_path / "hf"), tmp_path, "train.parquet row 2:", "fixture_bytes")


@pytest.mark.parametrize("suffix", [".parquet", ".arrow"])
def test_corrupt_arrow_or_parquet_file(tmp_path: Path, suffix: str) -> None:
    pytest.importorskip("pyarrow")
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / f"data{suffix}").write_bytes(b"PAR1" + os.urandom(512) + b"PAR1")
    _refused(_import(tmp_path, hf), tmp_path, f"data{suffix}:", f"not a readable {suffix} file")


# Each child reads the file through the importer and exits the normal way (interpreter
# finalisation, C++ static destructors): a pyarrow IO thread still calling back into a Python
# file object at that moment aborted the process (-6, "terminate called without an active
# exception"), 11 times in 200 before the fix. Forked children make 100 exits cost ~9 s.
_EXIT_LOOP = """
import os, sys
from pathlib import Path
from goldeval.cli.importers.model import ImportReport
from goldeval.cli.importers.sources import read_hf
import pyarrow  # noqa: F401  (after goldeval, as in the CLI: imported first it hid the abort)
aborted = 0
for _ in range(int(sys.argv[2])):
    pid = os.fork()
    if pid == 0:
        try:
            read_hf(Path(sys.argv[1]), ImportReport(source=sys.argv[1], fmt="hf"), None)
        except Exception:
            pass
        sys.exit(0)
    _, status = os.waitpid(pid, 0)
    aborted += os.WIFSIGNALED(status)
print(aborted)
"""


@pytest.mark.parametrize("suffix", [".arrow", ".parquet"])
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_reading_arrow_or_parquet_never_aborts_the_exit(tmp_path: Path, suffix: str) -> None:
    pytest.importorskip("pyarrow")
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / f"data{suffix}").write_bytes(b"PAR1" + os.urandom(512) + b"PAR1")
    done = subprocess.run(
        [sys.executable, "-c", _EXIT_LOOP, str(hf), "100"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0", done.stdout + done.stderr


# --------------------------------------------------------------------------- promptfoo YAML

ALIAS_BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
tests:
  - vars: {question: hi, bomb: *i}
    assert: [{type: contains, value: hi}]
"""


def test_yaml_alias_bomb_is_refused_fast(tmp_path: Path) -> None:
    src = tmp_path / "bomb.yaml"
    src.write_text(ALIAS_BOMB, encoding="utf-8")
    assert len(ALIAS_BOMB) < 800
    started = time.monotonic()
    done = _import(tmp_path, src)
    elapsed = time.monotonic() - started
    _refused(done, tmp_path, "bomb.yaml:", "yaml_nodes")
    assert elapsed < 10, f"took {elapsed:.1f}s"


@pytest.mark.parametrize(
    "text,said",
    [
        (
            "tests:\n"
            + "".join(f"  - &a{i} {{vars: {{question: q}}}}\n" for i in range(60))
            + "extra: ["
            + ",".join(f"*a{i % 60}" for i in range(150))
            + "]\n",
            "yaml_aliases",
        ),
        ("tests: &t [{vars: {question: *t}}]\n", "recursive alias"),
        ("tests: " + "[" * 20_000 + "]" * 20_000 + "\n", "yaml_depth"),
    ],
    ids=["too-many-aliases", "recursive-alias", "too-deep"],
)
def test_yaml_other_bounds(tmp_path: Path, text: str, said: str) -> None:
    src = tmp_path / "tests.yaml"
    src.write_text(text, encoding="utf-8")
    started = time.monotonic()
    _refused(_import(tmp_path, src), tmp_path, "tests.yaml:", said)
    assert time.monotonic() - started < 20


def test_yaml_dates_become_iso_text(tmp_path: Path) -> None:
    # a YAML date in vars made json.dumps fail ("not JSON serializable")
    src = tmp_path / "tests.yaml"
    src.write_text(
        "tests:\n  - vars: {question: hi, day: 2024-05-01}\n"
        "    assert: [{type: contains, value: hi}]\n",
        encoding="utf-8",
    )
    done = _import(tmp_path, src)
    assert done.returncode == 0, done.stderr
    assert _rows(tmp_path)[0]["metadata"]["vars"]["day"] == "2024-05-01"


# --------------------------------------------------------------------------- DeepEval


def test_deepeval_golden_nested_too_deep(tmp_path: Path) -> None:
    src = tmp_path / "goldens.json"
    deep = "[" * 50_000 + "]" * 50_000
    src.write_text(
        '[{"input": "a", "expected_output": "b"},\n {"input": "c", "comments": ' + deep + "}]",
        encoding="utf-8",
    )
    _refused(_import(tmp_path, src), tmp_path, "goldens.json:2:", "nested deeper than 64")


def test_deepeval_golden_with_more_tool_calls_than_replayable_is_refused(tmp_path: Path) -> None:
    """Imported (exit 0), then refused by pytest: the sidecar held 1,000 tool calls."""
    src = tmp_path / "goldens.json"
    calls = [{"name": "f", "input_parameters": {}}] * (int(default("answer_tool_calls")) + 1)
    goldens = [
        {"input": "a", "expected_output": "b"},
        {"input": "c", "expected_output": "d", "tools_called": calls},
    ]
    src.write_text(json.dumps(goldens), encoding="utf-8")
    _refused(_import(tmp_path, src), tmp_path, "goldens.json", "answer_tool_calls")


# --------------------------------------------------------------------------- ids


def test_renamed_ids_are_listed_and_strict_ids_refuses_them(tmp_path: Path) -> None:
    src = tmp_path / "ids.csv"
    src.write_text("id,prompt,answer\nr1,a,b\nr1,c,d\nr 1!,e,f\n", encoding="utf-8")
    strict = _import(tmp_path, src, "--strict-ids")
    _refused(
        strict,
        tmp_path,
        "--strict-ids: 2 id(s) would be renamed",
        "ids.csv:3: 'r1' -> 'r1-2'",
        "ids.csv:4: 'r 1!' -> 'r-1'",
    )
    done = _import(tmp_path, src)
    assert done.returncode == 0, done.stderr
    assert "ids.csv:3: 'r1' -> 'r1-2' ('r1' is taken by an earlier row)" in done.stdout
    assert "ids.csv:4: 'r 1!' -> 'r-1' (not a case id" in done.stdout
    assert [r["id"] for r in _rows(tmp_path)] == ["r1", "r1-2", "r-1"]


def test_same_id_in_two_hf_splits_is_listed(tmp_path: Path) -> None:
    hf = _hf_folder(tmp_path, ["train", "test"])
    (hf / "test").mkdir()
    for split in ("train", "test"):
        (hf / split / "data.jsonl").write_text('{"id": "hours", "prompt": "a", "answer": "b"}\n')
    _refused(_import(tmp_path, hf, "--strict-ids"), tmp_path, "'hours' -> 'hours-2'")
    done = _import(tmp_path, hf)
    assert done.returncode == 0, done.stderr
    assert "test/data.jsonl:1: 'hours' -> 'hours-2'" in done.stdout


# --------------------------------------------------------------------------- processes


def _slow_csv(tmp_path: Path, rows: int) -> Path:
    """A source whose import takes a moment: one fixture file per row."""
    src = tmp_path / "many.csv"
    lines = ["id,prompt,answer"] + [f"r{n},question {n}?,answer {n}" for n in range(rows)]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return src


def _spawn_import(tmp_path: Path, source: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "goldeval.cli.main",
            "import",
            str(source),
            "--name",
            NAME,
            "--golden-root",
            str(tmp_path / "golden"),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _temp_folders(tmp_path: Path) -> list[Path]:
    golden = tmp_path / "golden"
    return list(golden.glob(f".{NAME}.import-*")) if golden.is_dir() else []


def _wait_for_temp_folder(tmp_path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not _temp_folders(tmp_path):
        assert proc.poll() is None, "the import ended before its temporary folder was seen"
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_six_parallel_imports_of_one_name_one_wins(tmp_path: Path) -> None:
    src = _slow_csv(tmp_path, 300)
    procs = [_spawn_import(tmp_path, src) for _ in range(6)]
    outputs = [p.communicate(timeout=120) for p in procs]
    results = [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs, strict=True)]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, USAGE, USAGE, USAGE, USAGE, USAGE], results
    for code, _, err in results:
        assert "Traceback" not in err and "Directory not empty" not in err, err
        if code == USAGE:
            assert "exists already" in err, err
    assert [p.name for p in (tmp_path / "golden").iterdir()] == [NAME]
    assert len(_rows(tmp_path)) == 300


def test_sigterm_removes_the_temporary_folder(tmp_path: Path) -> None:
    proc = _spawn_import(tmp_path, _slow_csv(tmp_path, 20_000))
    _wait_for_temp_folder(tmp_path, proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, out + err
    assert "Traceback" not in err
    golden = tmp_path / "golden"
    assert not golden.exists() or list(golden.iterdir()) == []


def test_folder_of_a_killed_import_is_cleaned_by_the_next(tmp_path: Path) -> None:
    src = _slow_csv(tmp_path, 20_000)
    proc = _spawn_import(tmp_path, src)
    _wait_for_temp_folder(tmp_path, proc)
    proc.kill()  # SIGKILL: no handler runs
    proc.communicate(timeout=60)
    (left,) = _temp_folders(tmp_path)
    src.write_text("id,prompt,answer\nr1,a,b\n", encoding="utf-8")
    done = _import(tmp_path, src)
    assert done.returncode == 0, done.stderr
    assert f"removed {left.name}, left by an import that was killed" in done.stdout
    assert [p.name for p in (tmp_path / "golden").iterdir()] == [NAME]


@pytest.mark.parametrize(
    "name,text,said",
    [
        (
            "big.json",
            '[{"input": "a", "expected_output": "b", "n": ' + "1" * 5000 + "}]",
            "big.json:1: not valid JSON",
        ),
        (
            "bin.yaml",
            "tests:\n  - vars: {question: hi, b: !!binary aGVsbG8=}\n",
            "bin.yaml:2: vars.b: holds a bytes value",
        ),
        (
            "assert.yaml",
            "tests:\n  - vars: {question: hi}\n    assert: 5\n",
            "assert.yaml:2: assert: must be a list",
        ),
        ("tag.yaml", "tests: !!python/object:os.system {}\n", "tag.yaml:1: not valid YAML"),
    ],
    ids=["huge-int", "yaml-binary", "assert-not-a-list", "yaml-python-tag"],
)
def test_other_values_no_reader_can_hold(tmp_path: Path, name: str, text: str, said: str) -> None:
    src = tmp_path / name
    src.write_text(text, encoding="utf-8")
    _refused(_import(tmp_path, src), tmp_path, said)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    src = tmp_path / "rows.csv"
    os.mkfifo(src)
    started = time.monotonic()
    _refused(_import(tmp_path, src), tmp_path, "rows.csv: not a regular file")
    assert time.monotonic() - started < 20


# --------------------------------------------------------------------------- promptfoo


def test_promptfoo_template_expansion_is_bounded(tmp_path: Path) -> None:
    """20,000 references to a 100 KB var: a 200 KB file rendered a 2 GB prompt (a MemoryError
    traceback after gigabytes of memory). Refused at template_output_chars, naming the test."""
    template = "{{a}}" * 20_000
    source = tmp_path / "pf.yaml"
    source.write_text(
        f"prompts:\n  - '{template}'\ntests:\n  - description: t1\n    vars:\n"
        f"      a: '{'x' * 100_000}'\n    assert:\n      - type: contains\n        value: hi\n",
        encoding="utf-8",
    )
    started = time.monotonic()
    done = _import(tmp_path, source)
    _refused(done, tmp_path, "pf.yaml:4: prompt:", "template_output_chars")
    assert time.monotonic() - started < 30
    # Under the limit it imports as before.
    source.write_text(
        "prompts:\n  - 'say {{a}} {{a}}'\ntests:\n  - vars:\n      a: hi\n"
        "    assert:\n      - type: contains\n        value: hi\n",
        encoding="utf-8",
    )
    assert _import(tmp_path, source).returncode == 0
    assert _rows(tmp_path)[0]["prompt"] == "say hi hi"


@pytest.mark.parametrize("fmt", ["hf", "csv", "deepeval", "promptfoo"])
def test_an_import_reads_at_most_import_rows_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """A 73 MB JSONL of 2,000,000 rows wrote 2,000,000 fixture files (7.9 GB) with 3.4 GB
    of memory. Every format stops at the import_rows limit (lowered here to 5), naming the
    first row past it, with nothing written."""
    import dataclasses

    from goldeval.cli.importers import import_dataset
    from goldeval.core import limits
    from goldeval.core.errors import DatasetError

    spec = limits.LIMITS_BY_NAME["import_rows"]
    monkeypatch.setitem(limits.LIMITS_BY_NAME, "import_rows", dataclasses.replace(spec, default=5))
    n = 6
    if fmt == "hf":
        source = tmp_path / "rows.jsonl"
        source.write_text("".join(f'{{"question": "q{i}", "answer": "a"}}\n' for i in range(n)))
    elif fmt == "csv":
        source = tmp_path / "rows.csv"
        source.write_text("question,answer\n" + "".join(f"q{i},a\n" for i in range(n)))
    elif fmt == "deepeval":
        source = tmp_path / "goldens.json"
        source.write_text(
            json.dumps([{"input": f"q{i}", "expected_output": "a"} for i in range(n)])
        )
    else:
        source = tmp_path / "pf.yaml"
        tests = "".join(
            f"  - vars: {{q: q{i}}}\n    assert: [{{type: contains, value: a}}]\n" for i in range(n)
        )
        source.write_text("prompts: ['{{q}}']\ntests:\n" + tests)
    with pytest.raises(DatasetError, match="more than 5 rows"):
        import_dataset(source, NAME, tmp_path / "golden", fmt=fmt)
    assert not (tmp_path / "golden" / NAME).exists()
    monkeypatch.setitem(limits.LIMITS_BY_NAME, "import_rows", dataclasses.replace(spec, default=6))
    assert import_dataset(source, NAME, tmp_path / "golden", fmt=fmt).rows == n


def test_a_parquet_column_that_decodes_past_file_bytes_stops_early(tmp_path: Path) -> None:
    """A probe: 848 bytes of dictionary-encoded parquet held 2,500 copies of a 1 MiB string;
    its metadata said 1 MB, and the whole table was decoded (1.8 GB, a MemoryError). Read 64
    rows at a time, the decoded size stops it at file_bytes."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    big = "x" * (1 << 20)
    table = pa.table({"question": pa.array([big] * 400).dictionary_encode(), "answer": ["a"] * 400})
    (tmp_path / "hf").mkdir()
    pq.write_table(table, str(tmp_path / "hf" / "train.parquet"))
    assert (tmp_path / "hf" / "train.parquet").stat().st_size < 100_000
    _refused(_import(tmp_path, tmp_path / "hf"), tmp_path, "train.parquet", "the table (decoded)")


def test_a_parquet_of_too_many_rows_is_refused_from_its_metadata(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table({"question": ["q?"] * 200_001, "answer": ["a"] * 200_001})
    (tmp_path / "hf").mkdir()
    pq.write_table(table, str(tmp_path / "hf" / "train.parquet"))
    _refused(_import(tmp_path, tmp_path / "hf"), tmp_path, "train.parquet", "200,001 rows")
