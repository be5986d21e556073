"""Compaction: archive the oldest active turns behind one carried-forward summary.

Invariants (tested): ``index`` is always the position in the session's
archived+active projection; archived turns never change index again once
archived; there is at most one summary turn (role ``system``, flagged) and it
sits at the head of the active window; its text carries earlier highlights
forward instead of nesting summaries; ``replaced_count`` is cumulative.
When the active window exceeds ``active_window`` real turns, it is cut back to
half of it, so compaction happens in rounds rather than on every turn. The cut never
separates a tool call from its results (``tool_safe_cut``).
"""

from __future__ import annotations

import logging
from typing import Any

from memviewer.ids import new_id
from memviewer.store import compaction_moves, repos
from memviewer.store.db import Connection, WriteTx

log = logging.getLogger("memviewer.session")

MAX_HIGHLIGHTS = 24
HIGHLIGHT_CHARS = 100
HEADER = "[compaction summary] {n} earlier turns were archived."


def _highlight(turn: dict[str, Any]) -> str | None:
    if turn["role"] not in ("user", "assistant"):
        return None
    text = " ".join(str(turn["content"]).split())
    if not text:
        return None
    if len(text) > HIGHLIGHT_CHARS:
        text = text[: HIGHLIGHT_CHARS - 1] + "…"
    return f"- {turn['role']}: {text}"


def summary_text(previous: str | None, archived: list[dict[str, Any]], total: int) -> str:
    """Header with the cumulative count, earlier highlights carried, new ones appended."""
    lines: list[str] = []
    if previous:
        lines = [ln for ln in previous.splitlines()[1:] if ln.startswith("- ")]
    lines += [h for t in archived if (h := _highlight(t))]
    lines = lines[-MAX_HIGHLIGHTS:]
    return "\n".join([HEADER.format(n=total), *lines])


def needs_compaction(conn: Connection, session: dict[str, Any]) -> bool:
    if session["retention"] != "compact":
        return False
    return repos.active_real_turns(conn, session["id"]) > int(session["active_window"])


def tool_safe_cut(real: list[dict[str, Any]], cut: int) -> int:
    """Move the archive boundary so a tool call and its results stay on one side.

    The active window must never open with a ``tool`` result whose calling assistant
    turn was archived: an agent rebuilding its chat history from it would send
    ``[system, tool, ...]``, which OpenAI-style APIs reject. The boundary moves back
    (the call stays active with its results); when the call is the very first turn,
    it moves forward instead (the results are archived with their call).
    """
    back = cut
    while 0 < back < len(real) and real[back]["role"] == "tool":
        back -= 1
    if back > 0 or cut == 0:
        return back
    forward = cut
    while forward < len(real) and real[forward]["role"] == "tool":
        forward += 1
    return forward


def compact(tx: WriteTx, session: dict[str, Any], ts: float, keep: int | None = None) -> dict[str, Any]:
    """Archive the oldest active turns, keeping ``keep`` (default half the window)."""
    conn = tx.conn
    sid = session["id"]
    keep = max(1, int(session["active_window"]) // 2) if keep is None else keep
    active = repos.session_turns(conn, sid, archived=False)
    summary = next((t for t in active if t["is_compaction_summary"]), None)
    real = [t for t in active if not t["is_compaction_summary"]]
    to_archive = real[: tool_safe_cut(real, max(0, len(real) - keep))]
    if not to_archive:
        return {}
    n = len(to_archive)
    first, last = to_archive[0]["idx"], to_archive[-1]["idx"]
    if summary is None:
        # [archived..][to_archive][rest] -> [archived..][to_archive][summary][rest+1]
        compaction_moves.archive_first_round(conn, sid, first, last)
        total = n
        summary_id = new_id("t-")
        summary_idx = last + 1
        content = summary_text(None, to_archive, total)
        repos.insert_turn(
            conn,
            {
                "id": summary_id,
                "session_id": sid,
                "episode_id": None,
                "idx": summary_idx,
                "role": "system",
                "content": content,
                "timestamp": ts,
                "archived": False,
                "is_compaction_summary": True,
                "replaced_count": total,
                "tool_calls": None,
                "tool_call_id": None,
                "meta": {"compaction": True, "compacted_count": total},
            },
        )
    else:
        # [archived..][summary s][to_archive s+1..][rest] -> [archived..][to_archive s..][summary]
        compaction_moves.archive_behind_summary(conn, sid, first, last)
        total = int(summary["replaced_count"] or 0) + n
        summary_id = summary["id"]
        summary_idx = last
        content = summary_text(summary["content"], to_archive, total)
        meta = dict(summary["meta"] or {})
        meta.update({"compaction": True, "compacted_count": total})
        repos.update_turn(
            conn, summary_id, idx=summary_idx, content=content, replaced_count=total, timestamp=ts, meta=meta
        )
    archived_ids = [t["id"] for t in to_archive]
    tx.append_event(
        "session.compacted",
        sid,
        None,
        {
            "archived_count": n,
            "archived_turn_ids": archived_ids,
            "summary_turn_id": summary_id,
            "summary_index": summary_idx,
            "summary": content,
            "replaced_count": total,
            "active_count": keep,
        },
        ts=ts,
    )
    log.info("compacted session %s: %d turns archived (%d total)", sid, n, total)
    return {"archived": n, "summary_turn_id": summary_id, "replaced_count": total}
