"""Context anatomy: one LLM call's input split into parts, and what recall fed it.

Pure: the caller (``MemoryService.llm_call``) hands in the expanded call, the session's
turns, the recalled items (texts resolved) and a token counter. Every decision follows a
rule named in ``RULES`` and shown in the answer, so nothing is guessed silently:

* each input message gets one kind (``KINDS``): ``system_prompt`` (system messages before
  the conversation), ``compaction_summary`` (text equal to a compaction summary turn of the
  session), ``tool_results`` (tool role or tool-result parts), ``new_user_message`` (the last
  user message), ``active_turns`` (the other user/assistant messages; matched to a stored
  turn by text when one is equal), else ``unattributed`` (counted, with its reason);
* a recalled item is ``in_prompt`` by id when the call names the ids it put in the prompt,
  else when its text occurs in an input message (``TEXT_RULE``); its tokens there are
  counted as ``recalled_memories`` and taken off the message's own kind;
* a recalled turn that is archived (compaction removed it from the active window) and not
  in the prompt is flagged in ``compacted_away``: the question needed it, the model never saw it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

KINDS = (
    "system_prompt",
    "compaction_summary",
    "active_turns",
    "recalled_memories",
    "tool_results",
    "new_user_message",
    "unattributed",
)
PREFIX_CHARS = 200  # a long item is matched by its first characters (agents cut what they inject)
MIN_MATCH_CHARS = 8
TEXT_RULE = (
    f"text: the item's text, whitespace collapsed and case folded (its first {PREFIX_CHARS} "
    f"characters when longer), occurs in an input message; items under {MIN_MATCH_CHARS} "
    "characters are not matched (in_prompt null)"
)
RULES = {
    "system_prompt": "system/developer messages before the first other message",
    "compaction_summary": "a message whose text equals a compaction summary turn of the session",
    "tool_results": "tool role, or a message made of tool_call_response parts",
    "new_user_message": "the last user message of the input",
    "active_turns": "the other user and assistant messages (turn_id when a stored turn has the same text)",
    "recalled_memories": "the tokens of the recalled items found in a message, taken off the "
    "message's own kind (a recalled turn that is in the window as itself stays an active turn)",
    "unattributed": "anything else (a later system message, an unknown role, a non-object, "
    "input that is not a JSON list), counted with its reason",
    "in_prompt_by_id": "the call named the ids it put in the prompt (in_prompt): an item is in it iff "
    "its turn id or document id is named",
    "in_prompt_by_text": TEXT_RULE,
    "compacted_away": "a recalled turn that is archived and not in the prompt",
    "recalls_followed": "the recall ids the call names, else the recalls logged for its session "
    "since the previous call",
}
Count = Callable[[Sequence[str]], list[int]]
_WS = re.compile(r"\s+")


def norm(text: str) -> str:
    return _WS.sub(" ", text).strip().casefold()


def message_text(m: Any) -> tuple[str, str, bool]:
    """``(role, text, is_tool_result)`` of a message in any shape memviewer stores."""
    if not isinstance(m, dict):
        return "", json.dumps(m, ensure_ascii=False, default=str) if m is not None else "", False
    role = str(m.get("role") or "").lower()
    texts: list[str] = []
    parts = m.get("parts")
    tool_result = role in ("tool", "function", "ipython")
    if isinstance(parts, list):
        kinds = set()
        for p in parts:
            if not isinstance(p, dict):
                texts.append(str(p))
                continue
            kind = p.get("type")
            kinds.add(kind)
            if kind == "tool_call":
                args = p.get("arguments")
                texts.append(f"{p.get('name', '')}({_s(args)})")
            elif kind == "tool_call_response":
                texts.append(_s(p.get("response", p.get("result"))))
            elif isinstance(p.get("content"), str):
                texts.append(p["content"])
        tool_result = tool_result or (bool(kinds) and kinds <= {"tool_call_response"})
    else:
        content = m.get("content")
        if isinstance(content, list):
            texts += [c.get("text", "") if isinstance(c, dict) else str(c) for c in content]
        elif content is not None:
            texts.append(_s(content))
        for call in m.get("tool_calls") or []:
            if isinstance(call, dict):
                fn: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else call
                texts.append(f"{fn.get('name', '')}({_s(fn.get('arguments'))})")
    return role, "\n".join(t for t in texts if t), tool_result


def _s(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _preview(text: str, n: int = 160) -> str:
    one = _WS.sub(" ", text).strip()
    return one if len(one) <= n else one[: n - 1] + "…"


def classify(messages: list[Any], turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per input message: ``kind``, ``rule``, ``turn_id`` (matched by text)."""
    summaries = {norm(t["content"]) for t in turns if t.get("is_compaction_summary")}
    by_text: dict[tuple[str, str], dict[str, Any]] = {}
    for t in turns:
        if not t.get("is_compaction_summary"):
            by_text.setdefault((t["role"], norm(t.get("content") or "")), t)
    read = [message_text(m) for m in messages]
    last_user = max((i for i, (r, _, tr) in enumerate(read) if r in ("user", "human") and not tr), default=-1)
    rows: list[dict[str, Any]] = []
    conversation_started = False
    for i, (m, (role, text, tool_result)) in enumerate(zip(messages, read, strict=True)):
        row: dict[str, Any] = {"position": i, "role": role, "text": text, "turn_id": None, "archived": False}
        n = norm(text)
        if not isinstance(m, dict):
            row.update(kind="unattributed", reason="not a message object")
        elif n and n in summaries:
            row.update(kind="compaction_summary")
        elif role in ("system", "developer") and not conversation_started:
            row.update(kind="system_prompt")
        elif tool_result:
            row.update(kind="tool_results")
        elif i == last_user:
            row.update(kind="new_user_message")
        elif role in ("user", "human", "assistant", "model", "ai"):
            row.update(kind="active_turns")
        elif role in ("system", "developer"):
            row.update(kind="unattributed", reason="a system message inside the conversation")
        else:
            row.update(kind="unattributed", reason=f"unknown role {role!r}" if role else "no role")
        if row["kind"] not in ("system_prompt",) and isinstance(m, dict):
            conversation_started = conversation_started or role not in ("system", "developer")
        if row["kind"] in ("active_turns", "new_user_message"):
            key_role = "user" if role in ("user", "human") else "assistant"
            match = by_text.get((key_role, n))
            if match is not None:
                row["turn_id"], row["archived"] = match["turn_id"], bool(match.get("archived"))
        rows.append(row)
    return rows


def match_items(
    items: list[dict[str, Any]], rows: list[dict[str, Any]], in_prompt_ids: list[str] | None
) -> None:
    """Set ``in_prompt``, ``matched_by`` and ``position`` on each recalled item (in place)."""
    normed = [norm(r["text"]) for r in rows]
    named = set(in_prompt_ids) if in_prompt_ids is not None else None
    for item in items:
        text = norm(item.get("text") or "")
        needle = text[:PREFIX_CHARS]
        pos = next((i for i, n in enumerate(normed) if len(needle) >= MIN_MATCH_CHARS and needle in n), None)
        if named is not None:
            item["matched_by"] = "id"
            item["in_prompt"] = bool({item.get("turn_id"), item.get("doc_id")} & named)
            item["position"] = pos if item["in_prompt"] else None
        elif len(needle) < MIN_MATCH_CHARS:
            item["matched_by"] = None
            item["in_prompt"] = None
            item["position"] = None
            item["reason"] = "no text to match" if not needle else "too short to match by text"
        else:
            item["matched_by"] = "text"
            item["in_prompt"] = pos is not None
            item["position"] = pos


def anatomy(
    call: dict[str, Any],
    turns: list[dict[str, Any]],
    items: list[dict[str, Any]],
    count: Count,
    *,
    recalls_rule: str,
) -> dict[str, Any]:
    """The anatomy of ``call`` (``memviewer.context.calls.public`` with ``full``)."""
    messages = call.get("input")
    raw = call.get("raw_input")
    if not isinstance(messages, list):
        rows = []
        if raw:
            rows = [{"position": 0, "role": "", "text": raw, "kind": "unattributed", "turn_id": None}]
            rows[0]["reason"] = "the input is not a JSON list of messages (kept as received)"
    else:
        rows = classify(messages, turns)
    match_items(items, rows, call.get("in_prompt_ids"))
    texts = [r["text"] for r in rows]
    found = [
        (it, rows[it["position"]]) for it in items if it.get("in_prompt") and it.get("position") is not None
    ]
    counts = count(texts + [it.get("text") or "" for it, _ in found]) if (texts or found) else []
    for r, n in zip(rows, counts, strict=False):
        r["tokens"], r["recalled_tokens"] = n, 0
    for (it, r), n in zip(found, counts[len(rows) :], strict=True):
        it["tokens"] = n
        if r["kind"] == "active_turns" and r.get("turn_id") and r["turn_id"] == it.get("turn_id"):
            it["as"] = "active_turn"  # the recalled turn is in the window as itself
            continue
        r["recalled_tokens"] = min(r["tokens"], r["recalled_tokens"] + n)
    totals = dict.fromkeys(KINDS, 0)
    msgs_of = dict.fromkeys(KINDS, 0)
    for r in rows:
        own = r["tokens"] - r["recalled_tokens"]
        totals["recalled_memories"] += r["recalled_tokens"]
        totals[r["kind"]] += own
        msgs_of[r["kind"]] += 1
    total = sum(totals.values())
    window = call.get("context_window")
    parts = [
        {
            "kind": k,
            "tokens": totals[k],
            "messages": msgs_of[k],
            "share": round(totals[k] / total, 4) if total else 0.0,
            "share_of_window": round(totals[k] / window, 4) if window else None,
        }
        for k in KINDS
    ]
    compacted = [
        {k: it.get(k) for k in ("turn_id", "session_id", "index", "recall_id", "rank", "preview")}
        for it in items
        if it.get("archived") and it.get("in_prompt") is False
    ]
    unattributed = [r for r in rows if r["kind"] == "unattributed"]
    return {
        "input_tokens": total,
        "reported_input_tokens": (call.get("usage") or {}).get("input_tokens"),
        "context_window": window,
        "window_note": None if window else "the context window is unknown: shares are of the input",
        "parts": parts,
        "messages": [
            {
                "position": r["position"],
                "role": r["role"],
                "kind": r["kind"],
                "tokens": r["tokens"],
                "recalled_tokens": r["recalled_tokens"],
                "turn_id": r.get("turn_id"),
                "archived": r.get("archived", False),
                "hash": (call.get("input_hashes") or [None] * len(rows))[r["position"]]
                if call.get("input_hashes")
                else None,
                "preview": _preview(r["text"]),
                **({"reason": r["reason"]} if r.get("reason") else {}),
            }
            for r in rows
        ],
        "recalled": [{k: v for k, v in it.items() if k != "text"} for it in items],
        "compacted_away": compacted,
        "counts": {
            "unattributed": len(unattributed),
            "recalled": len(items),
            "in_prompt": sum(1 for it in items if it.get("in_prompt") is True),
            "not_in_prompt": sum(1 for it in items if it.get("in_prompt") is False),
            "unmatched": sum(1 for it in items if it.get("in_prompt") is None),
            "compacted_away": len(compacted),
        },
        "rules": {**RULES, "recalls_followed": recalls_rule},
    }


def diff(current: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any] | None:
    """What entered and what left the window between two consecutive calls' anatomies
    (messages compared by content hash, as a multiset)."""
    if previous is None:
        return None
    cur = [m for m in current["messages"] if m.get("hash")]
    prev = [m for m in previous["messages"] if m.get("hash")]
    before = Counter(m["hash"] for m in prev)
    after = Counter(m["hash"] for m in cur)
    entered, left = [], []
    seen: Counter[str] = Counter()
    for m in cur:
        seen[m["hash"]] += 1
        if seen[m["hash"]] > before[m["hash"]]:
            entered.append(_diff_row(m))
    seen = Counter()
    for m in prev:
        seen[m["hash"]] += 1
        if seen[m["hash"]] > after[m["hash"]]:
            left.append(_diff_row(m))
    return {
        "previous_call_id": previous["call_id"],
        "kept": sum((before & after).values()),
        "entered": entered,
        "left": left,
        "entered_tokens": sum(m["tokens"] for m in entered),
        "left_tokens": sum(m["tokens"] for m in left),
    }


def _diff_row(m: dict[str, Any]) -> dict[str, Any]:
    return {k: m.get(k) for k in ("position", "role", "kind", "tokens", "turn_id", "preview")}
