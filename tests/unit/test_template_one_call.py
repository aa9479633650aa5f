"""The prompt templates' budget (issue 32), third probe: one call the clock cannot look into.

The budget checks the wall clock between the steps of a render; a single built-in call runs to
its end before the next check. Each construct whose cost grows faster than its input inside
one call (``sum`` of lists, ``pprint`` of nested lists, big-integer division, ``strip`` of
long character sets, the punycode codec, ``urlize``) or that builds much from a small argument
(``tojson(indent=)``, ``round``'s power of ten, ``int.to_bytes``, ``translate``, the width
methods of ``bytes``) is weighed before the call, stepped through the budget, or not offered.
Every test asserts the template limit named and the time taken: the probes ran for seconds to
minutes (one past SIGTERM), or built gigabytes, before a limit looked.
"""

from __future__ import annotations

import json
import time
from pprint import pformat
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from goldeval.core.limits import default
from goldeval.dataset.case import GoldenCase
from goldeval.dataset.templates import CompiledTemplates, PromptTemplates, TemplateProblem

SECONDS = float(default("template_seconds"))
REPEAT = int(default("template_repeat"))
#: A refused template is refused before its costly call: well under a second, given a loaded
#: 2-core machine's slack.
QUICK = 2.0
BIG_INTS = "{% set x = 7 ** 1100000 %}{% set y = 3 ** 1000000 %}"  # 929,609 and 477,122 digits
NESTED = (
    "{% set ns = namespace(v=range(300000)|list) %}{% for i in range(40) %}"
    "{% set ns.v = [ns.v] %}{% endfor %}"
)


def _render(source: str, **variables: Any) -> str:
    case = GoldenCase(id="r1", prompt="p", expect={}, vars=variables)
    return CompiledTemplates(PromptTemplates(user=source)).render("user", case)


def _refused(source: str, reason: str, within: float = QUICK) -> str:
    """The template's render fails on line 1 with ``reason`` and a template limit named,
    within ``within`` seconds; returns the message."""
    start = time.monotonic()
    with pytest.raises(TemplateProblem) as caught:
        _render(source)
    elapsed = time.monotonic() - start
    message = caught.value.message
    assert message.startswith("template line 1: "), message
    assert reason in message, message
    assert "(limit template_" in message or "not allowed in a template" in message, message
    assert elapsed < within, (elapsed, message)
    return message


# -- sum: one + at a time -------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        # 14+ minutes in one C call, past SIGTERM (Python's sum copies the total each step)
        "{{ range(1000000) | batch(1) | list | sum(start=[]) | length }}",
        "{{ ([[1]] * 100000) | sum(start=[]) | length }}",  # 13 s before the clock looked
        "{{ ([(1,)] * 100000) | sum(start=()) | length }}",
        # a 929,609-digit integer added 200,000 times: 13.7 s in one call
        "{% set x = 7 ** 1100000 %}{% set L = [] %}{% for i in range(100000) %}"
        "{% set _ = L.append(x) %}{% endfor %}{{ L | sum > 0 }}",
    ],
    ids=["batched-range", "lists", "tuples", "big-integers"],
)
def test_sum_adds_through_the_budget_and_stops_at_the_time_limit(source: str) -> None:
    _refused(source, "the template ran longer than 3 seconds", within=SECONDS + 2.5)


def test_sum_still_sums() -> None:
    source = (
        "{{ [1, 2.5, 3] | sum }}|{{ [[1], [2, 3]] | sum(start=[]) }}|"
        "{{ [{'p': 2}, {'p': 5}] | sum(attribute='p') }}|{{ range(1000000) | sum }}|"
        "{{ [10 ** 30, 1] | sum(start=10 ** 20) }}|{{ [] | sum }}"
    )
    expected = f"6.5|[1, 2, 3]|7|499999500000|{10**30 + 10**20 + 1}|0"
    assert _render(source) == expected


def test_sum_of_strings_is_refused_as_python_refuses_it() -> None:
    with pytest.raises(TemplateProblem) as caught:
        _render("{{ ['a', 'b'] | sum(start='') }}")
    assert "TypeError while rendering: sum() can't sum strings" in caught.value.message


# -- what a filter builds from a width or from nesting --------------------------------------


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        # 2.9 GB and a MemoryError: every item got the million-space indent
        ("{{ range(3000) | list | tojson(indent=1000000) | length }}", "the indented JSON has"),
        ("{{ range(3000) | list | tojson(' ' * 1000000) | length }}", "the indented JSON has"),
        ("{{ [1] | tojson(indent=1000001) }}", "the tojson filter's indent would produce"),
        # depth × indent: 300 levels of 100 spaces around a 3,000-item list
        (
            "{% set ns = namespace(v=range(3000)|list) %}{% for i in range(300) %}"
            "{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v | tojson(indent=100) | length }}",
            "the indented JSON has",
        ),
    ],
    ids=["indent-count", "indent-string", "indent-over-repeat", "depth"],
)
def test_tojson_indent_is_weighed_before_the_json_is_built(source: str, reason: str) -> None:
    _refused(source, reason)


@pytest.mark.parametrize(
    "source",
    [
        # pprint shows each level again: depth 40 took 5 s, depth 300 took 70 s
        NESTED + "{{ ns.v | pprint | length }}",
        # every line of the list indented by the 100,000-character key: 300 MB
        "{{ {('k' * 100000): range(3000) | list} | pprint | length }}",
    ],
    ids=["nested", "long-key"],
)
def test_pprint_is_weighed_before_it_runs(source: str) -> None:
    _refused(source, "the pprint filter's text (each level shown again, indented) has")


def test_pprint_and_indented_json_within_the_budget_render() -> None:
    value = {"b": [1, {"c": "x" * 100}], "a": list(range(30))}
    assert _render("{{ v | pprint }}", v=value) == pformat(value)
    assert _render("{{ v | tojson(indent=2) }}", v=value) == json.dumps(
        value, indent=2, sort_keys=True
    )
    assert _render("{{ v | tojson(indent='\t') }}", v=[1]) == "[\n\t1\n]"


def test_a_list_of_big_integers_is_weighed_by_their_digits() -> None:
    """Each 3,972-digit integer counted as one character: 200,000 of them passed the
    repetition check, then took minutes (and 800 MB) to be shown."""
    _refused("{% set x = 7 ** 4700 %}{{ [x] * 200000 }}", "the repetition would produce")


# -- big-integer division ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        BIG_INTS + "{{ (x // y) > 0 }}",  # 4.5 s against the 3 s limit
        BIG_INTS + "{{ (x % y) > 0 }}",
        BIG_INTS + "{{ x is divisibleby(y) }}",
        BIG_INTS + "{{ [x] | select('divisibleby', y) | list | length }}",
        BIG_INTS + "{{ x | round(-500000) > 0 }}",
    ],
    ids=["floordiv", "modulo", "divisibleby", "select-divisibleby", "round"],
)
def test_a_costly_big_integer_division_is_refused_before_it_runs(source: str) -> None:
    message = _refused(source, "-digit integer by a ")
    assert "digit steps, over the limit of 10,000,000,000" in message
    assert "(limit template_repeat," in message


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=100), st.integers(min_value=0, max_value=100))
def test_random_division_sizes_render_or_are_refused_quickly(tens: int, more: int) -> None:
    """``10**a // 10**b`` (``b`` up to a million digits, ``a`` up to a million more): the
    right answer when its digit steps are within the limit, else template_repeat at once;
    never the clock."""
    divisor = max(tens * 10_000, 1)
    dividend = min(divisor + more * 10_000, 1_000_000)
    steps = (dividend - divisor + 1) * (divisor + 1)
    source = "{{ ((10 ** a) // (10 ** b)) == 10 ** (a - b) }}"
    start = time.monotonic()
    try:
        assert _render(source, a=dividend, b=divisor) == "True"
        assert steps <= 10**10 * 1.01, steps
        event("rendered")
    except TemplateProblem as problem:
        event("refused")
        assert "(limit template_repeat," in problem.message, problem.message
        assert steps > 10**10 * 0.99, steps
    assert time.monotonic() - start < SECONDS


def test_ordinary_divisions_and_rounding_still_render() -> None:
    source = (
        "{{ 7 // 2 }}|{{ -7 % 3 }}|{{ 10 ** 30 // 7 }}|{{ 9 is divisibleby 3 }}|"
        "{{ 1234 | round(-2) }}|{{ 2.345 | round(2, 'floor') }}|{{ 17 | round(1, 'ceil') }}|"
        "{{ ((7 ** 1100000) // 10 ** 10) > 0 }}"
    )
    assert _render(source) == f"3|2|{10**30 // 7}|True|1200|2.34|17.0|True"


@pytest.mark.parametrize(
    "source",
    [
        "{{ 1 | round(-1000000000) }}",  # 10 ** 10**9, never ended
        "{{ 1.5 | round(1000000000, 'ceil') }}",
        "{{ 7 | round(method='common', precision=-1000000000) }}",
    ],
)
def test_round_is_refused_before_its_power_of_ten(source: str) -> None:
    _refused(source, "the round filter's power of ten would produce 1,000,000,000 characters")


# -- methods and filters quadratic in their input, or building much from a small argument ---


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        # each stripped character looked up in the long set: 100,000 by 100,000 took 2.9 s
        ("{{ ('a' * 1000000).strip('b' * 1000000 ~ 'a') | length }}", "str.strip() would take"),
        ("{{ ('a' * 1000000).rstrip('b' * 1000000 ~ 'a') | length }}", "str.rstrip() would take"),
        ("{{ ('a' * 1000000) | trim('b' * 1000000 ~ 'a') | length }}", "the trim filter would"),
        # pure-Python punycode: 5,000 distinct characters in 3 s, 20,000 in 57 s
        (
            "{% set s %}{% for i in range(256, 6000) %}{{ '%c' % i }}{% endfor %}{% endset %}"
            "{{ s.encode('punycode') | length }}",
            "the punycode codec is not offered",
        ),
        ("{{ 'x'.encode(encoding='PunyCode') }}", "the punycode codec is not offered"),
        # each built 1 GB before the output limit looked
        ("{{ 'x'.encode().center(1000000000) | length }}", "bytes.center() would produce"),
        (
            "{{ ('\t' * 1500).encode().expandtabs(1000000) | length }}",
            "bytes.expandtabs() would produce",
        ),
        (
            "{{ ('x' * 100000).encode().replace('x'.encode(), ('y' * 100000).encode()) }}",
            "the replacement has",
        ),
        ("{{ (1).to_bytes(1000000000, 'big') | length }}", "int.to_bytes() would produce"),
        ("{{ (1).to_bytes(length=1000000000) | length }}", "int.to_bytes() would produce"),
        ("{{ ('a' * 1000).translate({97: 'b' * 1000000}) | length }}", "str.translate() has"),
    ],
    ids=[
        "strip",
        "rstrip",
        "trim",
        "punycode",
        "punycode-named",
        "bytes-center",
        "bytes-expandtabs",
        "bytes-replace",
        "to-bytes",
        "to-bytes-named",
        "translate",
    ],
)
def test_a_costly_method_is_refused_before_it_runs(source: str, reason: str) -> None:
    _refused(source, reason)


def test_ordinary_methods_still_render() -> None:
    source = (
        "{{ '--a--'.strip('-') }}|{{ ' a ' | trim }}|{{ 'xa' | trim('x') }}|"
        "{{ 'é'.encode('utf-8') | length }}|{{ 'ab'.encode().center(4) | length }}|"
        "{{ (258).to_bytes(2, 'big') | list }}|{{ 'abc'.translate({97: 'AA'}) }}"
    )
    assert _render(source) == "a|a|a|2|4|[1, 2]|AAbc"


def test_urlize_is_not_offered() -> None:
    """Its trailing-punctuation regex is quadratic: 10,000 closing brackets took 2 s, 40,000
    took 33 s, in one call."""
    with pytest.raises(TemplateProblem) as caught:
        CompiledTemplates(PromptTemplates(user="{{ (')' * 200000 ~ 'a)') | urlize }}"))
    assert "No filter named 'urlize'" in caught.value.message


# -- end to end: the rows' collection errors --------------------------------------------------

#: The probe's setup: each row has no prompt of its own, so the manifest's template is rendered
#: at collection; one hostile branch per row (``vars.attack``), on its own template line.
PROBED = """\
version: bot-v1
name: bot
pack: none
prompt:
  user: |
    {% if attack == "sum" %}{{ range(1000000) | batch(1) | list | sum(start=[]) | length }}
    {% elif attack == "tojson" %}{{ range(3000) | list | tojson(indent=1000000) | length }}
    {% elif attack == "pprint" %}{% set ns = namespace(v=range(300000)|list) %}{% for i in range(300) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v | pprint | length }}
    {% elif attack == "division" %}{{ ((7 ** 1100000) // (3 ** 1000000)) > 0 }}
    {% endif %}
"""  # noqa: E501  (one template line per attack: the error names it)
#: attack: (template line, the reason in the row's collection error, the limit it names)
PROBES = {
    "sum": (1, "the template ran longer than 3 seconds", "template_seconds"),
    "tojson": (2, "the indented JSON has 4,0", "template_output_chars"),
    "pprint": (
        3,
        "the pprint filter's text (each level shown again, indented) has",
        "template_output_chars",
    ),
    "division": (4, "dividing a 929,609-digit integer by a 477,122-digit one", "template_repeat"),
}


def test_the_probed_templates_are_collection_errors_of_their_rows(
    pytester: pytest.Pytester,
) -> None:
    folder = pytester.path / "golden" / "bot"
    folder.mkdir(parents=True)
    (folder / "dataset.yaml").write_text(PROBED, encoding="utf-8")
    rows = [
        json.dumps(
            {"id": f"r-{attack}", "vars": {"attack": attack}, "expect": {"contains_any": ["ok"]}}
        )
        for attack in PROBES
    ]
    (folder / "rows.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (pytester.path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    start = time.monotonic()
    result = pytester.runpytest_subprocess("--golden=bot-v1", "-p", "no:cacheprovider", timeout=90)
    elapsed = time.monotonic() - start
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == 2, out[-3000:]
    lines = out.splitlines()
    for n, (attack, (line, reason, limit)) in enumerate(PROBES.items(), start=1):
        expected = f"{folder / 'rows.jsonl'}:{n}: prompt.user: template line {line}: {reason}"
        error = [text for text in lines if text.startswith(expected)]
        assert len(error) == 1, (attack, out[-3000:])
        assert f"(limit {limit}, see docs/reliability.md)" in error[0], error
    assert "Traceback" not in out and "MemoryError" not in out
    # the sum stops at the 3 s limit, the others before their call; the probes took minutes
    assert elapsed < 45, elapsed
