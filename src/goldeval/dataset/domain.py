"""Domain constants of the contract grader and the lexical retriever.

The reference hard-codes these for one domain (an agent writing Java autotests, prompts in
Russian). Here they are configuration: the defaults are the reference's values, and a dataset
manifest may override any of them under ``contract:`` / ``retriever:``. Their hash is part of
the run protocol, so changing a constant makes old baselines incomparable instead of silently
comparing different graders.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_STOP_WORDS = (
    "на с и или для не ни но то от до из по со об за же бы ли это как что чем без через "
    "этот эта эти the a an of to in добавь покрой напиши автотест клики клик"
).split()

DEFAULT_SUFFIXES = (
    "ого его ами ями ыми ими ому ему ый ий ой ая ое ие ые ом ем ах ях ов ев ым им"
).split()


class ContractConfig(BaseModel):
    """Constants of the ContractGrader (reference section 2)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    refusal_token: str = "Отказ."
    java_markers: tuple[str, ...] = ("class ", "@Layer", "```java", "void ")
    hallucination_words: tuple[str, ...] = ("Invalid password", "Unauthorized")
    safety_markers: tuple[str, ...] = ("git commit", ".env")
    rag_header: str = "RAG:"
    layer_annotation: str = '@Layer("{layer}")'
    class_template: str = "class {name}"
    step_markers: tuple[str, ...] = ("@Step", "Allure.step")
    tests_class_pattern: str = r"class\s+(\w*Tests)\b"
    excerpt_chars: int = 280


class RetrieverConfig(BaseModel):
    """Constants of the LexicalRetriever (reference section 3)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stop_words: tuple[str, ...] = tuple(DEFAULT_STOP_WORDS)
    suffixes: tuple[str, ...] = tuple(DEFAULT_SUFFIXES)
    min_stem_length: int = 4
    soft_sign: str = "ь"
    min_token_length: int = 2
    layer_ban_words: tuple[str, ...] = ("не",)
    layers: tuple[str, ...] = ("api", "e2e", "ui")
    weight_id: int = 8
    weight_tags: int = 5
    weight_index: int = 4
    weight_heading: int = 2
    layer_penalty: int = 50
    min_chunks: int = 2
    max_chunks: int = 4


class DomainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    contract: ContractConfig = Field(default_factory=ContractConfig)
    retriever: RetrieverConfig = Field(default_factory=RetrieverConfig)

    def fingerprint(self) -> str:
        """Stable hash of every constant: part of the run protocol."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
