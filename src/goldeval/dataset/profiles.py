"""Profiles: the rules a dataset's domain brings, named in its manifest (``profile:``).

A profile decides what is not the same for every LLM app: the system prompt built when the
manifest has no ``prompt.system`` template, which pack files it reads, the case kinds (and so
the slices and the reference rates), the rates the reports show and whether a project
``pack/`` folder is picked up without being named.

- ``java-autotest``: the reference project's rules (Java autotests for a login page): its
  system prompt, kinds from the expect keys and id prefixes (``hallucinate-``), its nine rates
  and the pack files rules.md, qa-write-test.md, context/login-po.md and ADR 009. The bundled
  datasets name it.
- ``generic`` (a manifest without ``profile:``): no pack unless the manifest names one; the
  system prompt is the manifest's template, else the retrieved chunks, else none; kinds are
  the row's tags (``tag:<name>``), so the metrics are the overall pass rate, one rate per
  grader and one slice per tag; ``red: true`` only marks the row (no "Negative" rate).

The profile's name is part of the protocol (it enters the grader configuration fingerprint
when it is not ``java-autotest``, whose rules were the only ones before profiles existed, so
reference baselines keep comparing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from goldeval.core.rates import RATE_NAMES

if TYPE_CHECKING:
    from goldeval.dataset.case import GoldenCase

JAVA_AUTOTEST = "java-autotest"
GENERIC = "generic"

#: The reference's system prompt intro (reference 3.8).
JAVA_SYSTEM_INTRO = "Ты QA-агент в AI-first workflow. Соблюдай rules, skill, RAG и ADR."
#: Pack files the reference's system prompt is assembled from, relative to the pack.
JAVA_PROMPT_PARTS = ("rules.md", "qa-write-test.md")
JAVA_CONTEXT_PARTS = ("context/login-po.md", "adr/009-login-401-is-api.md")

#: Rates a generic run reports (the judge's only when the judge ran).
GENERIC_RATES: tuple[str, ...] = ("overallPassRate", "judgeAcceptRate")
#: The prefix of a generic case's tag kinds (and so of its slices).
TAG_KIND_PREFIX = "tag:"


@dataclass(frozen=True)
class Profile:
    name: str
    #: The first part of the default system prompt ("" for none).
    system_intro: str
    #: Pack files always in the default system prompt.
    prompt_parts: tuple[str, ...]
    #: Pack files in the default system prompt of a non-refusal row.
    context_parts: tuple[str, ...]
    #: The rates reports and the terminal show, in order.
    rates: tuple[str, ...]
    #: Whether a project ``pack/`` folder is used when the manifest names no pack.
    default_pack: bool
    #: Whether kinds follow the reference's rules (else: one kind per tag).
    reference_kinds: bool

    def kinds(self, case: GoldenCase) -> list[str]:
        if self.reference_kinds:
            return reference_kinds(case)
        return [TAG_KIND_PREFIX + tag for tag in case.tags]


def reference_kinds(case: GoldenCase) -> list[str]:
    """Case kinds in the reference's insertion order (reference section 1.5)."""
    kinds = ["GENERATION"]
    if case.refuse:
        kinds += ["NEGATIVE", "REFUSAL"]
    else:
        kinds += ["RAG", "RETRIEVAL"]
    if case.red:
        kinds.append("NEGATIVE")
    if case.id.startswith("hallucinate-"):
        kinds += ["HALLUCINATION", "NEGATIVE"]
    if "layer" in case.expect or case.id == "mixed-layer":
        kinds.append("LAYER")
    return list(dict.fromkeys(kinds))


PROFILES: dict[str, Profile] = {
    JAVA_AUTOTEST: Profile(
        name=JAVA_AUTOTEST,
        system_intro=JAVA_SYSTEM_INTRO,
        prompt_parts=JAVA_PROMPT_PARTS,
        context_parts=JAVA_CONTEXT_PARTS,
        rates=RATE_NAMES,
        default_pack=True,
        reference_kinds=True,
    ),
    GENERIC: Profile(
        name=GENERIC,
        system_intro="",
        prompt_parts=(),
        context_parts=(),
        rates=GENERIC_RATES,
        default_pack=False,
        reference_kinds=False,
    ),
}


def get_profile(name: str | None) -> Profile:
    """The profile called ``name`` (None: generic); KeyError for an unknown name."""
    return PROFILES[name or GENERIC]


def reported_rates(profile: str | None) -> tuple[str, ...]:
    """The rates a run of ``profile`` shows (a run document written before profiles existed
    has no ``protocol.profile``: it ran the reference's rules)."""
    return PROFILES.get(profile or JAVA_AUTOTEST, PROFILES[JAVA_AUTOTEST]).rates


def profile_names() -> Sequence[str]:
    return sorted(PROFILES)
