"""Session summaries and chat windows of the sessions a pass touched.

Whether a summary is rewritten follows ``memviewer.index.summarizer.needs_refresh`` (or is
forced: a closed, re-imported or re-scoped session); an unchanged input (same source hash)
keeps it. A summary's opening is also the context of its session's turns when contextual
embeddings are on (``PassContext.contexts``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memviewer.index.lance import SUMMARIES, WINDOWS, in_filter
from memviewer.store import indexing

if TYPE_CHECKING:
    from memviewer.index.pass_context import PassContext

Progress = Callable[[int, int, str], None]

SUMMARY_CHUNK = 256
CONTEXT_CHARS = 300
#: The summarizer reads at most this much of each turn: its work grows with the whole
#: text, and a summary of a 20 MB message needs no more than its start.
SUMMARY_TURN_CHARS = 20_000

_KEPT = ["session_id", "turn_count", "source_hash", "summary", "scope", "scope_id"]


@dataclass
class _Fresh:
    """A summary written in this pass: its index row (without vector), the text embedded, its windows."""

    row: dict[str, Any]
    text: str
    windows: tuple[str, ...]


def summarise(
    p: PassContext, session_ids: Iterable[str], forced: set[str], progress: Progress | None = None
) -> int:
    """Refresh the summaries of these sessions, ``SUMMARY_CHUNK`` at a time; returns how many were written."""
    ids = list(session_ids)
    done = 0
    for i in range(0, len(ids), SUMMARY_CHUNK):
        done += _summarise_chunk(p, ids[i : i + SUMMARY_CHUNK], forced)
        if progress is not None and len(ids) > SUMMARY_CHUNK:  # only when it takes a while
            progress(min(i + SUMMARY_CHUNK, len(ids)), len(ids), "summaries")
    return done


def _summarise_chunk(p: PassContext, ids: list[str], forced: set[str]) -> int:
    if not ids:
        return 0
    existing = {r["session_id"]: r for r in p.index.rows(SUMMARIES, in_filter("session_id", ids), _KEPT)}
    fresh: list[_Fresh] = []
    with p.store.read() as conn:
        counts = indexing.turn_counts(conn, ids)
        sessions = indexing.session_heads(conn, ids)
        for sid in ids:
            session = sessions.get(sid)
            if session is None:
                continue
            done = _summarise_session(
                p,
                session,
                existing.get(sid),
                count=counts.get(sid, 0),
                force=sid in forced,
                read_turns=lambda sid: indexing.summary_input(conn, sid, SUMMARY_TURN_CHARS),
            )
            if done is not None:
                fresh.append(done)
    if fresh:
        _write(p, fresh)
    return len(fresh)


def _summarise_session(
    p: PassContext,
    session: dict[str, Any],
    prev: dict[str, Any] | None,
    *,
    count: int,
    force: bool,
    read_turns: Callable[[str], list[dict[str, Any]]],
) -> _Fresh | None:
    """A new summary of one session, or None when the indexed one stands (its context kept)."""
    from memviewer.index.summarizer import needs_refresh

    sid = session["id"]
    scope_moved = prev is not None and (prev["scope"], prev["scope_id"]) != (
        session["scope"],
        session["scope_id"],
    )
    if not needs_refresh(prev["turn_count"] if prev else None, count, force=force or scope_moved):
        if prev is not None:
            p.contexts.setdefault(sid, prev["summary"][:CONTEXT_CHARS])
        return None
    turns = read_turns(sid)
    if prev is not None and not scope_moved and prev["source_hash"] == p.summarizer.source_hash(turns):
        p.contexts.setdefault(sid, prev["summary"][:CONTEXT_CHARS])
        return None  # unchanged input: idempotent
    result = p.summarizer.summarize(turns, session.get("title") or "")
    p.contexts[sid] = result.summary[:CONTEXT_CHARS]
    row = {
        "session_id": sid,
        "scope": session["scope"] or "",
        "scope_id": session["scope_id"] or "",
        "summary": result.summary,
        "search_text": result.search_text,
        "turn_count": result.turn_count,
        "source_hash": result.source_hash,
        "method": result.method,
        "updated": time.time(),
    }
    return _Fresh(row, result.summary or session.get("title") or sid, tuple(result.windows))


def _write(p: PassContext, fresh: list[_Fresh]) -> None:
    """Embed and store the new summaries and their sessions' windows.

    A window whose text is unchanged keeps its vector: a growing chat embeds only its new
    windows (they start at fixed offsets, so the earlier ones stay the same).
    """
    from memviewer.index.summarizer import window_hash

    rows = [f.row for f in fresh]
    windows = [(f.row["session_id"], i, text) for f in fresh for i, text in enumerate(f.windows)]
    kept = (
        p.index.vectors(WINDOWS, "session_id", [r["session_id"] for r in rows], by="text_hash")
        if windows
        else {}
    )
    hashes = [window_hash(w[2]) for w in windows]
    new_at = [i for i, h in enumerate(hashes) if h not in kept]
    vectors = p.embedder.embed([f.text for f in fresh] + [windows[i][2] for i in new_at])
    for row, vec in zip(rows, vectors[: len(rows)], strict=True):
        row["vector"] = vec
    new = dict(zip((hashes[i] for i in new_at), vectors[len(rows) :], strict=True))
    scopes = {r["session_id"]: (r["scope"], r["scope_id"]) for r in rows}
    p.index.replace_windows(
        list(scopes),
        [
            {
                "window_id": f"{sid}#{i}",
                "session_id": sid,
                "scope": scopes[sid][0],
                "scope_id": scopes[sid][1],
                "text_hash": h,
                "vector": new[h] if h in new else kept[h],
            }
            for (sid, i, _text), h in zip(windows, hashes, strict=True)
        ],
    )
    p.index.upsert_summaries(rows)
