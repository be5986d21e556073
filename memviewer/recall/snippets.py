"""Snippets centred on the match, for Latin and CJK text alike.

The text is whitespace-collapsed first (turns are often multi-line), the first
needle that occurs (case-insensitively) is centred in a ~``width``-character
window, and cut ends get an ellipsis. In spaced scripts the cut moves to a word
boundary when one is near, so a snippet does not start mid-word; CJK text has
no spaces and is cut at the exact character.
"""

from __future__ import annotations

from collections.abc import Sequence

SNIPPET_CHARS = 120
ELLIPSIS = "…"
_BOUNDARY_SLACK = 12  # how far to look for a space before cutting mid-word


def find_first(text: str, needles: Sequence[str]) -> tuple[int, int] | None:
    """``(start, length)`` of the first needle (in priority order) found in ``text``."""
    low = text.lower()
    for needle in needles:
        if not needle:
            continue
        pos = low.find(needle.lower())
        if pos >= 0:
            return pos, len(needle)
    return None


def make_snippet(content: str, needles: Sequence[str], width: int = SNIPPET_CHARS) -> str:
    text = " ".join(str(content).split())
    if len(text) <= width:
        return text
    found = find_first(text, needles)
    if found is None:
        start = 0
    else:
        pos, length = found
        start = max(0, pos - max(0, (width - length) // 2))
    end = min(len(text), start + width)
    start = max(0, end - width)
    if start > 0 and text[start - 1] != " ":
        space = text.find(" ", start, min(start + _BOUNDARY_SLACK, end))
        if space >= 0 and (found is None or space < found[0]):
            start = space + 1
    if end < len(text) and text[end] != " ":
        space = text.rfind(" ", max(start, end - _BOUNDARY_SLACK), end)
        if space > start and (found is None or space >= found[0] + found[1]):
            end = space
    snippet = text[start:end].strip()
    return (ELLIPSIS if start > 0 else "") + snippet + (ELLIPSIS if end < len(text) else "")
