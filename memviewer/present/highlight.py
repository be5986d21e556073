"""Where a keyword query's terms occur in a text, for highlighting (CLI and viewer alike).

The terms follow the search syntax loosely: "quoted phrases" are one term, other words
split on whitespace; matching is case-insensitive and literal (no operator is special).
Single Latin letters are skipped (they would light up every word); a single CJK
character is kept, since one can be a whole word.
"""

from __future__ import annotations

import re
from functools import lru_cache

_QUOTED = re.compile(r'"([^"]+)"')
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def query_terms(query: str | None) -> tuple[str, ...]:
    """The distinct terms of ``query``, longest first (so a phrase wins over its words)."""
    if not query:
        return ()
    terms = [p.strip() for p in _QUOTED.findall(query) if p.strip()]
    rest = _QUOTED.sub(" ", query)
    terms += [w.strip("\"'.,;:!?()[]{}") for w in rest.split()]
    seen: dict[str, None] = {}
    for term in terms:
        if term and (len(term) > 1 or _CJK.match(term)):
            seen.setdefault(term.lower(), None)
    return tuple(sorted(seen, key=len, reverse=True))


@lru_cache(maxsize=64)
def _pattern(terms: tuple[str, ...]) -> re.Pattern[str] | None:
    if not terms:
        return None
    return re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE)


def match_spans(text: str, terms: tuple[str, ...]) -> list[tuple[int, int]]:
    """``(start, end)`` of every non-overlapping occurrence of a term in ``text``."""
    pattern = _pattern(terms)
    if pattern is None or not text:
        return []
    return [m.span() for m in pattern.finditer(text) if m.end() > m.start()]
