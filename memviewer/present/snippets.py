"""Snippets centred on the match, for Latin and CJK text alike.

The text is whitespace-collapsed first (turns are often multi-line), the first
needle that occurs (case-insensitively) is centred in a ~``width``-character
window, and cut ends get an ellipsis. In spaced scripts the cut moves to a word
boundary when one is near, so a snippet does not start mid-word; CJK text has
no spaces and is cut at the exact character.

An assistant turn that only calls tools has empty content; wherever a result
row shows a turn's text, ``text_or_tool_calls`` shows the calls instead (``→
get_weather(…)``) so such a row does not look blank. Recall asked
``with_tool_calls=True`` puts them on its rows itself; search's scroll window (the
docs/cli.md shape, no tool calls) gets them with ``Inspector.attach_tool_calls``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memviewer.tool_call_text import (  # the one way a tool call reads on one line
    TOOL_CALL_ARROW,
    arguments_brief,
    tool_call_brief,
    tool_call_label,
    tool_call_names,
)

__all__ = ["TOOL_CALL_ARROW", "arguments_brief", "tool_call_brief", "tool_call_label", "tool_call_names"]

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


def anchor_archived(hit: Mapping[str, Any]) -> bool:
    """Whether a search hit's anchor turn was compacted out of the agent's active window
    (its row in the hit's ``messages``); the CLI and the viewer both say so beside ``#N``."""
    return any(
        m.get("archived") for m in hit.get("messages") or [] if m.get("index") == hit.get("anchor_index")
    )


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


def text_or_tool_calls(content: str | None, tool_calls: Iterable[Any] | None = None) -> str:
    """What a one-line view shows for a turn: its content, or its tool calls when it has no text."""
    text = str(content or "")
    return text if text.strip() else tool_call_label(tool_calls) or text
