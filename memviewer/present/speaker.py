"""Whose words a query asks about (``addressed_speaker``): recall's speaker prior
(``recall.scoring``) reads it, and the Recall screen's trace shows the same reading."""

from __future__ import annotations

import re

_ASKS_ASSISTANT = re.compile(
    r"\byou\s+(?:\w+\s+)?(?:told|said|mentioned|recommended|suggested|provided|gave|wrote|made|"
    r"listed|shared|created|explained|described|showed|offered|came\s+up\s+with|proposed|advised|"
    r"named)\b"
    r"|\bdid\s+you\s+(?:\w+\s+)?(?:tell|say|mention|recommend|suggest|provide|give|write|make|list|"
    r"share|create|explain|describe|show|offer|propose|advise|name)\b"
    r"|\byour\s+(?:suggestion|recommendation|advice|answer|response|list|explanation|reply)",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|me|mine|myself)\b", re.IGNORECASE)


def addressed_speaker(query: str) -> str | None:
    """Whose words the query asks about: ``"assistant"``, ``"user"`` or None.

    Past-tense verbs after "you" ("you told me", "you recommended", "did you
    suggest") point at the assistant's earlier replies; a request ("can you
    recommend") does not. Any
    other first-person question is about what the user said.
    """
    if _ASKS_ASSISTANT.search(query):
        return "assistant"
    if _FIRST_PERSON.search(query):
        return "user"
    return None
