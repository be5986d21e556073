"""Whose words a question asks about, by name: "What did Caroline research?" favours the turns
Caroline wrote.

A turn's author is its ``metadata.speaker`` (not ``metadata.name``, which OpenAI-style tool
messages use for the function); ``role`` alone cannot tell two people apart when both are
people (a REALTALK or LoCoMo chat stores them as ``user`` and ``assistant``).
``named_authors`` matches the question's words against the authors of the candidate turns: a
word equal to a part of the name ("Fahim" for "Fahim Khan", "elise" for "Elise"), or, for a
capitalised word of five letters or more, a close spelling ("Muhammad" for the author
"Muhhamed", difflib ratio ≥ ``FUZZY_RATIO``) that is not exactly a part of another author's
name. A question that names every author present (or none) gets no name prior;
``memviewer.recall.scoring`` then falls back to the "I / you" rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from difflib import SequenceMatcher

FUZZY_RATIO = 0.75
FUZZY_MIN_LEN = 5
_WORD = re.compile(r"[^\W_\d]+", re.UNICODE)


def author_of(meta: object) -> str | None:
    """The author name a turn's metadata carries, if any."""
    value = meta.get("speaker") if isinstance(meta, dict) else None
    return value.strip() if isinstance(value, str) and value.strip() else None


def _parts(name: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(name) if len(w) >= 3}


def named_authors(query: str, authors: Iterable[str]) -> set[str]:
    """The authors (of ``authors``) the query names: by a part of the name, or else by a close
    spelling in a capitalised word that is not exactly another author's name."""
    pool = {a for a in authors if a}
    if not pool:
        return set()
    words = _WORD.findall(query)
    lower = {w.lower() for w in words}
    parts = {a: _parts(a) for a in pool}
    exact = {a for a in pool if parts[a] & lower}
    taken = set().union(*(parts[a] & lower for a in exact)) if exact else set()
    capitalised = {
        w.lower() for w in words if w[0].isupper() and len(w) >= FUZZY_MIN_LEN and w.lower() not in taken
    }
    out = set(exact)
    for a in pool - exact:
        if any(
            SequenceMatcher(None, part, w).ratio() >= FUZZY_RATIO
            for part in parts[a]
            if len(part) >= FUZZY_MIN_LEN - 1
            for w in capitalised
        ):
            out.add(a)
    return out


def preferred_authors(query: str, authors: Iterable[str]) -> set[str]:
    """Authors to favour: those named, unless the question names every author present."""
    pool = {a for a in authors if a}
    named = named_authors(query, pool)
    if not named or named >= pool:
        return set()
    return named
