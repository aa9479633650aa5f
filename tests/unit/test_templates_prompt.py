"""Prompt templates, request options and profiles in the dataset layer (no pytest run)."""

from __future__ import annotations

import pytest

from goldeval.dataset.case import GoldenCase, dataset_hash
from goldeval.dataset.profiles import GENERIC, JAVA_AUTOTEST, get_profile, reported_rates
from goldeval.dataset.request import merge_request, parse_request
from goldeval.dataset.templates import CompiledTemplates, PromptTemplates, TemplateProblem


def _case(**kw: object) -> GoldenCase:
    base: dict = {"id": "c1", "prompt": "Where is my order?", "expect": {}}
    base.update(kw)
    return GoldenCase(**base)


def test_renders_row_vars_chunks_and_builtins() -> None:
    t = CompiledTemplates(
        PromptTemplates(
            system="{% for c in chunks %}[{{ c.id }}] {{ c.text }}\n{% endfor %}Tone: {{ tone }}",
            user="{{ id }}: {{ prompt }} ({{ vars.tone }})",
        )
    )
    case = _case(vars={"tone": "warm"})
    chunks = [{"id": "ship", "heading": "", "text": "3-5 days"}]
    assert t.render("system", case, chunks) == "[ship] 3-5 days\nTone: warm"
    assert t.render("user", case) == "c1: Where is my order? (warm)"


def test_undefined_variable_is_found_before_rendering_and_when_rendering() -> None:
    t = CompiledTemplates(PromptTemplates(user="{{ question }} {{ tone }}"))
    assert t.missing(_case(vars={"question": "q"})) == [("prompt.user", "tone")]
    with pytest.raises(TemplateProblem, match="undefined"):
        t.render("user", _case(vars={"question": "q"}))


def test_sandbox_refuses_python_internals() -> None:
    t = CompiledTemplates(PromptTemplates(user="{{ prompt.__class__.__mro__ }}"))
    with pytest.raises(TemplateProblem) as info:
        t.render("user", _case())
    assert info.value.field == "prompt.user"


def test_syntax_error_names_the_field_and_line() -> None:
    with pytest.raises(TemplateProblem) as info:
        CompiledTemplates(PromptTemplates(system="ok\n{% if %}"))
    assert info.value.field == "prompt.system" and "line 2" in info.value.message


def test_request_options_validate_and_merge() -> None:
    plain, problems = parse_request({"temperature": 0.2, "stop": "END", "seed": 1})
    assert problems == [] and plain == {"temperature": 0.2, "stop": "END", "seed": 1}
    _, problems = parse_request({"max_tokens": 0})
    assert problems and problems[0][0] == "max_tokens"
    _, problems = parse_request({"max_tokens": "10"})
    assert problems and problems[0][0] == "max_tokens"  # strict: a string is a mistake
    _, problems = parse_request({"tool_choice": "auto"})
    assert problems == [("tool_choice", "set without tools")]
    _, problems = parse_request({"response_format": {"type": "json_schema"}})
    assert problems[0][0] == "response_format.json_schema"
    tools = [{"type": "function", "function": {"name": "a"}}]
    _, problems = parse_request(
        {"tools": tools, "tool_choice": {"type": "function", "function": {"name": "b"}}}
    )
    assert problems[0][0] == "tool_choice.function.name"
    assert merge_request({"temperature": 0.1, "seed": 1}, {"seed": 2}) == {
        "temperature": 0.1,
        "seed": 2,
    }


def test_profiles_decide_kinds_and_rates() -> None:
    fields = {"id": "hallucinate-x", "prompt": "p", "expect": {"red": True}, "tags": ("smoke",)}
    reference = GoldenCase(**fields, profile=JAVA_AUTOTEST)  # type: ignore[arg-type]
    assert reference.kinds == ["GENERATION", "RAG", "RETRIEVAL", "NEGATIVE", "HALLUCINATION"]
    generic = GoldenCase(**fields, profile=GENERIC)  # type: ignore[arg-type]
    assert generic.kinds == ["tag:smoke"]
    assert "negativeCasePassRate" not in reported_rates(GENERIC)
    assert len(reported_rates(None)) == 9  # a run before profiles: the reference's
    assert get_profile(None).name == GENERIC and not get_profile(None).default_pack


def test_vars_messages_and_request_enter_the_dataset_hash() -> None:
    base = dataset_hash([_case()])
    assert dataset_hash([_case(vars={"a": 1})]) != base
    assert dataset_hash([_case(request={"temperature": 0.5})]) != base
    assert dataset_hash([_case(messages=[{"role": "user", "content": "hi"}])]) != base
    # the profile is not a row field: it enters the grader configuration instead
    assert dataset_hash([_case(profile=GENERIC)]) == base
