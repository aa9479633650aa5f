"""``goldeval import``: CSV, Hugging Face folders, promptfoo tests, DeepEval goldens (issue 17)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from goldeval.cli.importers import import_dataset
from goldeval.cli.importers.bounded import input_lines
from goldeval.core.errors import GoldevalError
from goldeval.dataset.rows import load_dataset
from goldeval.graders.registry import builtin_graders
from tests.helpers import run_cli


def _load(folder: Path):  # type: ignore[no-untyped-def]
    return load_dataset(
        folder, project_root=folder.parent.parent, graders=builtin_graders(), require_fixtures=True
    )


def _rows(folder: Path) -> list[dict]:
    (rows_file,) = folder.glob("*.jsonl")
    return [json.loads(line) for line in rows_file.read_text().splitlines()]


def _nothing_written(golden: Path) -> bool:
    return not golden.exists() or list(golden.iterdir()) == []


# --------------------------------------------------------------------------- CSV

CSV = (
    "id,question,expected_output,tags,expect.contains_any,channel\n"
    'ship,How long does shipping take?,"Shipping takes 3-5 days, usually.",faq smoke,,web\n'
    'refund,Can I get a refund?,Yes within 30 days.,faq,"[""30 days""]",email\n'
    ",Say thanks,,,,\n"
)


def test_csv_rows_fixtures_and_report(tmp_path: Path) -> None:
    src = tmp_path / "faq.csv"
    src.write_text(CSV, encoding="utf-8")
    with pytest.raises(GoldevalError, match=r"faq.csv:4: expect: no grader checks this row"):
        # the third row has neither an answer nor expect columns: no grader would grade it
        import_dataset(src, "faq", tmp_path / "golden")
    assert not (tmp_path / "golden").exists()  # not even the golden/ folder it had to create

    src.write_text(CSV.replace(",Say thanks,,,,", ",Say thanks,thank you,,,"), encoding="utf-8")
    report = import_dataset(src, "faq", tmp_path / "golden")
    folder = tmp_path / "golden" / "faq"
    rows = _rows(folder)
    assert [r["id"] for r in rows] == ["ship", "refund", "row-0003"]
    assert rows[0]["prompt"] == "How long does shipping take?"
    assert rows[0]["expect"] == {"equals": "Shipping takes 3-5 days, usually.", "normalize": "all"}
    assert rows[0]["tags"] == ["faq", "smoke"] and rows[0]["metadata"] == {"channel": "web"}
    assert rows[1]["expect"] == {"contains_any": ["30 days"]}  # expect.* columns win
    assert (folder / "fixtures" / "ship.out.md").read_text() == "Shipping takes 3-5 days, usually."
    ds = _load(folder)
    assert ds.manifest.version == "faq-v1" and len(ds.cases) == 3
    text = "\n".join(report.lines())
    assert "question -> prompt: 3 row(s)" in text
    assert "expected_output -> fixtures/<id>.out.md: 3 row(s)" in text
    assert "channel -> metadata.channel: 2 row(s)" in text


def test_csv_bad_row_names_file_line_and_field_and_writes_nothing(tmp_path: Path) -> None:
    src = tmp_path / "bad.csv"
    src.write_text("id,prompt,expected\na,hi,hello\nb,,bye\n", encoding="utf-8")
    with pytest.raises(GoldevalError) as info:
        import_dataset(src, "bad", tmp_path / "golden")
    assert f"{src}:3: no prompt" in str(info.value)
    assert "add a prompt column" in str(info.value)
    assert _nothing_written(tmp_path / "golden")

    src.write_text('id,prompt,expected\na,"hi,hello,extra\n', encoding="utf-8")
    with pytest.raises(GoldevalError):
        import_dataset(src, "bad", tmp_path / "golden")
    src.write_text("id,prompt,expected\na,hi,hello,surplus\n", encoding="utf-8")
    with pytest.raises(GoldevalError, match=r"bad.csv:2: more values than header columns"):
        import_dataset(src, "bad", tmp_path / "golden")
    assert _nothing_written(tmp_path / "golden")


def test_source_lines_are_read_one_at_a_time(tmp_path: Path) -> None:
    """CSV and JSON-lines imports read their file a line at a time (a 212 MB CSV peaked at
    1.3 GB read whole; benchmarks/bench_import_memory.py): a line added after the first was
    read is still seen, which a whole read cannot do."""
    src = tmp_path / "rows.csv"
    src.write_bytes(b"\xef\xbb\xbfid,prompt\r\n")
    lines = input_lines(src, encoding="utf-8-sig")
    assert next(lines) == (1, "id,prompt\r\n")
    with src.open("ab") as fh:
        fh.write(b"a,hello\n")
    assert list(lines) == [(2, "a,hello\n")]


def test_bad_bytes_are_named_at_their_line_and_byte(tmp_path: Path) -> None:
    src = tmp_path / "rows.csv"
    src.write_bytes(b"id,prompt\na,hello\nb,caf\xe9\n")
    with pytest.raises(GoldevalError) as caught:
        import_dataset(src, "ds", tmp_path / "golden")
    assert f"{src}:3" in str(caught.value) and "at byte 23" in str(caught.value), caught.value


def test_csv_with_carriage_returns_alone_ends_lines(tmp_path: Path) -> None:
    src = tmp_path / "rows.csv"
    src.write_bytes(b'id,prompt,answer\rship,How long?,"3-5\rdays"\rrefund,Refund?,Yes\r')
    import_dataset(src, "ds", tmp_path / "golden")
    rows = _rows(tmp_path / "golden" / "ds")
    assert [r["id"] for r in rows] == ["ship", "refund"]
    fixture = tmp_path / "golden" / "ds" / "fixtures" / "ship.out.md"
    assert fixture.read_bytes() == b"3-5\rdays"


def test_existing_dataset_is_never_overwritten(tmp_path: Path) -> None:
    src = tmp_path / "faq.csv"
    src.write_text("prompt,answer\nhi,hello\n", encoding="utf-8")
    (tmp_path / "golden" / "faq").mkdir(parents=True)
    (tmp_path / "golden" / "faq" / "keep.txt").write_text("mine")
    with pytest.raises(GoldevalError, match="exists already"):
        import_dataset(src, "faq", tmp_path / "golden")
    assert (tmp_path / "golden" / "faq" / "keep.txt").read_text() == "mine"


# --------------------------------------------------------------------------- Hugging Face


def _hf_dict(folder: Path) -> None:
    """What ``DatasetDict.save_to_disk`` + ``to_json`` leave: splits with JSON lines files."""
    (folder / "train").mkdir(parents=True)
    (folder / "test").mkdir()
    (folder / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    (folder / "train" / "dataset_info.json").write_text("{}")
    (folder / "train" / "data.jsonl").write_text(
        json.dumps({"question": "2+2?", "answer": "4", "difficulty": 1})
        + "\n"
        + json.dumps({"question": "3+3?", "answer": "6", "difficulty": 2})
        + "\n"
    )
    (folder / "test" / "data.jsonl").write_text(
        json.dumps({"question": "5+5?", "answer": "10", "difficulty": 1}) + "\n"
    )


def test_hugging_face_folder_with_splits(tmp_path: Path) -> None:
    _hf_dict(tmp_path / "hf")
    report = import_dataset(tmp_path / "hf", "math", tmp_path / "golden")
    assert report.fmt == "hf"
    rows = _rows(tmp_path / "golden" / "math")
    assert [(r["prompt"], r["tags"]) for r in rows] == [
        ("2+2?", ["train"]),
        ("3+3?", ["train"]),
        ("5+5?", ["test"]),
    ]
    assert rows[0]["metadata"] == {"difficulty": 1}
    _load(tmp_path / "golden" / "math")
    only = import_dataset(tmp_path / "hf", "mathtest", tmp_path / "golden", split="test")
    assert only.rows == 1
    with pytest.raises(GoldevalError, match="no split 'dev'"):
        import_dataset(tmp_path / "hf", "mathdev", tmp_path / "golden", split="dev")


def _save_to_disk(folder: Path, records: list[dict]) -> None:
    """What ``datasets.Dataset.save_to_disk`` writes: an Arrow IPC stream plus two JSON files."""
    pa = pytest.importorskip("pyarrow")
    folder.mkdir(parents=True)
    table = pa.Table.from_pylist(records)
    with pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as sink:
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
    (folder / "dataset_info.json").write_text("{}")
    (folder / "state.json").write_text(
        '{"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}'
    )


def test_hugging_face_folder_saved_to_disk_as_arrow(tmp_path: Path) -> None:
    hf = tmp_path / "hf"
    _save_to_disk(
        hf / "train", [{"question": "2+2?", "answer": "4"}, {"question": "3+3?", "answer": "6"}]
    )
    _save_to_disk(hf / "test", [{"question": "5+5?", "answer": "10"}])
    (hf / "dataset_dict.json").write_text('{"splits": ["train", "test"]}')
    report = import_dataset(hf, "arrowmath", tmp_path / "golden")
    assert report.fmt == "hf" and report.rows == 3
    rows = _rows(tmp_path / "golden" / "arrowmath")
    assert sorted((r["prompt"], r["tags"][0]) for r in rows) == [
        ("2+2?", "train"),
        ("3+3?", "train"),
        ("5+5?", "test"),
    ]
    _load(tmp_path / "golden" / "arrowmath")


def test_hugging_face_parquet_file(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    hf = tmp_path / "hf"
    hf.mkdir()
    pq.write_table(
        pa.Table.from_pylist([{"question": "q?", "answer": "a"}]), str(hf / "train.parquet")
    )
    assert import_dataset(hf, "pq", tmp_path / "golden").rows == 1


def test_hugging_face_arrow_without_pyarrow_says_what_to_do(tmp_path: Path) -> None:
    # A process where pyarrow cannot be imported (as in an install without it).
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "dataset_info.json").write_text("{}")
    (hf / "state.json").write_text("{}")
    (hf / "data-00000-of-00001.arrow").write_bytes(b"\xff\xff\xff\xff")
    code = (
        "import sys; sys.modules['pyarrow'] = None; sys.modules['pyarrow.parquet'] = None\n"
        "from pathlib import Path\n"
        "from goldeval.cli.importers import import_dataset\n"
        "from goldeval.core.errors import GoldevalError\n"
        "try:\n"
        f"    import_dataset(Path({str(hf)!r}), 'arrow', Path({str(tmp_path / 'golden')!r}))\n"
        "except GoldevalError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "needs pyarrow" in done.stdout and "to_json" in done.stdout
    assert _nothing_written(tmp_path / "golden" / "arrow")


def test_hugging_face_bad_json_line(tmp_path: Path) -> None:
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "rows.jsonl").write_text('{"prompt": "a", "answer": "b"}\n{"prompt": \n')
    with pytest.raises(GoldevalError, match=r"rows.jsonl:2: not valid JSON"):
        import_dataset(hf, "broken", tmp_path / "golden")


# --------------------------------------------------------------------------- promptfoo

PROMPTFOO = """\
prompts:
  - "You are a support bot. Answer: {{question}}"
tests:
  - description: Shipping time
    vars:
      question: How long does shipping take?
    assert:
      - type: contains
        value: days
      - type: icontains
        value: SHIPPING
      - type: llm-rubric
        value: is polite
  - description: Order status JSON
    vars:
      question: Status of order 7?
    assert:
      - type: is-json
      - type: not-contains
        value: error
  - vars:
      question: Say thanks
    assert:
      - type: equals
        value: thank you
"""


def test_promptfoo_config_maps_assertions_and_reports_what_was_dropped(tmp_path: Path) -> None:
    src = tmp_path / "promptfooconfig.yaml"
    src.write_text(PROMPTFOO, encoding="utf-8")
    report = import_dataset(src, "support", tmp_path / "golden")
    rows = _rows(tmp_path / "golden" / "support")
    assert rows[0]["id"] == "shipping-time"
    assert rows[0]["prompt"] == "You are a support bot. Answer: How long does shipping take?"
    assert rows[0]["expect"] == {"regex": ["days", "(?i)SHIPPING"]}
    assert rows[1]["expect"] == {"json_schema": {}, "not_regex": ["error"]}
    assert rows[2]["id"] == "row-0003" and rows[2]["expect"] == {"equals": "thank you"}
    assert rows[0]["metadata"]["vars"] == {"question": "How long does shipping take?"}
    text = "\n".join(report.lines())
    assert "assert llm-rubric (no goldeval grader" in text
    assert "1 row(s)" in text.split("assert llm-rubric")[1].splitlines()[0]
    assert "3 row(s) have no answer in the source" in text
    ds = load_dataset(
        tmp_path / "golden" / "support",
        project_root=tmp_path,
        graders=builtin_graders(),
        require_fixtures=False,
    )
    assert len(ds.cases) == 3


def test_promptfoo_missing_var_names_the_line(tmp_path: Path) -> None:
    src = tmp_path / "tests.yaml"
    src.write_text(
        PROMPTFOO.replace("      question: Status of order 7?", "      order: 7"), encoding="utf-8"
    )
    with pytest.raises(GoldevalError) as info:
        import_dataset(src, "support", tmp_path / "golden")
    assert f"{src}:14: vars.question: the prompt uses it" in str(info.value)
    src.write_text(
        "tests:\n  - vars: {question: hi}\n    assert: [{type: javascript, "
        "value: 'output.length > 3'}]\n",
        encoding="utf-8",
    )
    with pytest.raises(GoldevalError, match=r"tests.yaml:2: assert: no assertion"):
        import_dataset(src, "support", tmp_path / "golden")
    src.write_text("tests:\n  - vars: [oops\n", encoding="utf-8")
    with pytest.raises(GoldevalError, match=r"tests.yaml:\d+: not valid YAML"):
        import_dataset(src, "support", tmp_path / "golden")
    assert _nothing_written(tmp_path / "golden" / "support")


# --------------------------------------------------------------------------- DeepEval

GOLDENS = [
    {
        "input": "Weather in Paris?",
        "expected_output": "Sunny",
        "expected_tools": [{"name": "get_weather", "input_parameters": {"city": "Paris"}}],
        "tools_called": [{"name": "get_weather", "input_parameters": {"city": "Paris"}}],
        "actual_output": "Sunny",
        "retrieval_context": ["weather doc"],
    },
    {
        "input": "Capital of France?",
        "expected_output": "Paris",
        "comments": "easy",
        "custom_column_key": "x",
    },
]


def test_deepeval_goldens_with_tools_replay_in_fixture_mode(tmp_path: Path) -> None:
    src = tmp_path / "goldens.json"
    src.write_text(json.dumps(GOLDENS, indent=2), encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    report = import_dataset(src, "agent", tmp_path / "golden")
    folder = tmp_path / "golden" / "agent"
    rows = _rows(folder)
    assert rows[0]["expect"]["tool_calls"] == [
        {"name": "get_weather", "arguments": {"city": "Paris"}}
    ]
    assert rows[0]["metadata"] == {"retrieval_context": ["weather doc"]}
    sidecar = json.loads((folder / "fixtures" / "row-0001.out.json").read_text())
    assert sidecar == {"toolCalls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
    assert "custom_column_key (not a golden field): 1 row(s)" in "\n".join(report.lines())
    # the imported dataset runs as it is, in fixture mode: the tool call is replayed
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--golden=agent-v1", "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


def test_deepeval_bad_golden_names_its_line(tmp_path: Path) -> None:
    src = tmp_path / "goldens.json"
    bad = [GOLDENS[1], {"expected_output": "no input"}]
    src.write_text(json.dumps(bad, indent=2), encoding="utf-8")
    with pytest.raises(GoldevalError, match=r"goldens.json:8: input: missing or not text"):
        import_dataset(src, "agent", tmp_path / "golden")
    src.write_text('[{"input": "a", "expected_output": "b"},\n {"input": }]', encoding="utf-8")
    with pytest.raises(GoldevalError, match=r"goldens.json:2: not valid JSON"):
        import_dataset(src, "agent", tmp_path / "golden")
    assert _nothing_written(tmp_path / "golden")


# --------------------------------------------------------------------------- the command


def test_cli_prints_the_report_and_fails_cleanly(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "faq.csv").write_text("prompt,answer\nhi,hello\n", encoding="utf-8")
    ok = run_cli("import", "faq.csv", "--name", "faq", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "imported 1 row(s)" in ok.stdout and "prompt -> prompt: 1 row(s)" in ok.stdout
    assert (tmp_path / "golden" / "faq" / "faq.jsonl").is_file()
    (tmp_path / "bad.csv").write_text("prompt,answer\n,hello\n", encoding="utf-8")
    bad = run_cli("import", "bad.csv", "--name", "bad", cwd=tmp_path)
    assert bad.returncode == 4
    assert "bad.csv:2: no prompt" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "golden" / "bad").exists()
    assert [p.name for p in (tmp_path / "golden").iterdir()] == ["faq"]
