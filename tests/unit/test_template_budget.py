"""The prompt templates' budget (issue 32): properties over random sizes, and each fault kind.

Whatever sizes a template asks for, a render either returns exactly the text it should or
raises a :class:`TemplateProblem` naming one of the template limits; nothing else escapes
(no RecursionError, MemoryError, OverflowError, no hang).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from goldeval.core.limits import default
from goldeval.dataset.case import GoldenCase
from goldeval.dataset.templates import CompiledTemplates, PromptTemplates, TemplateProblem

ITERATIONS = int(default("template_loop_iterations"))
OUTPUT = int(default("template_output_chars"))
REPEAT = int(default("template_repeat"))
APPEND = (
    "{% set big = 'x' * 1000000 %}{% set L = [] %}"
    "{% for i in range(3000) %}{% set _ = L.append(big) %}{% endfor %}"
)
TEMPLATE_LIMITS = (
    "template_built_chars",
    "template_seconds",
    "template_output_chars",
    "template_loop_iterations",
    "template_repeat",
)


def _render(source: str, **variables: Any) -> str:
    case = GoldenCase(id="r1", prompt="p", expect={}, vars=variables)
    return CompiledTemplates(PromptTemplates(user=source)).render("user", case)


def _assert_limit(problem: TemplateProblem) -> str:
    assert problem.field == "prompt.user"
    named = [name for name in TEMPLATE_LIMITS if f"limit {name}," in problem.message]
    assert named, problem.message
    assert problem.message.startswith("template line 1: "), problem.message
    return named[0]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    outer=st.integers(min_value=0, max_value=1_100),
    inner=st.integers(min_value=0, max_value=1_100),
    width=st.one_of(
        st.integers(min_value=0, max_value=50), st.integers(min_value=0, max_value=10**12)
    ),
)
def test_random_loop_and_repeat_sizes_render_or_hit_a_limit(
    outer: int, inner: int, width: int
) -> None:
    source = "{% for i in range(a) %}{% for j in range(b) %}{{ 'x' * w }}{% endfor %}{% endfor %}"
    fits = (
        outer + outer * inner <= ITERATIONS
        and (width <= REPEAT or outer * inner == 0)
        and outer * inner * width <= OUTPUT
    )
    try:
        text = _render(source, a=outer, b=inner, w=width)
    except TemplateProblem as problem:
        limit = _assert_limit(problem)
        # The wall clock may stop any render on a loaded machine; every other limit only one
        # that asks for more than it allows.
        assert limit == "template_seconds" or not fits, problem.message
    else:
        assert fits
        assert text == "x" * (outer * inner * width)


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=0, max_value=10**12), st.sampled_from(["range", "center", "pow"]))
def test_random_sizes_of_ranges_widths_and_powers(size: int, kind: str) -> None:
    source = {
        "range": "{{ range(n) | length }}",
        "center": "{{ 'x' | center(n) | length }}",
        "pow": "{{ (10 ** n) > 0 }}",
    }[kind]
    limit = {"range": ITERATIONS, "center": REPEAT, "pow": REPEAT}[kind]
    try:
        text = _render(source, n=size)
    except TemplateProblem as problem:
        assert size > limit, problem.message
        _assert_limit(problem)
    else:
        assert size <= limit
        assert text == {"range": str(size), "center": str(max(size, 1)), "pow": "True"}[kind]


@settings(max_examples=15, deadline=None)
@given(st.integers(min_value=1, max_value=5_000))
def test_random_macro_depths_render_or_are_a_recursion_problem(depth: int) -> None:
    source = (
        "{% macro m(n) %}{% if n > 0 %}{{ m(n - 1) }}{% else %}.{% endif %}{% endmacro %}{{ m(d) }}"
    )
    try:
        assert _render(source, d=depth) == "."
    except TemplateProblem as problem:
        assert "calls itself too deeply (RecursionError)" in problem.message


def _raise(kind: type[BaseException]) -> Any:
    def call() -> None:
        raise kind("from the test")

    return call


@pytest.mark.parametrize("kind", [MemoryError, OverflowError, LookupError, RuntimeError])
def test_any_fault_of_a_render_is_a_template_problem(kind: type[BaseException]) -> None:
    with pytest.raises(TemplateProblem) as info:
        _render("ok\n{{ boom() }}", boom=_raise(kind))
    assert info.value.message.startswith("template line 2: ")


@pytest.mark.parametrize(
    "source",
    [
        "{% set x = 'ab' %}" + "{% set x = x ~ x %}" * 40,
        "{% set l = [1] %}{% for i in range(60) %}{{ l.extend(l) }}{% endfor %}",
        "{{ range(1000000) | join('x' * 1000000) }}",
        "{{ ('x' * 100000) | replace('x', 'y' * 100000) }}",
        "{{ 'x'.ljust(10**10) }}",
        "{{ '{:>10000000000}'.format(1) }}",
        "{{ lipsum(10**9) }}",
        "{% set x = 10**100000 %}" + "{% set x = x * x %}" * 30,
        "{% set c %}{% for i in range(100000) %}{{ 'y' * 100 }}{% endfor %}{% endset %}{{ c }}",
        # a list appended to item by item, each step small, 3 GB once shown (a probe: 14 s
        # past the 3 s limit, then a MemoryError), shown, as text, as JSON, by ~, by % and
        # format, and as a mapping's values
        APPEND + "{{ L }}",
        APPEND + "{{ L | string | length }}",
        APPEND + "{{ L | tojson | length }}",
        APPEND + "{{ (L ~ '') | length }}",
        APPEND + "{{ ('%s' % [L]) | length }}",
        APPEND + "{{ '{}'.format(L) | length }}",
        "{% set big = 'x' * 1000000 %}{% set D = {} %}{% for i in range(3000) %}"
        "{% set _ = D.update({i: big}) %}{% endfor %}{{ D }}",
    ],
    ids=[
        "concat-doubling",
        "extend",
        "join",
        "replace",
        "ljust",
        "format",
        "lipsum",
        "int-squaring",
        "captured-block",
        "appended-shown",
        "appended-string",
        "appended-tojson",
        "appended-concat",
        "appended-printf",
        "appended-format",
        "updated-mapping",
    ],
)
def test_each_way_to_grow_is_bounded(source: str) -> None:
    with pytest.raises(TemplateProblem) as info:
        _render(source)
    _assert_limit(info.value)


def test_ordinary_templates_still_render() -> None:
    source = (
        "{% for k, v in {'a': 1}.items() %}{{ k }}{{ v }}{% endfor %}|"
        "{% for i in range(3) %}{{ loop.index }}/{{ loop.length }}{% if loop.last %}!{% endif %}"
        "{% endfor %}|{% for i in [] %}x{% else %}empty{% endfor %}|"
        "{{ '%-4s|%5.2f' % ('ab', 3.14159) }}|{{ '{:>3}'.format('x') }}|"
        "{{ 'a b' | replace(' ', '_') }}"
        "|{{ [1, 2] | join(', ') }}|{{ 'x' | center(3) }}|{{ ('ab' * 2) ~ 'c' }}|{{ 2 ** 10 }}"
    )
    assert _render(source) == "a1|1/32/33/3!|empty|ab  | 3.14|  x|a_b|1, 2| x |ababc|1024"


def test_a_costly_fault_is_not_paid_again_for_the_same_row() -> None:
    templates = CompiledTemplates(PromptTemplates(user="{{ 'x' * 10**10 }}"))
    case = GoldenCase(id="r1", prompt="p", expect={})
    with pytest.raises(TemplateProblem) as first:
        templates.render("user", case)
    with pytest.raises(TemplateProblem) as again:
        templates.render("user", case)
    assert again.value.message == first.value.message


def test_the_budget_holds_when_the_budget_module_is_imported_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pytester's in-process runs drop the modules first imported inside them; a later import
    makes a second copy of the budget module. The cached sandbox must still see its budget (CI
    once rendered a 4 MB output and a 1,000,001-wide ``center`` after such a run)."""
    import sys

    _render("{{ 1 }}")  # the sandbox is built and cached with this copy of the module
    # An earlier in-process run may already have dropped it: then the import below is the copy.
    monkeypatch.delitem(sys.modules, "goldeval.dataset.template_budget", raising=False)
    import goldeval.dataset.template_budget  # noqa: F401  (a second copy, as after pytester)

    with pytest.raises(TemplateProblem) as caught:
        _render("{{ 'x' | center(n) | length }}", n=REPEAT + 1)
    assert _assert_limit(caught.value) == "template_repeat"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{{ " + "(" * 150 + "1" + ")" * 150 + " }}", "nested too deeply"),  # RecursionError
        ("{% if true %}" * 200 + "x" + "{% endif %}" * 200, "nested too deeply"),  # Indentation
        # textwrap is quadratic: one call ran for minutes between two budget checks
        ("{{ (('x' * 999999) ~ ('x' * 999999)) | wordwrap(1) | length }}", "wordwrap"),
    ],
)
def test_a_template_python_cannot_compile_or_bound_is_a_clear_error(
    source: str, message: str
) -> None:
    with pytest.raises(TemplateProblem) as caught:
        CompiledTemplates(PromptTemplates(system=source))
    assert message in str(caught.value)


@pytest.mark.parametrize(
    "source",
    [
        '{{ ("x" ~ "y") | center(1000000000) }}',
        "{{ 'x' * 1000000000 }}",
        "{{ '%0200000000d' % 1 }}",
        "{{ '{:>50000000}'.format('a') }}",
        "{{ ('ab' ~ 'cd') * 300000000 }}",
    ],
)
def test_constant_expressions_are_not_evaluated_at_compile_time(source: str) -> None:
    """Jinja's optimizer folded constant expressions when the template was compiled, outside
    any budget: a manifest's ``center(10**9)`` of two literals ran for minutes and took
    gigabytes at collection (every --golden= run of the project). Compiling is cheap now, and
    the render is stopped by its budget."""
    templates = CompiledTemplates(PromptTemplates(user=source))
    case = GoldenCase(id="r1", prompt="p", expect={}, vars={})
    with pytest.raises(TemplateProblem) as caught:
        templates.render("user", case)
    _assert_limit(caught.value)


def test_a_constant_filter_expression_is_left_to_the_render() -> None:
    """What the compiler makes of a constant filter expression: the code calls the filter at
    render time (budgeted) instead of holding its folded result, which it computed, with no
    budget, while it compiled."""
    from goldeval.dataset.templates import _env

    env = _env()
    code = env.compile(env.parse_budgeted('{{ "x" | center(9) }}'), raw=True)
    assert "    x    " not in code, code
    case = GoldenCase(id="r1", prompt="p", expect={}, vars={})
    rendered = CompiledTemplates(PromptTemplates(user='{{ "x" | center(9) }}')).render("user", case)
    assert rendered == "    x    "


def test_expandtabs_within_the_budget_renders() -> None:
    case = GoldenCase(id="r1", prompt="p", expect={}, vars={})
    source = "{{ ('a\tb').expandtabs(4) }}"
    assert CompiledTemplates(PromptTemplates(user=source)).render("user", case) == "a   b"


@pytest.mark.parametrize("call", ["expandtabs(1000000)", "expandtabs(tabsize=1000000)"])
def test_expandtabs_is_stopped_before_it_builds_its_result(call: str) -> None:
    """A probe: each argument in range, so 1.5 billion characters (1.5 GB) were built before
    the output limit looked; the tab count times the tab size is weighed first now."""
    case = GoldenCase(id="r1", prompt="p", expect={}, vars={})
    source = "{{ ('\t' * 1500)." + call + " | length }}"
    with pytest.raises(TemplateProblem) as caught:
        CompiledTemplates(PromptTemplates(user=source)).render("user", case)
    assert "str.expandtabs() would produce 1,500,001,500 characters" in str(caught.value)


@pytest.mark.parametrize(
    "source",
    [
        '{{ (["x" * 1000000] * 1000000) | string }}',
        '{{ (["x" * 1000000] * 1000000) | tojson }}',
        '{{ ["x" * 1000000] * 1000000 }}',
        '{{ (["x" * 1000000] * 1000) | join("") }}',
        '{{ "{a:{w}}".format_map({"a": 1, "w": 1000000000}) }}',
        '{{ "{0:{1[0]}}".format(1, [1000000000]) }}',
        '{{ "{:{}}".format("a", "900000000") }}',
    ],
)
def test_what_a_structure_or_nested_width_becomes_is_weighed_first(source: str) -> None:
    """A re-probe: a million-item list of megabyte strings passed the repetition check (1M
    items) and was built into 10**12 characters when shown; nested format widths from a
    mapping, an index or a digit string built 1 GB before the output check."""
    case = GoldenCase(id="r1", prompt="p", expect={}, vars={})
    with pytest.raises(TemplateProblem) as caught:
        CompiledTemplates(PromptTemplates(user=source)).render("user", case)
    assert "template_repeat" in str(caught.value)


BIG = "{% set big = 'x' * 1000000 %}"


@pytest.mark.parametrize(
    "source",
    [
        # a mapping's views, a namespace, a long list whose first 1,000 items are small, a
        # format that shows one argument in every field (re-probe: each built 2-3 GB)
        BIG + "{% set D = {} %}{% for i in range(3000) %}{% set _ = D.update({i: big}) %}"
        "{% endfor %}{{ D.items() }}",
        BIG + "{% set D = {} %}{% for i in range(2000) %}{% set _ = D.update({i: big}) %}"
        "{% endfor %}{{ D.values() | string | length }}",
        BIG + "{% set ns = namespace(a=[]) %}{% for i in range(3000) %}"
        "{% set _ = ns.a.append(big) %}{% endfor %}{{ ns }}",
        "{% set L = [] %}{% for i in range(1000) %}{% set _ = L.append('') %}{% endfor %}"
        + BIG
        + "{% for i in range(3000) %}{% set _ = L.append(big) %}{% endfor %}{{ L }}",
        BIG + "{{ ('{0}' * 3000).format(big) | length }}",
        BIG + "{{ (('%(a)s' * 3000) % {'a': big}) | length }}",
    ],
    ids=["items-view", "values-view", "namespace", "late-big-items", "format-field", "printf"],
)
def test_what_a_value_becomes_as_text_is_weighed_first(source: str) -> None:
    with pytest.raises(TemplateProblem) as info:
        _render(source)
    _assert_limit(info.value)


@pytest.mark.parametrize(
    "source",
    [
        # a second re-probe: sorting lowers a copy of every item (2.9 GB), and 4,000 strings
        # of 1 MB built one by one were each in bounds (4 GB, MemoryError)
        APPEND + "{{ L | sort | length }}",
        APPEND + "{{ L | map('upper') | list | length }}",
        "{% set L = [] %}{% for i in range(4000) %}{% set _ = L.append('x' * 1000000) %}"
        "{% endfor %}{{ L | length }}",
    ],
    ids=["sort", "map-upper", "built-one-by-one"],
)
def test_what_a_render_builds_in_all_is_bounded(source: str) -> None:
    with pytest.raises(TemplateProblem) as info:
        _render(source)
    _assert_limit(info.value)
