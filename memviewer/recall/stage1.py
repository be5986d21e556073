"""Stage 1 of recall: the scope's sessions ranked for the query, the top K kept.

A session scores by its summary (cosine + BM25); in a chat between named people also by its
best Stage-2 turn and its best window of consecutive turns (``index/window_cache.py``); and,
when the query names a date, by its turn nearest that window (``store/time_window.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memviewer.contract import timeref
from memviewer.recall import lexical, scoring
from memviewer.recall.stage2 import is_chat
from memviewer.recall.trace import RecallTrace
from memviewer.recall.tuning import chat_weights

if TYPE_CHECKING:
    import numpy as np

    from memviewer.index.lance import LanceIndex
    from memviewer.index.window_cache import WindowVectors
    from memviewer.store.db import Store

SUMMARY_COLUMNS = ["session_id", "summary", "vector"]


def rank_sessions(
    store: Store,
    index: LanceIndex,
    qvec: np.ndarray,
    query: str,
    where: str | None,
    scope: tuple[str | None, str | None],
    k: int,
    w: scoring.Weights,
    tune: dict[str, float],
    candidates: list[dict[str, Any]],
    window: timeref.TimeWindow | None = None,
    trace: RecallTrace | None = None,
    *,
    windows: WindowVectors | None = None,
    cut: bool = True,
) -> list[dict[str, Any]]:
    """Stage 1: sessions by summary similarity + summary BM25 (+ their best candidate turn,
    + in a chat their best window, + closeness to a date the query names). ``cut=False``
    returns every ranked session (fetched as deep as for ``k``), for a ``RerunCache``."""
    import numpy as np

    from memviewer.index.lance import SUMMARIES, in_filter

    depth = max(k, int(tune["session_depth"]))
    dense = index.dense(SUMMARIES, qvec, where, depth, SUMMARY_COLUMNS)
    keyword = lexical.summary_hits(
        index, query, where, depth, SUMMARY_COLUMNS, raw=bool(tune["raw_keyword_query"])
    )
    rows: dict[str, dict[str, Any]] = {r["session_id"]: r for r in dense}
    bm25: dict[str, float] = {}
    for r in keyword:
        bm25[r["session_id"]] = float(r["_score"])
        rows.setdefault(r["session_id"], r)
    best_turn: dict[str, float] = {}
    top_n = max(1, int(tune["session_turn_top"]))
    seen: dict[str, int] = {}
    for c in candidates:  # best first: the session's best turn, plus half the next, a quarter …
        sid = c["session_id"]
        i = seen.get(sid, 0)
        if i < top_n:
            best_turn[sid] = best_turn.get(sid, 0.0) + c["score"] * 0.5**i
            seen[sid] = i + 1
    turn_w = float(tune["session_turn_weight"])
    chat = is_chat(candidates)
    if chat:
        w = chat_weights(w, tune)
    if turn_w <= 0 and chat:
        # a chat between named people: its summary cannot hold a day of talk, so the session's
        # best turn takes a share (0.4, then 0.6 once names left the query; docs/benchmarks.md)
        turn_w = float(tune["chat_session_turn_weight"])
    wanted = [sid for sid in best_turn if sid not in rows] if turn_w > 0 else []
    if window is not None:  # sessions with a turn in the window join the candidates
        wanted += [sid for sid in sessions_in(store, scope, window) if sid not in rows and sid not in wanted]
    if wanted:
        for r in index.rows(SUMMARIES, in_filter("session_id", wanted), SUMMARY_COLUMNS):
            rows[r["session_id"]] = r
    if not rows:
        return []
    closeness = time_closeness(store, list(rows), window) if window is not None else {}
    ids = list(rows)
    cos = np.asarray([rows[s]["vector"] for s in ids], dtype=np.float32) @ np.asarray(qvec, np.float32)
    max_bm25 = scoring.max_of(bm25.values())
    max_turn = scoring.max_of(best_turn.values())
    win_w = float(tune["chat_window_share"]) if chat and windows is not None else 0.0
    best_window, complete = (
        windows.best(index, where, qvec, int(tune["window_depth"])) if windows and win_w > 0 else ({}, True)
    )
    if best_window and complete:
        # a session holding a candidate message of a named author has windows once they are
        # written: one without them is still waiting, and the share would favour the others
        expected = {c["session_id"] for c in candidates if c.get("_authored") and str(c["text"]).strip()}
        if any(sid not in best_window for sid in expected):
            best_window = {}
    if not best_window:
        win_w = 0.0  # no windows (a home indexed before them), or some not written yet
    max_window = scoring.max_of(best_window.values())
    out = []
    for i, sid in enumerate(ids):
        summary_score = w.dense * max(0.0, float(cos[i])) + (w.keyword + w.recency) * (
            bm25.get(sid, 0.0) / max_bm25 if max_bm25 > 0 else 0.0
        )
        turn_part = best_turn.get(sid, 0.0) / max_turn if max_turn > 0 else 0.0
        score = (1.0 - turn_w) * summary_score + turn_w * turn_part
        breakdown = {
            "dense": round(max(0.0, float(cos[i])), 6),
            "bm25": round(bm25.get(sid, 0.0), 4),
            "best_turn": round(best_turn.get(sid, 0.0), 6),
        }
        if win_w > 0:  # a chat: its best window of consecutive turns (index/summarizer.py)
            window_part = best_window.get(sid, 0.0) / max_window if max_window > 0 else 0.0
            score = (1.0 - win_w) * score + win_w * window_part
            breakdown["window"] = round(best_window.get(sid, 0.0), 6)
        if window is not None:
            breakdown["time"] = round(closeness.get(sid, 0.0), 6)
            score = scoring.with_priors(score, [(w.time, closeness.get(sid, 0.0))])
        out.append(
            {
                "session_id": sid,
                "score": round(score, 6),
                "summary": rows[sid]["summary"],
                "score_breakdown": breakdown,
            }
        )
    out.sort(key=lambda s: (-s["score"], s["session_id"]))
    if trace is not None:
        trace.sessions_ranked = out
    return out[:k] if cut else out


WINDOW_SESSIONS = 200  # at most this many sessions with a turn in the window join Stage 1
REACH = 5  # slack lengths around the window that still count (exp(-5) ≈ 0.007)
#: Only sessions whose last turn is at most this long after the window join Stage 1 by
#: date alone: it bounds the index walk (measured in bench/bench_time_prior.py). A
#: longer-lived session still gets its time share when its summary or turns match.
WINDOW_HORIZON_S = 30 * 86_400.0


def sessions_in(store: Store, scope: tuple[str | None, str | None], window: timeref.TimeWindow) -> list[str]:
    """Sessions of the scope with a turn inside ``window``, those ending nearest it first.

    The session span only narrows the search (indexed); the turn decides, because a
    long-lived session overlaps every window without being about any of them.
    """
    from memviewer.store import time_window

    with store.read() as conn:
        return time_window.sessions_in(
            conn,
            window.start,
            window.end,
            horizon=WINDOW_HORIZON_S,
            scope=scope[0],
            scope_id=scope[1],
            limit=WINDOW_SESSIONS,
        )


def time_closeness(store: Store, ids: list[str], window: timeref.TimeWindow) -> dict[str, float]:
    """Each session's closeness to ``window``: that of its turn nearest to it (1.0 when a
    turn falls inside), read from the (session, timestamp) index; 0 beyond ``REACH``."""
    from memviewer.store import time_window

    if not ids:
        return {}
    lo, hi = window.start - REACH * window.slack, window.end + REACH * window.slack
    out: dict[str, float] = {}
    with store.read() as conn:
        for sid, inside, before, after in time_window.turn_time_bounds(
            conn, ids, window.start, window.end, lo, hi
        ):
            if inside:
                out[sid] = 1.0
            else:
                out[sid] = max(
                    (window.closeness(float(x)) for x in (before, after) if x is not None), default=0.0
                )
    return out
