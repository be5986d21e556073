"""How a turn's tool calls read on one line, for people: the names, and a short form of
their arguments. Pure and standard library only, so every front end shares it: recall's and
search's rows (``recall.snippets``), ``tail`` and the Live screen (``wire.event_summary``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

ELLIPSIS = "…"
TOOL_CALL_ARROW = "→"


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


def tool_call_label(tool_calls: Iterable[Any] | None) -> str:
    """``→ get_weather(…), get_time()``: the calls by name, arguments elided ("" without calls)."""
    return _calls_line(tool_calls, lambda call: "…" if _arguments(call) else "")


def _calls_line(tool_calls: Iterable[Any] | None, shown: Callable[[Any], str]) -> str:
    """``→ name(shown(call)), …`` for the calls ("" without calls)."""
    calls = list(tool_calls or [])
    if not calls:
        return ""
    parts = [f"{name}({shown(call)})" for name, call in zip(tool_call_names(calls), calls, strict=True)]
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
    return _calls_line(tool_calls, lambda call: arguments_brief(call, width))
