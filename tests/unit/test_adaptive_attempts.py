"""goldeval.results.adaptive_attempts: which cases get another attempt (issue 35)."""

from __future__ import annotations

from goldeval.results.adaptive_attempts import plan_round, unsettled
from goldeval.results.sampling import Tally


def test_a_case_is_unsettled_when_the_sides_disagree_are_mixed_or_not_graded() -> None:
    agree_pass, agree_fail = (Tally(2, 2), Tally(3, 3)), (Tally(0, 2), Tally(0, 3))
    assert not unsettled(*agree_pass, "majority")
    assert not unsettled(*agree_fail, "majority")
    # one agreeing attempt each settles nothing: a 40% and a 60% case agree half the time
    assert unsettled(Tally(1, 1), Tally(1, 1), "majority")
    assert unsettled(Tally(2, 2), Tally(0, 2), "majority")  # the variants disagree
    assert unsettled(Tally(2, 3), Tally(3, 3), "majority")  # the control is mixed
    assert unsettled(Tally(2, 2), Tally(0, 0), "majority")  # nothing graded (errors)
    assert unsettled(None, Tally(1, 1), "majority")


def test_undecided_comparison_plans_only_the_unsettled_cases() -> None:
    cases = [f"c{i}" for i in range(10)]
    control = {c: Tally(2, 2) for c in cases}
    candidate = {c: Tally(2, 2) for c in cases}
    candidate["c3"] = Tally(0, 2)
    candidate["c7"] = Tally(1, 2)
    plan = plan_round(control, candidate, cases, 0.3)
    assert not plan.decided and plan.verdict == "UNDERPOWERED"
    assert plan.cases == {"c3", "c7"}
    after_one = plan_round(
        {c: Tally(1, 1) for c in cases}, {c: Tally(1, 1) for c in cases}, cases, 0.05
    )
    assert not after_one.decided and after_one.cases == set(cases)  # all get a second


def test_a_decided_comparison_plans_nothing() -> None:
    cases = [f"c{i}" for i in range(10)]
    control = {c: Tally(1, 1) for c in cases}
    worse = {c: Tally(0, 1) for c in cases}
    plan = plan_round(control, worse, cases, 0.05)
    assert plan.decided and plan.verdict == "FAIL" and plan.cases == frozenset()
    many = [f"c{i}" for i in range(200)]
    same = {c: Tally(1, 1) for c in many}
    passed = plan_round(same, dict(same), many, 0.05)
    assert passed.decided and passed.verdict == "PASS"
