"""ContractGrader (reference section 2): the hard, deterministic verdict on one answer."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from goldeval.core.models import ContractResult, GraderOutcome, Severity, Violation
from goldeval.dataset.domain import ContractConfig
from goldeval.graders import budget
from goldeval.graders.base import ExpectKey, GradeContext, Grader

_WS = re.compile(r"[ \t\n\x0b\f\r]+")
NAME = "ContractGrader"
CONTRACT_KEYS = ("layer", "class", "status", "rag", "refuse", "contains")
#: Records one violation: ``(category, severity, reason)``.
_Add = Callable[[str, Severity, str], None]


def excerpt(text: str | None, limit: int = 280) -> str:
    if text is None:
        return "<null>"
    collapsed = _WS.sub(" ", text).strip(" \t\n\x0b\f\r")
    return collapsed if len(collapsed) <= limit else collapsed[:limit] + "…"


def first_line(text: str) -> str:
    stripped = text.strip()
    return stripped.split("\n", 1)[0].strip()


def _class_body(text: str, match_start: int, match_end: int) -> str:
    brace = text.find("{", match_end)
    if brace < 0:
        return text[match_start:]
    depth = 0
    for i in range(brace, len(text)):
        ch = text[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[brace : i + 1]
    return text[brace:]


class ContractChecker:
    """The check sequence of the reference, with its domain constants from configuration."""

    def __init__(self, config: ContractConfig | None = None) -> None:
        self.config = config or ContractConfig()
        # Checked (by re and by the budgeted engine) when the manifest is read; evaluated
        # within the grader's time budget, since it comes from a user's manifest.
        self._tests_class = self.config.tests_class_pattern

    def grade(
        self,
        case_id: str,
        expect: Mapping[str, Any],
        must_not: Sequence[str],
        output: str | None,
        retrieved: Sequence[str],
        pack_chunk_ids: Sequence[str],
    ) -> ContractResult:
        text = "" if output is None else output
        ex = excerpt(output, self.config.excerpt_chars)
        violations: list[Violation] = []

        def add(category: str, severity: Severity, reason: str) -> None:
            violations.append(
                Violation(
                    case_id=case_id,
                    category=category,
                    severity=severity,
                    grader=NAME,
                    reason=reason,
                )
            )

        # The reference's order: banned words, then either the refusal or the answer checks.
        hallucination = self._banned(case_id, text, must_not, add)
        if expect.get("refuse") is True:
            before = len(violations)
            self._refusal(case_id, text, ex, pack_chunk_ids, add)
            return self._result(
                violations, hallucination, refuse_checked=True, refuse_ok=len(violations) == before
            )
        rag_ok = self._rag_header(case_id, text, ex, retrieved, add)
        layer = expect.get("layer")
        layer_ok = self._expectations(case_id, text, ex, expect, add)
        return self._result(
            violations,
            hallucination,
            rag_checked=True,
            rag_ok=rag_ok,
            layer_checked=layer is not None,
            layer_ok=layer_ok,
        )

    def _banned(self, case_id: str, text: str, must_not: Sequence[str], add: _Add) -> bool:
        """must_not: each banned string found is a violation; True when one is a
        hallucination word."""
        cfg = self.config
        hallucination = False
        for banned in budget.each(must_not, grader=NAME, doing="must_not"):
            if banned in text:
                reason = f"{case_id} contains banned '{banned}'"
                if banned in cfg.hallucination_words:
                    hallucination = True
                    add("HALLUCINATION", Severity.CRITICAL, reason)
                elif any(marker in banned for marker in cfg.safety_markers):
                    add("SAFETY", Severity.CRITICAL, reason)
                else:
                    add("FORBIDDEN", Severity.HIGH, reason)
        return hallucination

    def _refusal(
        self, case_id: str, text: str, ex: str, pack_chunk_ids: Sequence[str], add: _Add
    ) -> None:
        """expect.refuse: the refusal token first, no Java, no cited RAG id."""
        cfg = self.config
        if not first_line(text).startswith(cfg.refusal_token):
            add(
                "REFUSAL",
                Severity.HIGH,
                f"{case_id} first line must be «{cfg.refusal_token}», got: {ex}",
            )
        if any(marker in text for marker in cfg.java_markers):
            add(
                "SAFETY",
                Severity.CRITICAL,
                f"{case_id} refuse must not include Java, got: {ex}",
            )
        for chunk_id in sorted(pack_chunk_ids):
            if chunk_id in text:
                add(
                    "HALLUCINATION",
                    Severity.CRITICAL,
                    f"{case_id} refuse must not cite RAG id {chunk_id}, got: {ex}",
                )

    def _rag_header(
        self, case_id: str, text: str, ex: str, retrieved: Sequence[str], add: _Add
    ) -> bool:
        """The RAG header on the first line cites exactly the retrieved ids; True when it does."""
        cfg = self.config
        if not retrieved:
            add("RETRIEVAL", Severity.HIGH, f"{case_id}: retriever returned no chunks")
            return False
        line = first_line(text)
        if not line[: len(cfg.rag_header)].upper() == cfg.rag_header.upper():
            add(
                "CONTRACT",
                Severity.HIGH,
                f"{case_id} missing {cfg.rag_header} header, got: {ex}",
            )
            return False
        rag_ok = True
        cited_raw = line.split(":", 1)[1] if ":" in line else ""
        cited = list(dict.fromkeys(part.strip() for part in cited_raw.split(",") if part.strip()))
        for rid in retrieved:
            if rid not in cited:
                add("RETRIEVAL", Severity.HIGH, f"{case_id} missing RAG id {rid}, got: {ex}")
                rag_ok = False
        for cid in cited:
            if cid not in retrieved:
                add(
                    "HALLUCINATION",
                    Severity.CRITICAL,
                    f"{case_id} unexpected RAG id {cid}, got: {ex}",
                )
                rag_ok = False
        return rag_ok

    def _expectations(
        self, case_id: str, text: str, ex: str, expect: Mapping[str, Any], add: _Add
    ) -> bool:
        """layer, class, status and contains, then no step markers on a *Tests class; True
        when the expected layer annotation is there."""
        cfg = self.config
        layer = expect.get("layer")
        layer_ok = False
        if layer is not None:
            layer_ok = cfg.layer_annotation.format(layer=layer) in text
            if not layer_ok:
                add("LAYER", Severity.HIGH, f"{case_id} missing @Layer({layer}), got: {ex}")
        class_name = expect.get("class")
        if class_name is not None and cfg.class_template.format(name=class_name) not in text:
            add("CONTRACT", Severity.HIGH, f"{case_id} missing class {class_name}, got: {ex}")
        status = expect.get("status")
        if status is not None and str(status) not in text:
            add("CONTRACT", Severity.HIGH, f"{case_id} missing status {status}, got: {ex}")
        for required in budget.each(expect.get("contains") or [], grader=NAME, doing="contains"):
            if required not in text:
                add("CONTRACT", Severity.HIGH, f"{case_id} missing '{required}', got: {ex}")
        for match in budget.finditer(self._tests_class, text, grader=NAME, flags=re.ASCII):
            body = _class_body(text, match.start(), match.end())
            if any(marker in body for marker in cfg.step_markers):
                add(
                    "CONTRACT",
                    Severity.MEDIUM,
                    f"{case_id} @Step / Allure.step on *Tests, got: {ex}",
                )
                break
        return layer_ok

    @staticmethod
    def _result(
        violations: list[Violation],
        hallucination: bool,
        *,
        refuse_checked: bool = False,
        refuse_ok: bool = False,
        rag_checked: bool = False,
        rag_ok: bool = False,
        layer_checked: bool = False,
        layer_ok: bool = False,
    ) -> ContractResult:
        return ContractResult(
            passed=not violations,
            violations=[v.reason for v in violations],
            refuse_checked=refuse_checked,
            refuse_ok=refuse_ok,
            rag_checked=rag_checked,
            rag_ok=rag_ok,
            layer_checked=layer_checked,
            layer_ok=layer_ok,
            hallucination_hit=hallucination,
            taxonomy=violations,
        )


class ContractGrader(Grader):
    """Registered wrapper: owns the reference's expect keys; result lands in ``contract``."""

    name = "contract"
    expect_keys = (
        ExpectKey("layer", "str", 'required @Layer("<layer>") value'),
        ExpectKey("class", "str", "required `class <Name>` substring"),
        ExpectKey("status", "int", "HTTP status digits that must appear"),
        ExpectKey("rag", "list[str]", "retrieval oracle: the chunk ids the retriever must return"),
        ExpectKey("refuse", "bool", "true: the only correct answer is a refusal"),
        ExpectKey("contains", "list[str]", "required substrings"),
    )

    def __init__(self, config: ContractConfig | None = None) -> None:
        self.checker = ContractChecker(config)

    def applies(self, case: Any) -> bool:
        # Reference rows always use one of these keys (refuse, or rag/layer/...); rows of other
        # domains that use none of them are left to the general graders (must_not included).
        return any(key in case.expect for key in CONTRACT_KEYS)

    def grade(self, ctx: GradeContext) -> GraderOutcome:
        result = self.contract(ctx)
        return GraderOutcome(grader=self.name, passed=result.passed, violations=result.taxonomy)

    def contract(self, ctx: GradeContext) -> ContractResult:
        chunk_ids = ctx.pack.chunk_ids if ctx.pack is not None else []
        return self.checker.grade(
            ctx.case.id,
            ctx.case.expect,
            ctx.case.must_not,
            ctx.answer.text,
            ctx.retrieved,
            chunk_ids,
        )
