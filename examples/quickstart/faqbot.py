"""A tiny FAQ bot for a bookshop: the application under test in this quickstart.

It stands in for your LLM or RAG app: a question goes in, an answer with ``[doc-id]``
citations comes out. It matches keywords against a handful of documents; a real app would
call a model. The golden dataset in ``golden/faq/`` checks its answers.
"""

from __future__ import annotations

import json
import re

DOCUMENTS = {
    "shipping": (
        "Standard shipping within Germany costs 4.95 EUR and takes 2 to 4 working days. "
        "Orders over 40 EUR ship free."
    ),
    "returns": (
        "You can return any book within 30 days of delivery for a full refund. "
        "Damaged books are replaced free of charge."
    ),
    "hours": "Monday to Friday 9:00-19:00, Saturday 10:00-16:00, closed on Sunday.",
    "contact": "Phone +49 30 1234567, email hello@bookshop.example.",
    "gift-cards": "Gift cards can be used in the shop and online for 3 years.",
}

OUT_OF_SCOPE = "Sorry, I can only help with questions about orders, shipping and the shop."


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def answer(question: str) -> str:
    """Answer one customer question; cite the documents used as ``[doc-id]``."""
    words = _words(question)
    if "json" in words and words & {"hours", "open", "opening"}:
        hours = {
            "monday_friday": "09:00-19:00",
            "saturday": "10:00-16:00",
            "sunday": "closed",
        }
        return "```json\n" + json.dumps(hours, indent=2) + "\n```\n[hours]"
    if words & {"free"} and words & {"ship", "shipping", "delivery"}:
        return "Yes: orders over 40 EUR ship free within Germany. [shipping]"
    if words & {"long", "take", "takes"} and words & {"delivery", "shipping"}:
        return "Delivery within Germany takes 2 to 4 working days. [shipping]"
    if words & {"shipping", "ship", "delivery"}:
        return "Standard shipping within Germany costs 4.95 EUR. [shipping]"
    if words & {"return", "refund", "returns"}:
        return (
            "You can return any book within 30 days of delivery for a full refund. [returns]"
        )
    if words & {"saturday", "open", "hours"}:
        return "On Saturday we are open from 10:00 to 16:00. [hours]"
    if words & {"phone", "call", "number"}:
        return "Call us on +49 30 1234567."
    if words & {"gift", "voucher"}:
        return "Gift cards are valid for 3 years. [gift-cards]"
    return OUT_OF_SCOPE
