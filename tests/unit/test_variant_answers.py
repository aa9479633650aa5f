"""goldeval.results.variant_answers and the collector's answer excerpts (issue 35)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from goldeval.core.limits import default
from goldeval.core.models import AttemptRecord
from goldeval.results.attempt_payloads import attempt_payload
from goldeval.results.run_document import RunCollector
from goldeval.results.variant_answers import MAX_SIDE_BY_SIDE, side_by_side, word_diff


def _sides(diff: list[dict[str, str]]) -> tuple[str, str]:
    control = "".join(s["text"] for s in diff if s["op"] in "=-")
    candidate = "".join(s["text"] for s in diff if s["op"] in "=+")
    return control, candidate


def test_word_diff_marks_words_each_side_has_alone() -> None:
    diff = word_diff("The price is 12 EUR [doc-1]", "The price is 15 EUR [doc-1]")
    assert diff == [
        {"op": "=", "text": "The price is "},
        {"op": "-", "text": "12"},
        {"op": "+", "text": "15"},
        {"op": "=", "text": " EUR [doc-1]"},
    ]
    assert word_diff("same", "same") == [{"op": "=", "text": "same"}]
    assert word_diff("", "new words") == [{"op": "+", "text": "new words"}]


@given(st.text(max_size=80), st.text(max_size=80))
def test_word_diff_gives_both_texts_back(control: str, candidate: str) -> None:
    diff = word_diff(control, candidate)
    assert _sides(diff) == (control, candidate)
    assert all(a["op"] != b["op"] for a, b in itertools.pairwise(diff))


def test_side_by_side_lists_worse_then_better_and_bounds_the_count() -> None:
    answers = {("a", "c1"): "yes [d]", ("b", "c1"): "no", ("a", "c2"): "x"}
    out = side_by_side(
        ["c1"],
        ["c2"],
        lambda variant, case: answers.get((variant, case)),
        control="a",
        candidate="b",
        excerpt_chars=300,
    )
    assert [(o["caseId"], o["direction"]) for o in out] == [("c1", "worse"), ("c2", "better")]
    assert out[1]["candidate"] is None and out[1]["diff"] == []
    many = side_by_side(
        [f"w{i}" for i in range(30)],
        ["b"],
        lambda v, c: "t" * 300,
        control="a",
        candidate="b",
        excerpt_chars=300,
    )
    assert len(many) == MAX_SIDE_BY_SIDE and all(o["truncated"] for o in many)


def _payload(index: int, output: str, variant: str | None = "B") -> dict[str, object]:
    record = AttemptRecord.model_validate(
        {"caseId": "c1", "index": index, "status": "PASS", "output": output}
    )
    return attempt_payload(record, keep_passing_output=False, variant=variant)


def test_collector_keeps_the_lowest_attempt_s_excerpt_whatever_the_order() -> None:
    limit = int(default("answer_excerpt_chars"))
    for order in ([1, 2, 3], [3, 1, 2], [2, 3, 1]):
        collector = RunCollector()
        for index in order:
            collector.add(_payload(index, f"answer {index} " + "x" * 2 * limit))
        excerpt = collector.excerpt("B", "c1")
        assert excerpt is not None and excerpt.startswith("answer 1 ")
        assert len(excerpt) == limit
        # the passing answer itself is not kept in the record
        assert "answer" not in next(iter(collector.attempts["c1"].values()))
    assert collector.excerpt("A", "c1") is None


def test_no_excerpt_outside_variant_sessions() -> None:
    payload = _payload(1, "answer", variant=None)
    assert "excerpt" not in payload
    collector = RunCollector()
    collector.add(payload)
    assert collector.excerpts == {}
