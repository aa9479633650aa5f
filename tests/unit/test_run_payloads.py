"""The controller's per-attempt data path: report payloads, the collector, light cases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from goldeval.core.models import AttemptRecord, ContractResult, RetrievalResult, Status
from goldeval.core.record_text import RUN_FIELDS, content_offset, split_parts
from goldeval.dataset.case import GoldenCase
from goldeval.pipeline.attempt import case_facts, case_info
from goldeval.providers.base import ProviderRequest
from goldeval.results.attempt_payloads import attempt_payload, without_raw_text
from goldeval.results.metrics import compute_metrics
from goldeval.results.run_document import LightCases, RunCollector, write_run_json


def _case(case_id: str, **expect: Any) -> GoldenCase:
    return GoldenCase(id=case_id, prompt=f"prompt of {case_id}", expect=expect, line=7)


@pytest.mark.parametrize(
    "case",
    [
        _case("api-1", rag=["a"]),
        _case("refuse-1", refuse=True),
        _case("hallucinate-x", red=True, layer="api"),
        GoldenCase(id="t", prompt="p", expect={}, tags=("smoke", "api"), line=0),
    ],
    ids=lambda c: c.id,
)
def test_case_facts_is_case_info_dump(case: GoldenCase) -> None:
    assert case_facts(case) == case_info(case).dump()


def _record(case_id: str, index: int, status: Status, **extra: Any) -> AttemptRecord:
    return AttemptRecord(case_id=case_id, index=index, status=status, **extra)


def test_payload_is_one_json_string_equal_to_the_dump() -> None:
    record = _record(
        "c",
        2,
        Status.FAIL,
        model="m",
        output="ответ",
        contract=ContractResult(passed=False, violations=["x"]),
        duration_ms=5,
    )
    payload = attempt_payload(record, keep_passing_output=False)
    assert payload["caseId"] == "c" and payload["index"] == 2 and payload["model"] == "m"
    assert payload["status"] == "FAIL"
    assert all(not isinstance(v, (dict, list)) for v in payload.values())  # flat, cheap to send
    assert json.loads(payload["record"]) == record.dump()  # a FAIL keeps its answer text


def test_passing_answer_text_travels_only_when_kept() -> None:
    record = _record("c", 1, Status.PASS, output="text")
    assert "output" not in json.loads(attempt_payload(record, False)["record"])
    assert json.loads(attempt_payload(record, True)["record"])["output"] == "text"


@pytest.mark.parametrize(
    "record",
    [
        _record("c", 1, Status.PASS, duration_ms=3, tries=2),
        _record(
            "c",
            2,
            Status.FAIL,
            model="m",
            output="ответ",
            contract=ContractResult(passed=False, violations=['x, "y"', "}"]),
            retrieval=RetrievalResult(applicable=True, passed=False, retrieved=["a"]),
        ),
        _record("d", 3, Status.ERROR, error_kind="PROVIDER_ERROR", error_message='{"index":9}'),
    ],
    ids=["pass", "fail-with-model", "error"],
)
def test_payload_record_splits_into_run_fields_and_content_without_a_parse(
    record: AttemptRecord,
) -> None:
    """The store's split: the run fields lead the record text and ``contentAt`` says where
    the content starts; both halves are exactly what splitting the parsed record gives."""
    payload = attempt_payload(record, keep_passing_output=True)
    text, at = payload["record"], payload["contentAt"]
    parsed = json.loads(text)
    assert parsed == record.dump()
    assert at > 0
    parts = split_parts(text, at)
    assert parts is not None
    run_fields, content = parts
    assert run_fields == {k: v for k, v in parsed.items() if k in RUN_FIELDS}
    assert json.loads(content) == {k: v for k, v in parsed.items() if k not in RUN_FIELDS}
    assert list(parsed)[: len(run_fields)] == list(run_fields)  # run fields first


def test_attempt_record_declares_its_run_fields_first() -> None:
    fields = AttemptRecord.model_fields
    run = [n for n, f in fields.items() if f.alias in RUN_FIELDS or n in RUN_FIELDS]
    assert len(run) == 6 and list(fields)[: len(run)] == run


def test_record_text_offsets_refuse_what_does_not_match() -> None:
    text = '{"caseId":"c","index":1,"contract":{"passed":true}}'
    at = content_offset(text, '{"caseId":"c","index":1}')
    assert at == 24
    assert split_parts(text, at) == ({"caseId": "c", "index": 1}, '{"contract":{"passed":true}}')
    # no content: the run fields are the whole record
    assert content_offset('{"caseId":"c"}', '{"caseId":"c"}') == 14
    assert split_parts('{"caseId":"c"}', 14) == ({"caseId": "c"}, "{}")
    # run fields that are not the record's start (another encoder's spelling): 0, parse it
    assert content_offset(text, '{"caseId":"c","index":2}') == 0
    assert content_offset(text, '{"caseId":"c"') == 0
    assert content_offset(text, "{}") == 0
    # an offset inside a value, past a content field, out of range: the caller parses instead
    assert split_parts(text, 5) is None
    late = '{"caseId":"c","contract":{"passed":true},"index":1}'
    assert split_parts(late, late.index('"index"')) is None  # content before the offset
    assert split_parts(text, len(text) + 3) is None
    assert split_parts(text, 0) is None


def test_without_raw_text() -> None:
    plain = json.dumps({"caseId": "c", "status": "PASS"})
    assert without_raw_text(plain) is plain  # nothing to drop: no parse, same string
    raw = _record("c", 1, Status.FAIL, output="o", judge_output="j").model_dump_json(
        by_alias=True, exclude_none=True
    )
    assert json.loads(without_raw_text(raw)) == _record("c", 1, Status.FAIL).dump()
    # a value that merely looks like the key is kept
    tricky = json.dumps({"caseId": "c", "errorMessage": "output"})
    assert json.loads(without_raw_text(tricky)) == json.loads(tricky)


def _facts(case_id: str, line: int) -> dict[str, Any]:
    return {"caseId": case_id, "kinds": ["GENERATION"], "prompt": "p", "tags": [], "line": line}


def test_collector_takes_case_facts_from_the_dataset_and_orders_by_line() -> None:
    lines = {"b": 1, "a": 2}
    asked: list[str] = []

    def info(case_id: str) -> dict[str, Any]:
        asked.append(case_id)
        return _facts(case_id, lines[case_id])

    collector = RunCollector(case_info=info, case_line=lines.get)
    for case_id in ("a", "b"):
        collector.add(attempt_payload(_record(case_id, 1, Status.PASS), True))
    assert collector.case_ids() == ["b", "a"]
    assert asked == []  # ordering needs only the line
    cases = list(collector.iter_cases())
    assert [c["caseId"] for c in cases] == ["b", "a"]
    assert cases[0]["metadata"] == {"prompt": "p"}
    # the store's form (a record dict with its case facts) still works
    collector.add({"attempt": _record("z", 1, Status.FAIL).dump(), "case": _facts("z", 0)})
    assert collector.case_ids()[0] == "z"


def test_release_drops_rolled_up_attempts_per_model() -> None:
    collector = RunCollector(case_info=lambda c: _facts(c, 0))
    for model in ("m1", "m2"):
        for index in (1, 2):
            collector.add(attempt_payload(_record("c", index, Status.PASS, model=model), True))
    assert len(collector) == 4
    first = list(collector.iter_cases("m1", release=True))
    assert [a["index"] for a in first[0]["attempts"]] == [1, 2]
    assert len(collector) == 2  # m1's attempts are gone, m2's are still there
    assert collector.models() == ["m2"]
    second = list(collector.iter_cases("m2", release=True))
    assert {a["model"] for a in second[0]["attempts"]} == {"m2"}
    assert len(collector) == 0 and list(collector.iter_cases()) == []


def _rolled(case_id: str, statuses: list[Status], retrieval: bool = True) -> dict[str, Any]:
    collector = RunCollector(case_info=lambda c: _facts(c, 0))
    for n, status in enumerate(statuses, 1):
        extra: dict[str, Any] = {"duration_ms": 4}
        if retrieval:
            extra["retrieval"] = RetrievalResult(
                applicable=True, passed=True, retrieved=["x", "y"], expected=["x", "y"]
            )
        collector.add(attempt_payload(_record(case_id, n, status, **extra), True))
    return next(collector.iter_cases())


def test_light_cases_keep_what_metrics_and_reports_read_and_share_the_rest() -> None:
    full = [_rolled(f"p{n}", [Status.PASS, Status.PASS]) for n in range(3)]
    full.append(_rolled("f", [Status.PASS, Status.FAIL]))
    full.append(_rolled("r", [Status.PASS], retrieval=False))
    lighten = LightCases().light
    light = [lighten(c) for c in full]

    # Every rate is the same from light cases (the run's latency and token figures are
    # computed from the full cases while building; light cases carry no per-attempt timings).
    def rates(cases: list[dict[str, Any]]) -> dict[str, Any]:
        return {k: v for k, v in compute_metrics(cases).items() if k not in ("latency", "tokens")}

    assert rates(light) == rates(full)
    assert light[3] == {k: v for k, v in full[3].items()}  # a non-passing case is kept whole
    p0, p1 = light[0], light[1]
    assert p0["caseId"] == "p0" and p0["durationMs"] == 8
    assert p0["retrieval"] == {"applicable": True, "passed": True}
    for key in ("kinds", "successRate", "attempts", "retrieval"):
        assert p0[key] is p1[key]  # one object for every passing case that looks alike
    assert "retrieval" not in light[4]


def test_system_prompt_is_built_only_when_read() -> None:
    built: list[int] = []

    def build() -> str:
        built.append(1)
        return "system prompt"

    request = ProviderRequest(
        case=_case("c"), attempt=1, system=build, user="u", model=None, retrieved=[]
    )
    assert built == []
    assert request.system == "system prompt" and request.system == "system prompt"
    assert built == [1]
    given = ProviderRequest(
        case=_case("c"), attempt=1, system="s", user="u", model=None, retrieved=[]
    )
    assert given.system == "s" and given.options == {}


@pytest.mark.parametrize("chunk", [1, 5, 7, 64, 1 << 20])
@pytest.mark.parametrize("count", [0, 1, 3, 40])
def test_run_json_splices_the_case_lines_in_as_the_cases_array(
    tmp_path: Path, count: int, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run.json copies the cases file in pieces (not line by line): whatever the piece size,
    the document reads back with every case, in order, and the layout of one case a line."""
    import goldeval.results.run_document as run_document

    cases = [{"caseId": f"c{i}", "text": 'é\n"x"' * (i % 4), "n": i} for i in range(count)]
    cases_file = tmp_path / "cases.jsonl"
    cases_file.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases))
    splice = run_document._splice_lines
    monkeypatch.setattr(run_document, "_splice_lines", lambda lines, out: splice(lines, out, chunk))
    run = {"runId": "r", "cases": [], "metrics": {"a": 1}}
    write_run_json(tmp_path / "run.json", run, cases_file)
    text = (tmp_path / "run.json").read_text(encoding="utf-8")
    assert json.loads(text) == {**run, "cases": cases}
    case_lines = [ln for ln in text.splitlines() if ln.startswith('    {"caseId"')]
    assert len(case_lines) == count
    assert ('"cases": []' in text) == (count == 0)


@pytest.mark.parametrize("chunk", [1, 2, 3, 4, 8, 1 << 16])
@pytest.mark.parametrize(
    "lines",
    [
        [],
        ["a"],
        ["ab", "c"],
        ["x" * 50],
        ["x" * 50, "y", "z" * 9],
        ["1234", "5678"],
        ["é" * 20, "ü"],
    ],
)
@pytest.mark.parametrize("last_newline", [True, False])
def test_splicing_lines_is_the_same_whatever_the_piece_boundaries(
    chunk: int, lines: list[str], last_newline: bool
) -> None:
    """Lines longer than a piece, pieces that end exactly on a newline, a last line without
    its newline: the array items come out as if written line by line."""
    import io

    from goldeval.results.run_document import _splice_lines

    text = "\n".join(lines) + ("\n" if lines and last_newline else "")
    out = io.StringIO()
    any_line = _splice_lines(io.StringIO(text), out, chunk)
    assert any_line == bool(lines)
    assert out.getvalue() == "".join(
        ("\n    " if i == 0 else ",\n    ") + line for i, line in enumerate(lines)
    )
