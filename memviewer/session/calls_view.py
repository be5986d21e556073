"""Reading LLM calls: the list, and one call with its context anatomy and its diff from
the call before it (``MemoryService.llm_calls`` / ``llm_call``; rules in
``memviewer.context.anatomy``)."""

from __future__ import annotations

from typing import Any

from memviewer.context import anatomy as an
from memviewer.context import calls
from memviewer.errors import NOT_FOUND, MemviewerError
from memviewer.store import llm_calls as rows
from memviewer.store import recall_log, repos
from memviewer.store.db import Connection


def _missing_table(exc: Exception) -> bool:
    return "llm_calls" in str(exc) or "llm_messages" in str(exc)


def list_page(conn: Connection, *, session_id: str | None, limit: int, offset: int) -> dict[str, Any]:
    try:
        total, page = rows.list_calls(conn, session_id=session_id, limit=limit, offset=offset)
        counts = rows.counts(conn)
    except Exception as exc:  # a read-only store of an older schema has no calls yet
        if not _missing_table(exc):
            raise
        total, page, counts = 0, [], {"calls": 0, "messages": 0, "without_session": 0}
    problems: dict[str, int] = {}
    for r in page:
        for p in r.get("problems") or []:
            problems[p] = problems.get(p, 0) + 1
    out = [calls.public(r, full=False) for r in page]
    if session_id is not None and out:  # where each call sits among the session's turns
        stamps = sorted((t["timestamp"], t["idx"]) for t in repos.session_turns(conn, session_id))
        for c in out:
            c["after_index"] = next((i for ts, i in reversed(stamps) if ts <= c["ts"]), None)
    return {
        "total": total,
        "offset": offset,
        "calls": out,
        "problems": problems,
        "store": counts,
    }


def _items(conn: Connection, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every result of the recalls followed, with its text (a turn's content when it names one)."""
    turn_ids = [r["turn_id"] for e in entries for r in (e.get("results") or []) if r.get("turn_id")]
    turns = repos.get_turns(conn, turn_ids) if turn_ids else {}
    items: list[dict[str, Any]] = []
    for e in entries:
        for i, r in enumerate(e.get("results") or []):
            t = turns.get(r.get("turn_id") or "")
            text = r.get("text") or (t["content"] if t else "")
            doc = r.get("doc_id", r.get("id"))
            items.append(
                {
                    "recall_id": e["id"],
                    "query": e["query"],
                    "rank": r.get("rank") or i + 1,
                    "turn_id": r.get("turn_id"),
                    "doc_id": doc if isinstance(doc, str) else None,
                    "session_id": t["session_id"] if t else r.get("session_id"),
                    "index": t["idx"] if t else r.get("index"),
                    "archived": bool(t["archived"]) if t else False,
                    "score": r.get("score"),
                    "text": text,
                    "preview": an._preview(text),
                }
            )
    return items


def _anatomy_of(conn: Connection, row: dict[str, Any], count: an.Count, prev: dict[str, Any] | None) -> Any:
    full = rows.expand(conn, row)
    call = calls.public(full)
    call["input_hashes"] = full.get("input_hashes")
    sid = row.get("session_id")
    turns = [repos.turn_public(t) for t in repos.session_turns(conn, sid)] if sid else []
    if call["recall_ids"]:
        entries = [e for rid in call["recall_ids"] if (e := recall_log.get(conn, rid)) is not None]
        rule = "the recall ids the call names"
        missing = [rid for rid in call["recall_ids"] if not any(e["id"] == rid for e in entries)]
    elif sid:
        entries = recall_log.in_window(conn, sid, prev["ts"] if prev else None, row["ts"])
        rule = "the recalls logged for the call's session since the previous call"
        missing = []
    else:
        entries, rule, missing = [], "none: the call has no session", []
    out = an.anatomy(call, turns, _items(conn, entries), count, recalls_rule=rule)
    out["recalls_followed"] = [e["id"] for e in entries]
    out["recalls_missing"] = missing
    return call, out


def show(conn: Connection, call_id: str, count: an.Count) -> dict[str, Any]:
    row = None
    try:
        row = rows.get(conn, call_id)
    except Exception as exc:
        if not _missing_table(exc):
            raise
    if row is None:
        raise MemviewerError(
            NOT_FOUND, f"unknown LLM call {call_id!r}", hint="list them with `memviewer calls`"
        )
    prev_row = rows.previous(conn, row)
    prev_prev = rows.previous(conn, prev_row) if prev_row else None
    call, anat = _anatomy_of(conn, row, count, prev_row)
    diff = None
    if prev_row is not None:
        _, prev_anat = _anatomy_of(conn, prev_row, count, prev_prev)
        diff = an.diff(anat, {**prev_anat, "call_id": prev_row["id"]})
    call.pop("input_hashes", None)
    return {"call": call, "anatomy": anat, "diff": diff}
