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
docs/cli.md shape, no tool calls) gets them with ``attach_tool_calls_by_index``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memviewer.store.db import Store

SNIPPET_CHARS = 120
ELLIPSIS = "…"
_BOUNDARY_SLACK = 12  # how far to look for a space before cutting mid-word
TOOL_CALL_ARROW = "→"


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


def tool_call_names(tool_calls: Iterable[Any] | None) -> list[str]:
    """The function name of each call (OpenAI ``function.name``, else ``name``/``type``; ``?``)."""
    names: list[str] = []
    for call in tool_calls or []:
        name = None
        if isinstance(call, dict):
            fn = call.get("function")
            name = fn.get("name") if isinstance(fn, dict) else None
            name = name or call.get("name") or call.get("type")
        names.append(str(name or "?"))
    return names


def _has_arguments(call: Any) -> bool:
    if not isinstance(call, dict):
        return False
    fn = call.get("function")
    args = fn.get("arguments") if isinstance(fn, dict) else call.get("arguments", call.get("args"))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else None
        except ValueError:
            return True  # unparseable arguments are still arguments
    return bool(args)


def tool_call_label(tool_calls: Iterable[Any] | None) -> str:
    """``→ get_weather(…), get_time()``: the calls by name, arguments elided ("" without calls)."""
    calls = list(tool_calls or [])
    if not calls:
        return ""
    parts = [
        f"{name}({'…' if _has_arguments(call) else ''})"
        for name, call in zip(tool_call_names(calls), calls, strict=True)
    ]
    return f"{TOOL_CALL_ARROW} {', '.join(parts)}"


def _arguments(call: Any) -> Any:
    if not isinstance(call, dict):
        return None
    fn = call.get("function")
    args = fn.get("arguments") if isinstance(fn, dict) else call.get("arguments", call.get("args"))
    if isinstance(args, str):
        try:
            return json.loads(args) if args.strip() else None
        except ValueError:
            return args  # unparseable arguments are shown as sent
    return args


def arguments_brief(call: Any, width: int = 40) -> str:
    """A call's arguments on one line for people: ``path="a.py", limit=3`` (cut to ``width``)."""
    args = _arguments(call)
    if not args:
        return ""
    if isinstance(args, dict):
        text = ", ".join(
            f"{k}={json.dumps(v, ensure_ascii=False, separators=(',', ':'))}" for k, v in args.items()
        )
    else:
        text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(0, width - 1)] + ELLIPSIS


def tool_call_brief(tool_calls: Iterable[Any] | None, width: int = 40) -> str:
    """``→ read_file(path="a.py"), get_time()``: the calls by name with a short form of their
    arguments (each cut to ``width``), for a line that stands for the turn (``tail``, Live)."""
    calls = list(tool_calls or [])
    if not calls:
        return ""
    parts = [
        f"{name}({arguments_brief(call, width)})"
        for name, call in zip(tool_call_names(calls), calls, strict=True)
    ]
    return f"{TOOL_CALL_ARROW} {', '.join(parts)}"


def text_or_tool_calls(content: str | None, tool_calls: Iterable[Any] | None = None) -> str:
    """What a one-line view shows for a turn: its content, or its tool calls when it has no text."""
    text = str(content or "")
    return text if text.strip() else tool_call_label(tool_calls) or text


def attach_tool_calls_by_index(
    store: Store, session_id: str, messages: Iterable[MutableMapping[str, Any]]
) -> None:
    """Set ``tool_calls`` on the blank messages of one session's scroll window (keyed by
    index: the window carries no turn ids), read from the store, for display only."""
    from memviewer.store import repos

    blank = [m for m in messages if not str(m.get("content") or "").strip()]
    if not blank:
        return
    indexes = [int(m["index"]) for m in blank]
    with store.read() as conn:
        rows = repos.session_turns(conn, session_id, start=min(indexes), end=max(indexes))
    calls = {r["idx"]: r["tool_calls"] for r in rows}
    for m in blank:
        if calls.get(m["index"]):
            m["tool_calls"] = calls[m["index"]]
