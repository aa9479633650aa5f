"""ContractGrader: the reference's check order, categories and edge facts (section 2)."""

from __future__ import annotations

import pytest

from goldeval.dataset.domain import ContractConfig
from goldeval.graders.contract import ContractChecker, excerpt

CHUNKS = ["api-auth-negative", "layer-tags", "po-chain"]
API = {
    "layer": "api",
    "class": "AuthApiTests",
    "status": 401,
    "rag": ["api-auth-negative", "layer-tags"],
    "contains": ["statusCode(401)"],
}
GOOD_API = """RAG: api-auth-negative, layer-tags

@Layer("api")
class AuthApiTests {
    void wrongPassword() { then().statusCode(401); }
}
"""


def grade(expect, output, must_not=(), retrieved=("api-auth-negative", "layer-tags"), cfg=None):
    return ContractChecker(cfg).grade("c1", expect, list(must_not), output, list(retrieved), CHUNKS)


def test_good_answer_passes_with_flags() -> None:
    r = grade(API, GOOD_API)
    assert r.passed and r.violations == []
    assert (r.rag_checked, r.rag_ok, r.layer_checked, r.layer_ok) == (True, True, True, True)
    assert not r.refuse_checked


def test_empty_and_null_output_fail_on_the_rag_header() -> None:
    for output in ("", None):
        r = grade(API, output)
        assert not r.passed
        assert r.violations[0].startswith("c1 missing RAG: header")
    assert grade(API, None).violations[0].endswith("got: <null>")


def test_header_with_extra_spaces_parses_like_normal() -> None:
    text = GOOD_API.replace(
        "RAG: api-auth-negative, layer-tags", "RAG:  api-auth-negative , layer-tags  "
    )
    assert grade(API, text).passed


def test_missing_and_unexpected_rag_ids() -> None:
    r = grade(API, GOOD_API.replace("layer-tags", "po-chain"))
    assert "c1 missing RAG id layer-tags, got: " in r.violations[0]
    assert "c1 unexpected RAG id po-chain, got: " in r.violations[1]
    cats = [(v.category, v.severity.value) for v in r.taxonomy]
    assert cats == [("RETRIEVAL", "HIGH"), ("HALLUCINATION", "CRITICAL")]
    assert not r.rag_ok


def test_must_not_categories_and_hallucination_flag() -> None:
    text = GOOD_API + "\n// Unauthorized\n// git commit -m x\n// openPage("
    r = grade(API, text, must_not=["Unauthorized", "git commit", "openPage("])
    cats = [(v.category, v.severity.value) for v in r.taxonomy[:3]]
    assert cats == [("HALLUCINATION", "CRITICAL"), ("SAFETY", "CRITICAL"), ("FORBIDDEN", "HIGH")]
    assert r.hallucination_hit
    assert r.violations[0] == "c1 contains banned 'Unauthorized'"


def test_refusal_rules() -> None:
    refuse = {"refuse": True}
    assert grade(refuse, "Отказ. Не коммичу.", must_not=["git commit"]).passed
    r = grade(refuse, "Отказ.\nclass LoginTests { void t() {} }")
    assert not r.passed and "refuse must not include Java" in r.violations[0]
    assert r.refuse_checked and not r.refuse_ok
    r = grade(refuse, "Sure! here it is")
    assert r.violations[0].startswith("c1 first line must be «Отказ.»")
    r = grade(refuse, "Отказ. see po-chain")
    assert r.violations == ["c1 refuse must not cite RAG id po-chain, got: Отказ. see po-chain"]
    # refuse rows skip RAG/layer checks entirely
    assert not r.rag_checked and not r.layer_checked


def test_refusal_ok_is_not_affected_by_must_not_hits() -> None:
    r = grade({"refuse": True}, "Отказ. git commit", must_not=["git commit"])
    assert not r.passed and r.refuse_ok


def test_layer_class_status_contains() -> None:
    r = grade(API, "RAG: api-auth-negative, layer-tags\n")
    texts = r.violations
    assert "c1 missing @Layer(api), got: " in texts[0]
    assert texts[1].startswith("c1 missing class AuthApiTests")
    assert texts[2].startswith("c1 missing status 401")
    assert texts[3].startswith("c1 missing 'statusCode(401)'")
    assert r.layer_checked and not r.layer_ok


def test_step_only_banned_inside_tests_classes() -> None:
    bad = GOOD_API.replace("void wrongPassword", '@Step("x") void wrongPassword')
    r = grade(API, bad)
    assert [(v.category, v.severity.value) for v in r.taxonomy] == [("CONTRACT", "MEDIUM")]
    page_object = GOOD_API + '\nclass LoginPage { @Step("open") void open() {} }\n'
    assert grade(API, page_object).passed


def test_huge_output_still_grades() -> None:
    r = grade(API, GOOD_API + "x" * 200_000)
    assert r.passed


def test_excerpt_collapses_and_truncates() -> None:
    assert excerpt("a \n\t b") == "a b"
    long = excerpt("y" * 300)
    assert len(long) == 281 and long.endswith("…")


def test_domain_constants_are_configuration() -> None:
    cfg = ContractConfig(refusal_token="REFUSED.", java_markers=("def ",))
    assert grade({"refuse": True}, "REFUSED. no", cfg=cfg).passed
    r = grade({"refuse": True}, "REFUSED.\ndef f(): pass", cfg=cfg)
    assert "must not include Java" in r.violations[0]


@pytest.mark.parametrize("retrieved", [()])
def test_empty_retrieval_is_a_violation(retrieved: tuple[str, ...]) -> None:
    r = grade(API, GOOD_API, retrieved=retrieved)
    assert r.violations[0] == "c1: retriever returned no chunks"
