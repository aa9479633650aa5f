"""The project's own judge-calibration corpora (golden/*/calibration.jsonl).

Each dataset ships 24 human-labelled candidates with a recorded (canned) judge reply. The canned
judge is deliberately imperfect: it misses some defects, is too strict on some correct answers,
gets fooled by one instruction aimed at the judge, and twice gives no usable decision. The
figures below were counted by hand from the rows and are pinned as exact fractions.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import pytest

from goldeval.judge.calibration import CalibrationRow, calibrate, load_calibration
from goldeval.judge.parse import JudgeDecision, parse_judge_output

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "golden"

CATEGORIES = ("correct", "contradictory", "unrelated", "instruction-to-the-judge")

A, R = JudgeDecision.ACCEPT, JudgeDecision.REJECT


@dataclass(frozen=True)
class Expected:
    """Hand-counted figures of one dataset's calibration corpus."""

    rows: str  # the dataset's rows file, for the caseId check
    total: int
    ta: int
    fa: int
    fr: int
    tr: int
    pending: int
    pending_ids: frozenset[str]
    disagreements: frozenset[tuple[str, JudgeDecision, JudgeDecision]]  # (id, human, judge)
    by_category: dict[str, tuple[int, int, int, int]]  # n, agree, disagree, skipped PENDING
    kappa: Fraction

    @property
    def f1(self) -> Fraction:
        return Fraction(2 * self.ta, 2 * self.ta + self.fa + self.fr)


EXPECTED = {
    "generation": Expected(
        rows="golden-generation.jsonl",
        total=24,
        ta=6,
        fa=2,
        fr=1,
        tr=13,
        pending=2,
        pending_ids=frozenset({"gen-cal-07", "gen-cal-22"}),
        disagreements=frozenset({("gen-cal-03", A, R), ("gen-cal-14", R, A), ("gen-cal-20", R, A)}),
        by_category={
            "contradictory": (7, 6, 1, 0),
            "correct": (7, 6, 1, 1),
            "instruction-to-the-judge": (4, 3, 1, 1),
            "unrelated": (4, 4, 0, 0),
        },
        kappa=Fraction(76, 109),
    ),
    "holdout": Expected(
        rows="golden-holdout.jsonl",
        total=24,
        ta=5,
        fa=1,
        fr=2,
        tr=14,
        pending=2,
        pending_ids=frozenset({"hol-cal-06", "hol-cal-14"}),
        disagreements=frozenset({("hol-cal-01", A, R), ("hol-cal-05", A, R), ("hol-cal-20", R, A)}),
        by_category={
            "contradictory": (5, 5, 0, 1),
            "correct": (7, 5, 2, 1),
            "instruction-to-the-judge": (5, 4, 1, 0),
            "unrelated": (5, 5, 0, 0),
        },
        kappa=Fraction(68, 101),
    ),
}

DATASETS = sorted(EXPECTED)


def _rows(name: str) -> list[CalibrationRow]:
    return load_calibration(GOLDEN / name / "calibration.jsonl")


def _case_ids(name: str) -> set[str]:
    ids: set[str] = set()
    text = (GOLDEN / name / EXPECTED[name].rows).read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            ids.add(json.loads(line)["id"])
    return ids


def _close(value: float | None, exact: Fraction) -> bool:
    return value is not None and value == pytest.approx(float(exact), rel=1e-12, abs=0.0)


@pytest.mark.parametrize("name", DATASETS)
def test_file_loads_with_enough_rows(name: str) -> None:
    rows = _rows(name)
    assert len(rows) >= 20
    assert len(rows) == EXPECTED[name].total
    assert all(row.human_label in (A, R) for row in rows)
    assert all(row.judge_output and row.judge_output.strip() for row in rows)
    assert all(row.note and row.note.strip() for row in rows)


@pytest.mark.parametrize("name", DATASETS)
def test_all_four_categories_with_at_least_three_rows(name: str) -> None:
    counts = Counter(row.category for row in _rows(name))
    assert set(counts) == set(CATEGORIES)
    assert all(counts[category] >= 3 for category in CATEGORIES), counts


@pytest.mark.parametrize("name", DATASETS)
def test_labels_follow_the_category(name: str) -> None:
    for row in _rows(name):
        expected = A if row.category == "correct" else R
        assert row.human_label is expected, row.id


@pytest.mark.parametrize("name", DATASETS)
def test_every_case_id_is_a_row_of_the_dataset(name: str) -> None:
    known = _case_ids(name)
    unknown = {row.id: row.case_id for row in _rows(name) if row.case_id not in known}
    assert not unknown


@pytest.mark.parametrize("name", DATASETS)
def test_every_row_has_a_candidate(name: str) -> None:
    rows = _rows(name)
    rejects = [row for row in rows if row.human_label is R]
    assert rejects
    assert all(row.candidate and row.candidate.strip() for row in rejects)
    assert all(row.candidate and row.candidate.strip() for row in rows)


@pytest.mark.parametrize("name", DATASETS)
def test_canned_judge_is_realistic(name: str) -> None:
    """Several reply formats, and some rows the parser leaves PENDING."""
    rows = _rows(name)
    outputs = [row.judge_output or "" for row in rows]
    assert any(o.startswith("VERDICT: ПРИНЯТО") for o in outputs)
    assert any(o.startswith("VERDICT: НЕ ПРИНЯТО") for o in outputs)
    assert any(o.startswith(("VERDICT: ACCEPTED", "VERDICT: REJECTED")) for o in outputs)
    assert any(o.startswith("{") for o in outputs), "a JSON-only reply"
    assert any("VERDICT:" not in o and "{" not in o for o in outputs), "a prose-only reply"
    pending = {
        row.id
        for row in rows
        if parse_judge_output(row.judge_output).decision is JudgeDecision.PENDING
    }
    assert pending == EXPECTED[name].pending_ids


@pytest.mark.parametrize("name", DATASETS)
def test_calibrate_canned_figures(name: str) -> None:
    exp = EXPECTED[name]
    ta, fa, fr, tr = exp.ta, exp.fa, exp.fr, exp.tr
    report = calibrate(_rows(name))

    c = report.confusion
    assert (c.true_accept, c.false_accept, c.false_reject, c.true_reject) == (ta, fa, fr, tr)
    assert report.n == ta + fa + fr + tr == 22
    assert report.skipped_pending == exp.pending
    assert report.n + report.skipped_pending == exp.total
    assert report.errors == 0
    assert report.live is False

    assert _close(report.accuracy, Fraction(ta + tr, report.n))
    assert _close(report.precision, Fraction(ta, ta + fa))
    assert _close(report.recall, Fraction(ta, ta + fr))
    assert _close(report.f1, exp.f1)
    assert _close(report.kappa, exp.kappa)

    got = {(d.row_id, d.human, d.predicted) for d in report.disagreements}
    assert got == exp.disagreements
    by_cat = {
        category: (k.n, k.agree, k.disagree, k.skipped_pending)
        for category, k in report.by_category.items()
    }
    assert by_cat == exp.by_category
    assert all(k.errors == 0 for k in report.by_category.values())


def test_hand_counted_fractions() -> None:
    """The figures above, spelled out as the fractions they are."""
    gen = calibrate(_rows("generation"))
    assert _close(gen.accuracy, Fraction(19, 22))
    assert _close(gen.precision, Fraction(3, 4))
    assert _close(gen.recall, Fraction(6, 7))
    assert _close(gen.f1, Fraction(4, 5))

    hold = calibrate(_rows("holdout"))
    assert _close(hold.accuracy, Fraction(19, 22))
    assert _close(hold.precision, Fraction(5, 6))
    assert _close(hold.recall, Fraction(5, 7))
    assert _close(hold.f1, Fraction(10, 13))


@pytest.mark.parametrize("name", DATASETS)
def test_markdown_lines_and_small_sample_caveat(name: str) -> None:
    exp = EXPECTED[name]
    report = calibrate(_rows(name))
    markdown = report.to_markdown()
    assert markdown.startswith("# Judge calibration\n")
    assert "- Live: false" in markdown
    assert "- n: 22" in markdown
    assert f"- Confusion TA/FA/FR/TR: {exp.ta}/{exp.fa}/{exp.fr}/{exp.tr}" in markdown
    assert f"- Skipped PENDING: {exp.pending}" in markdown
    assert f"- F1: {float(exp.f1):.3f}" in markdown
    assert "(19 / 22)" in markdown
    assert (
        f"n=22 (skipped PENDING={exp.pending}) is too small for a published judge-accuracy claim"
        in markdown
    )
    assert "source=canned judgeOutput" in markdown
    assert "does not affect production eval or the quality gate" in markdown


def test_caveat_only_below_thirty_rows() -> None:
    """Both corpora together pass n=30 and drop the small-sample wording."""
    both = calibrate(_rows("generation") + _rows("holdout"))
    assert both.n == 44
    markdown = both.to_markdown()
    assert "is too small for a published judge-accuracy claim" not in markdown
    assert "- Caveat: n=44 (skipped PENDING=4); source=canned judgeOutput" in markdown

    small = calibrate(_rows("generation")[:10])
    assert small.n < 30
    assert "is too small for a published judge-accuracy claim" in small.to_markdown()
