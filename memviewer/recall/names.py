"""Whose words a question asks about, by name: "What did Caroline research?" favours the turns
Caroline wrote.

A turn's author is its ``metadata.speaker`` (``memviewer.store.speakers.author_of``).
``named_authors`` matches the question's words against the authors of the candidate turns: a
word equal to a part of the name ("Fahim" for "Fahim Khan", "elise" for "Elise"), or, for a
capitalised word of five letters or more, a close spelling ("Muhammad" for the author
"Muhhamed", difflib ratio ≥ ``FUZZY_RATIO``) that is not exactly a part of another author's
name, or a name the other person calls the author by in the chat (``aliases``, learned by
``memviewer.store.authors``: "Kate" for the author "Emi" whom the other writes "Hey Kate!").
A question that names every author present (or none) gets no name prior;
``memviewer.recall.scoring`` then falls back to the "I / you" rule.

``without_names`` takes those names out of the text the retrievers search: a person rarely
writes their own name, while the other person writes it in every greeting ("How are you
doing today Kate?"), so a name in the query pulled BM25 and the embedding towards the turns
*addressed to* that person rather than those they wrote (REALTALK: docs/benchmarks.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from difflib import SequenceMatcher

FUZZY_RATIO = 0.75
FUZZY_MIN_LEN = 5
_WORD = re.compile(r"[^\W_\d]+", re.UNICODE)


def _parts(name: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(name) if len(w) >= 3}


def _naming(query: str, pool: set[str], aliases: Mapping[str, str] | None = None) -> dict[str, set[str]]:
    """Each author the query names, with the query's words (lower case) that name them."""
    words = _WORD.findall(query)
    lower = {w.lower() for w in words}
    parts = {a: _parts(a) for a in pool}
    out = {a: parts[a] & lower for a in pool if parts[a] & lower}
    called = {w.lower() for w in words if w[0].isupper()}  # an alias names someone only capitalised
    for word, author in (aliases or {}).items():
        if word in called and author in pool:
            out.setdefault(author, set()).add(word)
    taken = set().union(*out.values()) if out else set()
    capitalised = {
        w.lower() for w in words if w[0].isupper() and len(w) >= FUZZY_MIN_LEN and w.lower() not in taken
    }
    for a in pool - set(out):
        close = {
            w
            for w in capitalised
            for part in parts[a]
            if len(part) >= FUZZY_MIN_LEN - 1 and SequenceMatcher(None, part, w).ratio() >= FUZZY_RATIO
        }
        if close:
            out[a] = close
    return out


def named_authors(query: str, authors: Iterable[str], aliases: Mapping[str, str] | None = None) -> set[str]:
    """The authors (of ``authors``) the query names: by a part of the name or an alias, or else
    by a close spelling in a capitalised word that is not exactly another author's name."""
    pool = {a for a in authors if a}
    return set(_naming(query, pool, aliases)) if pool else set()


#: A name, with an English possessive after it ("Fahim's"), as one word of the query.
_NAME_WORD = re.compile(r"[^\W_\d]+(?:['’]s\b)?", re.UNICODE)
MIN_WORDS_LEFT = 2


def without_names(query: str, authors: Iterable[str], aliases: Mapping[str, str] | None = None) -> str:
    """The query with the words naming any of ``authors`` (and their possessive "'s") taken out,
    for the retrievers; unchanged if it names nobody or fewer than ``MIN_WORDS_LEFT`` words would
    remain ("Caroline?")."""
    pool = {a for a in authors if a}
    naming = _naming(query, pool, aliases) if pool else {}
    if not naming:
        return query
    drop = set().union(*naming.values())

    def keep(m: re.Match[str]) -> str:
        word = m.group(0)
        base = word[:-2] if word[-2:] in ("'s", "’s") else word
        return "" if base.lower() in drop or word.lower() in drop else word

    out = " ".join(_NAME_WORD.sub(keep, query).split())
    return out if len(_WORD.findall(out)) >= MIN_WORDS_LEFT else query


def preferred_authors(
    query: str, authors: Iterable[str], aliases: Mapping[str, str] | None = None
) -> set[str]:
    """Authors to favour: those named, unless the question names every author present."""
    pool = {a for a in authors if a}
    named = named_authors(query, pool, aliases)
    if not named or named >= pool:
        return set()
    return named
