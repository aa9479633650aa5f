"""Issue 31: ``goldeval calibrate`` passes only a calibration that measured enough agreement.

Exit 0 only when n reaches the manifest's ``calibration.minN`` and the lower end of the
agreement's 95% interval reaches ``minLowerBound`` (defaults: 20 rows, kappa 0.2); a judge that
produced nothing parseable exits 4; below the bar exits 1 with the disagreements listed; live
judge calls that failed exit 75 (retryable) or 4. Canned judge answers are the rows'
``judgeOutput``; live ones come from the real fake model server on 127.0.0.1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goldeval.core.errors import ProviderError
from goldeval.core.stats import cohen_kappa_interval
from goldeval.dataset.manifest import CalibrationPolicy
from goldeval.judge.calibration import (
    CalibrationOutcome,
    CalibrationRow,
    calibrate,
    judge_calibration,
)
from goldeval.testing.llm_server import FakeLLMServer, Fault, Reply
from goldeval.verdict.calibration import calibration_exit
from tests.helpers import run_cli

CORPUS = "golden/generation/calibration.jsonl"
MANIFEST = "golden/generation/dataset.yaml"
ACCEPT_REPLY = '{"decision": "ACCEPT", "score": 0.9, "reasons": ["ok"]}'
REJECT_REPLY = '{"decision": "REJECT", "score": 0.1, "reasons": ["no"]}'


def _rewrite_judge(project: Path, reply: object) -> None:
    """Every row's recorded judge reply replaced (a function of the row, or one text)."""
    path = project / CORPUS
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            lines.append(line)
            continue
        row = json.loads(line)
        row["judgeOutput"] = reply(row) if callable(reply) else reply
        lines.append(json.dumps(row, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _report(project: Path) -> dict[str, object]:
    return json.loads((project / "cal/calibration/report.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def _calibrate(project: Path, *extra: str) -> tuple[int, str]:
    proc = run_cli("calibrate", "--golden=generation-v1", "--out", "cal", *extra, cwd=project)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout + proc.stderr


def test_the_projects_own_corpus_passes_the_default_bar(golden_project: Path) -> None:
    code, out = _calibrate(golden_project)
    assert code == 0, out
    assert "goldeval decision: exit 0 — calibration passed: kappa lower bound 0.379" in out
    verdict = _report(golden_project)["verdict"]
    assert verdict["outcome"] == "PASSED"  # type: ignore[index]
    assert verdict["policy"] == {"minN": 20, "agreement": "kappa", "minLowerBound": 0.2}  # type: ignore[index]
    assert "## Verdict" in (golden_project / "cal/calibration/report.md").read_text()


def test_a_judge_that_answered_junk_for_every_row_exits_4(golden_project: Path) -> None:
    _rewrite_judge(golden_project, "I am not sure what you want me to do here.")
    code, out = _calibrate(golden_project)
    assert code == 4, out
    assert "the judge produced nothing parseable: 0 of 24 rows scored (24 PENDING)" in out
    assert _report(golden_project)["exitDecision"] == {  # the report says so too
        "code": 4,
        "reason": "calibration measured nothing: the judge produced nothing parseable: "
        "0 of 24 rows scored (24 PENDING)",
    }


def test_low_agreement_exits_1_listing_the_disagreements(golden_project: Path) -> None:
    # The judge says the opposite of the human on every third row.
    def contrary(row: dict[str, str]) -> str:
        agree = int(row["id"].rsplit("-", 1)[1]) % 3 != 0
        accept = (row["humanLabel"] == "ACCEPT") == agree
        return ACCEPT_REPLY if accept else REJECT_REPLY

    _rewrite_judge(golden_project, contrary)
    code, out = _calibrate(golden_project)
    assert code == 1, out
    assert "calibration below the bar: kappa lower bound" in out
    disagreements = [ln for ln in out.splitlines() if ln.startswith("  disagreement ")]
    assert len(disagreements) == 8, out  # gen-cal-03, 06, ..., 24
    assert "  disagreement gen-cal-03 (" in out and "human ACCEPT, judge REJECT" in out


def test_the_manifests_bar_is_the_one_applied(golden_project: Path) -> None:
    manifest = golden_project / MANIFEST
    original = manifest.read_text(encoding="utf-8")
    manifest.write_text(original + "calibration:\n  minN: 30\n", encoding="utf-8")
    code, out = _calibrate(golden_project)
    assert code == 1, out
    assert "n=22 rows scored, fewer than minN 30" in out

    bar = "calibration:\n  agreement: accuracy\n  minLowerBound: 0.7\n"
    manifest.write_text(original + bar, encoding="utf-8")
    code, out = _calibrate(golden_project)
    assert code == 1, out  # accuracy 19/22, Wilson lower bound 0.667
    assert "accuracy lower bound 0.667 (95% interval, n=22) below minLowerBound 0.7" in out

    manifest.write_text(original + "calibration:\n  minN: 0\n", encoding="utf-8")
    code, out = _calibrate(golden_project)
    assert code == 4 and "minN" in out, out  # a bad bar is a usage error naming the field


def test_live_judge_answering_junk_exits_4(golden_project: Path) -> None:
    with FakeLLMServer() as server:
        server.responder = lambda _request: Reply(content="Sure! Here is a poem instead.")
        code, out = _calibrate(
            golden_project, "--live", f"--base-url={server.base_url}", "--judge-model=judge-m"
        )
    assert code == 4, out
    assert "the judge produced nothing parseable" in out


def test_live_judge_that_rejects_everything_is_below_the_bar(golden_project: Path) -> None:
    with FakeLLMServer() as server:
        server.responder = lambda _request: Reply(content="VERDICT: НЕ ПРИНЯТО\n" + REJECT_REPLY)
        code, out = _calibrate(
            golden_project, "--live", f"--base-url={server.base_url}", "--judge-model=judge-m"
        )
    assert code == 1, out  # kappa 0: no agreement beyond chance
    assert "kappa lower bound" in out and "  disagreement gen-cal-01 (" in out


def test_live_judge_model_missing_exits_4_not_a_pass(golden_project: Path) -> None:
    with FakeLLMServer() as server:
        server.set_fault(Fault.model_not_found())
        code, out = _calibrate(
            golden_project, "--live", f"--base-url={server.base_url}", "--judge-model=nope"
        )
    assert code == 4, out
    assert "24 of 24 judge calls failed; check the judge model" in out


# -- the decision itself -------------------------------------------------------------------


def _rows(*labels: tuple[str, str]) -> list[CalibrationRow]:
    return [
        CalibrationRow(
            id=f"r{n}",
            case_id="c",
            human_label=human,
            judge_output=ACCEPT_REPLY if judge == "ACCEPT" else REJECT_REPLY,
        )
        for n, (human, judge) in enumerate(labels)
    ]


def test_kappa_interval_is_cohens_large_sample_interval() -> None:
    # Wikipedia's worked example (Cohen's kappa): 20 yes/yes, 5, 10, 15 no/no: kappa 0.4,
    # po 0.7, pe 0.5, SE sqrt(0.7 * 0.3 / (50 * 0.25)).
    low, high = cohen_kappa_interval(20, 5, 10, 15)  # type: ignore[misc]
    se = (0.7 * 0.3 / (50 * 0.25)) ** 0.5
    assert low == pytest.approx(0.4 - 1.959963984540054 * se)
    assert high == pytest.approx(0.4 + 1.959963984540054 * se)
    assert cohen_kappa_interval(0, 0, 0, 0) is None
    assert cohen_kappa_interval(5, 0, 0, 0) is None  # chance agreement 1: undefined
    assert cohen_kappa_interval(1, 0, 0, 1)[0] >= -1.0  # type: ignore[index]


def test_every_outcome_and_its_exit_code() -> None:
    good = _rows(*[("ACCEPT", "ACCEPT")] * 12, *[("REJECT", "REJECT")] * 12)
    verdict = judge_calibration(calibrate(good))
    assert verdict.outcome is CalibrationOutcome.PASSED
    assert calibration_exit(verdict).code == 0

    few = judge_calibration(calibrate(good[:10]))  # perfect, but n 10 < minN 20
    assert few.outcome is CalibrationOutcome.BELOW_BAR
    assert calibration_exit(few).code == 1

    one_class = _rows(*[("ACCEPT", "ACCEPT")] * 30)  # kappa undefined: never a pass
    assert judge_calibration(calibrate(one_class)).outcome is CalibrationOutcome.BELOW_BAR
    by_accuracy = CalibrationPolicy(agreement="accuracy", min_lower_bound=0.8)
    assert judge_calibration(calibrate(one_class), by_accuracy).outcome is (
        CalibrationOutcome.PASSED
    )

    unlabeled = [CalibrationRow(id="u", case_id="c", judge_output=ACCEPT_REPLY)]
    nothing = judge_calibration(calibrate(unlabeled))
    assert nothing.outcome is CalibrationOutcome.NOTHING_MEASURED
    assert "no row has a human label" in nothing.reason
    assert calibration_exit(nothing).code == 4

    def down(_row: CalibrationRow) -> ProviderError:
        return ProviderError("MODEL_UNAVAILABLE", "connection refused")

    failed = judge_calibration(calibrate(good, down, live=True))
    assert failed.outcome is CalibrationOutcome.JUDGE_FAILED and failed.retryable
    assert calibration_exit(failed).code == 75

    def raises(_row: CalibrationRow) -> ProviderError:
        raise ValueError("a bug in the judge function")

    broken = judge_calibration(calibrate(good, raises, live=True))
    assert calibration_exit(broken).code == 4  # no retry fixes a bug


def _edit_rows(project: Path, edit: object) -> None:
    """Every row of the corpus passed through ``edit(row)`` (which changes it in place)."""
    path = project / CORPUS
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            row = json.loads(line)
            edit(row)  # type: ignore[operator]
            line = json.dumps(row, ensure_ascii=False)
        lines.append(line)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_labels_of_cases_the_dataset_does_not_have_are_refused(golden_project: Path) -> None:
    # A corpus of another dataset: every label and judge reply agree, so it would score
    # kappa 1 — on answers this dataset's gate never judges.
    def elsewhere(row: dict[str, str]) -> None:
        row["caseId"] = "other-" + row["caseId"]
        row["judgeOutput"] = ACCEPT_REPLY if row["humanLabel"] == "ACCEPT" else REJECT_REPLY

    _edit_rows(golden_project, elsewhere)
    code, out = _calibrate(golden_project)
    assert code == 4, out
    assert "calibration.jsonl:2" in out and "caseId" in out, out
    assert "is not a case of dataset generation-v1" in out
    assert not (golden_project / "cal/calibration/report.json").exists()


def test_one_mistyped_case_id_is_refused_with_its_line(golden_project: Path) -> None:
    def typo(row: dict[str, str]) -> None:
        if row["id"] == "gen-cal-07":
            row["caseId"] += "x"

    _edit_rows(golden_project, typo)
    code, out = _calibrate(golden_project)
    assert code == 4, out
    assert "calibration.jsonl:8" in out and "'gen-cal-07'" in out, out


def test_the_report_names_the_dataset_it_measured(golden_project: Path) -> None:
    code, out = _calibrate(golden_project)
    assert code == 0, out
    dataset = _report(golden_project)["dataset"]
    assert dataset["id"] == "generation-v1"  # type: ignore[index]
    assert len(dataset["hash"]) == 64  # type: ignore[index]


def test_live_row_without_candidate_is_judged_on_the_recorded_answer(
    golden_project: Path,
) -> None:
    first: dict[str, str] = {}

    def drop_first_candidate(row: dict[str, str]) -> None:
        if row["id"] == "gen-cal-01":
            first.update(row)
            del row["candidate"]

    _edit_rows(golden_project, drop_first_candidate)
    fixture = golden_project / f"golden/generation/fixtures/{first['caseId']}.out.md"
    recorded = fixture.read_text(encoding="utf-8")
    with FakeLLMServer() as server:
        server.responder = lambda _request: Reply(content=ACCEPT_REPLY)
        code, out = _calibrate(
            golden_project, "--live", f"--base-url={server.base_url}", "--judge-model=judge-m"
        )
        bodies = [r.body.decode("utf-8") for r in server.requests]
    assert len(bodies) == 24, out
    marker = json.dumps(recorded.strip()[:60])[1:-1]  # as it appears inside the JSON body
    assert any(marker in body for body in bodies), out

    fixture.unlink()  # now the row has nothing to judge: refused before any judge call
    code, out, calls = _live_calibrate_accepting(golden_project)
    assert code == 4, out
    assert "calibration.jsonl:2" in out and "candidate" in out and "no recorded answer" in out
    assert calls == 0


def test_a_corpus_of_full_agreement_is_not_certainty() -> None:
    """Every item agreeing made Cohen's error 0 and the interval [1, 1]: two rows cleared a
    0.9 bar ("kappa lower bound 1.000, n=2"). The observed agreement's Wilson interval
    through kappa's formula is used there instead; Cohen's interval elsewhere."""
    from goldeval.core.stats import cohen_kappa_interval, wilson

    two = cohen_kappa_interval(1, 0, 0, 1)
    assert two is not None and two[0] < 0  # 2 of 2 says little
    twenty = cohen_kappa_interval(10, 0, 0, 10)
    low = wilson(20, 20)
    assert twenty is not None and low is not None
    assert twenty[0] == pytest.approx((low[0] - 0.5) / 0.5)
    assert twenty[0] < 0.7  # not the default bar's certainty


def test_copies_of_a_row_under_other_ids_are_refused(tmp_path: Path) -> None:
    """Ten copies of two agreeing rows made n=20 and cleared the default bar."""
    from goldeval.core.errors import DatasetError
    from goldeval.judge.calibration_rows import load_calibration

    row = {"caseId": "c1", "candidate": "Hello", "judgeOutput": "ACCEPT", "humanLabel": "ACCEPT"}
    path = tmp_path / "calibration.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"r{i}", **row}) + "\n" for i in range(3)), encoding="utf-8"
    )
    with pytest.raises(DatasetError, match="repeats line 1"):
        load_calibration(path)


@pytest.mark.parametrize(
    "changed",
    [
        {"candidate": "Hello "},
        {"candidate": "Hello\n"},
        {"candidate": "HELLO"},
        {"candidate": "Hel\u200blo"},
        {"judgeOutput": "ACCEPT\n"},
        {"candidate": "Hello\u00a0"},
    ],
)
def test_a_copy_with_spacing_case_or_invisible_characters_changed_is_refused(
    tmp_path: Path, changed: dict[str, str]
) -> None:
    """A copy with one trailing space doubled n and turned exit 1 into 0 (a probe)."""
    from goldeval.core.errors import DatasetError
    from goldeval.judge.calibration_rows import load_calibration

    row = {"caseId": "c1", "candidate": "Hello", "judgeOutput": "ACCEPT", "humanLabel": "ACCEPT"}
    path = tmp_path / "calibration.jsonl"
    copy = {**row, **changed}
    path.write_text(
        json.dumps({"id": "r1", **row}) + "\n" + json.dumps({"id": "r1-dup", **copy}) + "\n",
        encoding="utf-8",
    )
    with pytest.raises(DatasetError, match="repeats line 1"):
        load_calibration(path)


def test_rows_with_other_words_are_kept(tmp_path: Path) -> None:
    from goldeval.judge.calibration_rows import load_calibration

    row = {"caseId": "c1", "candidate": "Hello", "judgeOutput": "ACCEPT", "humanLabel": "ACCEPT"}
    other = {**row, "candidate": "Hello there"}
    path = tmp_path / "calibration.jsonl"
    path.write_text(
        json.dumps({"id": "r1", **row}) + "\n" + json.dumps({"id": "r2", **other}) + "\n",
        encoding="utf-8",
    )
    assert len(load_calibration(path)) == 2


def _live_calibrate_accepting(project: Path) -> tuple[int, str, int]:
    """``calibrate --live`` against a judge that accepts everything: code, output, calls."""
    with FakeLLMServer() as server:
        server.responder = lambda _request: Reply(content=ACCEPT_REPLY)
        code, out = _calibrate(
            project, "--live", f"--base-url={server.base_url}", "--judge-model=judge-m"
        )
        return code, out, len(server.requests)


@pytest.mark.parametrize("copy", ["no candidate", "other judgeOutput"])
def test_live_copies_of_one_judge_input_are_refused(golden_project: Path, copy: str) -> None:
    """A probe: ``--live`` re-judges the candidate (or the case's fixture) and never reads
    judgeOutput; rows differing only in judgeOutput, or candidate-less rows of one case,
    were 20 judge calls on 2 inputs and passed the n=20 bar (exit 0)."""

    def copy_of_the_first(row: dict[str, str]) -> None:
        if row["id"] == "gen-cal-02":
            lines = (golden_project / CORPUS).read_text(encoding="utf-8").splitlines()
            first = json.loads(next(x for x in lines if x.strip() and not x.startswith("#")))
            row["caseId"] = first["caseId"]
            row["humanLabel"] = first["humanLabel"]
            if copy == "no candidate":
                row.pop("candidate", None)
            else:
                row["candidate"] = first["candidate"]
            row["judgeOutput"] = "note: another text " + row["id"]
        if row["id"] == "gen-cal-01" and copy == "no candidate":
            row.pop("candidate", None)

    _edit_rows(golden_project, copy_of_the_first)
    code, out, calls = _live_calibrate_accepting(golden_project)
    assert code == 65 or code == 4, out
    assert "repeats line" in out and "does not read judgeOutput" in out, out
    assert calls == 0
    # canned, the rows differ in what was recorded of the judge: two judgments, as before
    if copy == "other judgeOutput":
        assert "repeats line" not in _calibrate(golden_project)[1]


def test_live_a_candidate_spelling_out_the_fixture_is_a_copy(golden_project: Path) -> None:
    """A second re-probe: a candidate-less row (judged on the case's fixture) beside a row
    whose candidate is that fixture's text were one judge input counted twice."""
    lines = (golden_project / CORPUS).read_text(encoding="utf-8").splitlines()
    first = json.loads(next(x for x in lines if x.strip() and not x.startswith("#")))
    fixture = golden_project / f"golden/generation/fixtures/{first['caseId']}.out.md"

    def spell_out(row: dict[str, str]) -> None:
        if row["id"] == first["id"]:
            row.pop("candidate", None)
        elif row["id"] == "gen-cal-02":
            row["caseId"] = first["caseId"]
            row["candidate"] = fixture.read_text(encoding="utf-8")

    _edit_rows(golden_project, spell_out)
    code, out, calls = _live_calibrate_accepting(golden_project)
    assert code in (4, 65), out
    assert "is judged on the same answer as row" in out and calls == 0, out
