"""Counted words for people: ``plural(1, "session")`` is "1 session", ``plural(1204,
"turn")`` "1,204 turns". Every message that counts something says it through here, so no
line reads "1 sessions"; JSON keys and values are never built with it."""

from __future__ import annotations


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` (with thousands separators) and ``word``, made plural unless ``n`` is 1.

    ``many`` is the plural when adding "s" is wrong ("summary" → "summaries").
    """
    return f"{n:,} {word if n == 1 else (many or word + 's')}"
