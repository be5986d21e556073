"""What an event says, in one line for people: shared by ``memviewer tail`` and the viewer's
Live screen, so the two show the same event the same way.

Only the summary is shared; each front end puts its own columns (seq, time, kind, session)
in front and cuts the line to its width. A payload is never shown as a Python repr: lists
become a count and their first items, nested objects compact JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from memviewer.tool_call_text import tool_call_brief

LIST_HEAD = 2  # how many items of a list a line names before "+N more"


def items_text(values: Any, noun: str, head: int = LIST_HEAD) -> str:
    """``3 turns: t-1, t-2 +1 more``: a count and the first ``head`` items."""
    seq = list(values) if isinstance(values, list | tuple) else []
    count = f"{len(seq)} {noun if len(seq) == 1 else noun + 's'}"
    if not seq:
        return count
    shown = ", ".join(_scalar(v) for v in seq[:head])
    more = f" +{len(seq) - head} more" if len(seq) > head else ""
    return f"{count}: {shown}{more}"


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _field(key: str, value: Any) -> str:
    if isinstance(value, list | tuple):
        return f"{key}: {items_text(value, 'item')}"
    return f"{key}={_scalar(value)}"


def fields_text(payload: Mapping[str, Any]) -> str:
    """Any payload as ``key=value`` pairs; lists as a count and their first items."""
    return " ".join(_field(k, v) for k, v in payload.items() if v is not None)


def _turn_added(p: Mapping[str, Any]) -> str:
    turn = p.get("turn") or {}
    tool = (turn.get("metadata") or {}).get("tool")
    role = f"{turn.get('role', '?')}[{tool}]" if tool else str(turn.get("role", "?"))
    text = str(turn.get("content") or "")
    calls = tool_call_brief(turn.get("tool_calls"))
    return " ".join(part for part in (f"#{turn.get('index', '?')} {role}:", text, calls) if part)


def _episode_started(p: Mapping[str, Any]) -> str:
    intent = (p.get("intent") or {}).get("kind", "?")
    return f"[{intent}] {p.get('user_message', '')}"


def _session_started(p: Mapping[str, Any]) -> str:
    source = f" source={p['source']}" if p.get("source") else ""
    title = f" {p['title']}" if p.get("title") else ""
    return f"agent={p.get('agent', '')} scope={p.get('scope', '')}:{p.get('scope_id', '')}{source}{title}"


def _episode_closed(p: Mapping[str, Any]) -> str:
    out = str(p.get("closed_by") or "?")  # "finalized", "abandoned", "session_closed", …
    if p.get("reason"):
        out += f" reason={p['reason']}"
    if p.get("r_task") is not None:
        out += f" r_task={p['r_task']}"
    return out


def _compacted(p: Mapping[str, Any]) -> str:
    return (
        f"archived {p.get('archived_count', '?')} turns, summary at #{p.get('summary_index', '?')}"
        f" replaces {p.get('replaced_count', '?')}, {p.get('active_count', '?')} kept active"
    )


def _imported(p: Mapping[str, Any]) -> str:
    source = f" from {p['source']}" if p.get("source") else ""
    partial = " (partial)" if p.get("partial") else ""
    return (
        f"{p.get('turns', '?')} turns ({p.get('new_turns', 0)} new, {p.get('archived_turns', 0)} archived)"
        f"{source}{partial}"
    )


def _deleted(p: Mapping[str, Any]) -> str:
    episodes = p.get("episodes")
    n = f"{episodes} episode{'' if episodes == 1 else 's'}" if isinstance(episodes, int) else "? episodes"
    return f"deleted {n}, {items_text(p.get('turn_ids') or [], 'turn')}"


def _agent_changed(p: Mapping[str, Any]) -> str:
    scope = f" (scope {p.get('scope')}:{p.get('scope_id')})" if p.get("scope_changed") else ""
    return f"agent {p.get('previous_agent', '?')} → {p.get('agent', '?')}{scope}"


def _idle_pruned(p: Mapping[str, Any]) -> str:
    from datetime import UTC, datetime

    cutoff = p.get("cutoff")
    if not isinstance(cutoff, int | float):
        return fields_text(p)
    return f"idle since before {datetime.fromtimestamp(cutoff, tz=UTC):%Y-%m-%d %H:%M:%S} UTC"


def _recall(p: Mapping[str, Any]) -> str:
    what = f"{p.get('source', '?')} {p.get('kind', 'recall')}"
    return f"{what} “{p.get('query', '')}” → {p.get('result_count', 0)} results"


def _llm_call(p: Mapping[str, Any]) -> str:
    problems = p.get("problems") or []
    tokens = f", {p['input_tokens']} input tokens" if p.get("input_tokens") is not None else ""
    return f"{p.get('model', '?')}: {p.get('input_messages', '?')} input messages{tokens}" + (
        f", {items_text(problems, 'problem')}" if problems else ""
    )


SUMMARIES: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "episode.turn_added": _turn_added,
    "episode.started": _episode_started,
    "episode.finalized": _episode_closed,
    "episode.abandoned": _episode_closed,
    "session.started": _session_started,
    "session.compacted": _compacted,
    "session.imported": _imported,
    "session.deleted": _deleted,
    "session.agent_changed": _agent_changed,
    "session.idle_pruned": _idle_pruned,
    "recall.performed": _recall,
    "llm_call.recorded": _llm_call,
}


def event_summary(kind: str, payload: Mapping[str, Any] | None) -> str:
    """What happened, uncut and not yet made terminal-safe (the caller does both)."""
    p = payload or {}
    known = SUMMARIES.get(kind)
    return known(p) if known is not None else fields_text(p)
