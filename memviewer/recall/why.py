"""Why was this turn not recalled? Its fate at every stage, and a fix found by re-running.

``why_not(parts, query, turn_id, params)`` runs recall once with a
``RecallTrace`` and follows the turn through it:

* ``index`` — is it in the vector index at all, and its dense (cosine), keyword
  (Stage 2's lexical part) and BM25 rank and score over the whole scope, plus its
  blended Stage-2 rank among the turns Stage 2 scored;
* ``stage1`` — its session's Stage-1 rank, score and summary (K kept);
* ``pool`` — whether it was in the Stage-2 pool (K·M·3 best turns);
* ``post_filter`` — whether the post-filter kept it (its session is a Stage-1 one);
* ``session_cap`` — its rank among its session's pool turns (M kept);
* ``rerank`` — its position before and after the rerank step;
* ``top_k`` — its final position (``top_k`` kept).

``eliminated_at`` names the first stage that removed it. Stage 1 only chooses
sessions and the post-filter is where a turn of an unchosen session leaves the
stream, so a turn whose session Stage 1 did not choose is ``post_filter`` when it
was in the pool (the trace's ``dropped`` list) and ``stage1`` when it was not in
the pool either. The flat paths (``mode=flat``, no session summaries) are one
turn query cut to ``top_k``.

``find_fix`` then looks for the smallest change of ``top_sessions``,
``chunks_per_session`` and ``top_k`` (each alone along a short ladder, cheapest
relative increase first, then narrowed by bisection; then the values the trace
predicts for several at once; then pairs; a change of several is shrunk while
re-runs still retrieve the turn; then, when none suffices, a few weight sets)
**by re-running recall** (at most ``MAX_RERUNS``, the query embedded once); a fix
is reported only when a re-run retrieved the turn, with the rank it got there.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memviewer.contract.compare import INT_KEYS, WEIGHT_KEYS, apply_overrides
from memviewer.errors import INVALID_ARGUMENT, NOT_FOUND, MemviewerError, WhyCancelled
from memviewer.params import DEFAULT_CHUNKS_PER_SESSION, DEFAULT_TOP_K, DEFAULT_TOP_SESSIONS
from memviewer.recall import lexical, scoring
from memviewer.recall.hierarchical import OVERFETCH, recall
from memviewer.recall.rerun_cache import RerunCache
from memviewer.recall.trace import RecallTrace

if TYPE_CHECKING:
    import numpy as np

    from memviewer.index.embedder import Embedder
    from memviewer.index.lance import LanceIndex
    from memviewer.index.parts import IndexParts
    from memviewer.recall.rerank import Reranker
    from memviewer.store.db import Store

#: At most this many recall re-runs when searching for a fix.
MAX_RERUNS = 60
#: Weight sets tried (alone) when no change of K, M and top_k retrieves the turn.
WEIGHT_SETS: tuple[dict[str, float], ...] = (
    {"w_dense": 0.75, "w_keyword": 0.25},
    {"w_dense": 0.25, "w_keyword": 0.75},
    {"w_speaker": 0.0},
    {"w_time": 0.0},
    {"w_dense": 1.0, "w_keyword": 0.0},
    {"w_dense": 0.0, "w_keyword": 1.0},
)
DEFAULTS = {
    "top_sessions": DEFAULT_TOP_SESSIONS,
    "chunks_per_session": DEFAULT_CHUNKS_PER_SESSION,
    "top_k": DEFAULT_TOP_K,
}
NET_REASON = "kept by the flat safety net (chat_flat_pool): one of the best Stage-2 turns of any session"


def check_turn(store: Store, turn_id: str, scope: str | None, scope_id: str | None) -> dict[str, Any]:
    """The SQLite turn row with its session's scope; not_found / invalid_argument otherwise."""
    from memviewer.store import repos

    if not isinstance(turn_id, str) or not turn_id.strip():
        raise MemviewerError(INVALID_ARGUMENT, "the turn id is empty", hint=_ID_HINT)
    with store.read() as conn:
        row = repos.get_turn(conn, turn_id)
        session = repos.get_session(conn, row["session_id"]) if row is not None else None
    if row is None or session is None:
        raise MemviewerError(NOT_FOUND, f"unknown turn {turn_id!r}", hint=_ID_HINT)
    if (scope and session["scope"] != scope) or (scope_id and session["scope_id"] != scope_id):
        raise MemviewerError(
            INVALID_ARGUMENT,
            f"turn {turn_id!r} is in session {row['session_id']!r} (scope "
            f"{session['scope']}:{session['scope_id'] or '*'}), outside the scope "
            f"{scope or '*'}:{scope_id or '*'} of this recall",
            hint=f"use --scope {session['scope']} --scope-id {session['scope_id']} or drop them",
        )
    return {**row, "scope": session["scope"], "scope_id": session["scope_id"]}


_ID_HINT = "turn ids are in `memviewer recall --json` results and on the viewer's Session screen"


#: ``progress(done, planned)`` after each re-run of a fix search.
Progress = Callable[[int, int], None]


def why_not(
    parts: IndexParts,
    query: str,
    turn_id: str,
    params: Mapping[str, Any],
    *,
    reranker: Reranker | None = None,
    fix: bool = True,
    cache: RerunCache | None = None,
    progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(recall result, why)`` for ``turn_id`` under ``params`` (recall keyword arguments);
    ``reranker`` is the one the recall being explained uses (the service's).

    ``cache`` (default: a new one) shares reads and stages between the traced run and the
    re-runs; pass one to several why-nots of the same question (the viewer's expected turns).
    ``progress`` hears each re-run; ``cancelled()`` is asked before each and, once true,
    ends the search with ``WhyCancelled``."""
    params = dict(params)
    if params.get("as_of") in (None, ""):  # one moment of asking for the run and every re-run
        params["as_of"] = time.time()
    check_turn(parts.store, turn_id, params.get("scope"), params.get("scope_id"))
    cache = cache if cache is not None else RerunCache()
    trace = RecallTrace()
    out = recall(parts, query, trace=trace, reranker=reranker, cache=cache, **params)
    why = explain(parts, query, turn_id, params, out, trace)
    if fix and why["eliminated_at"] not in (None, "not_indexed"):
        why.update(
            find_fix(
                parts,
                query,
                turn_id,
                params,
                why,
                reranker=reranker,
                cache=cache,
                progress=progress,
                cancelled=cancelled,
            )
        )
    else:
        why.update({"fix": None, "fix_rank": None, "reruns": 0})
    return out, why


# -- following the turn through one run ---------------------------------------------
def _position(items: list[dict[str, Any]], turn_id: str, key: str = "turn_id") -> int | None:
    return next((i for i, c in enumerate(items, 1) if c[key] == turn_id), None)


def _r(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


def explain(
    parts: IndexParts,
    query: str,
    turn_id: str,
    params: Mapping[str, Any],
    out: dict[str, Any],
    trace: RecallTrace,
) -> dict[str, Any]:
    """The ``why`` object for one recall run (without the fix)."""
    from memviewer.index.lance import SUMMARIES, TURNS, in_filter, scope_filter

    d = out["diagnostics"]
    p = d["params"]
    k, m, top_k = p["top_sessions"], p["chunks_per_session"], p["top_k"]
    rank = _position(out["results"], turn_id)
    index = parts.lance
    where = scope_filter(params.get("scope"), params.get("scope_id"))
    rows = index.rows(TURNS, in_filter("turn_id", [turn_id]), ["turn_id", "session_id", "text"])
    indexed = bool(rows)
    session_id = rows[0]["session_id"] if rows else check_turn(parts.store, turn_id, None, None)["session_id"]
    searched = trace.search_query or query  # the retrievers' text: names may have been taken out
    stages: list[dict[str, Any]] = [_scope_stage(parts, index, searched, turn_id, where, trace, indexed)]
    stages[0]["session_id"] = session_id

    flat = trace.path in ("flat", "stage1-empty")
    if flat:
        stages.append({"stage": "stage1", "passed": None, "skipped": trace.path, "session_id": session_id})
    else:
        s_rank = _position(trace.sessions_ranked, session_id, "session_id")
        entry = trace.sessions_ranked[s_rank - 1] if s_rank else None
        summary = entry["summary"] if entry else None
        if entry is None:
            srows = index.rows(SUMMARIES, in_filter("session_id", [session_id]), ["summary"])
            summary = srows[0]["summary"] if srows else None
        stages.append(
            {
                "stage": "stage1",
                "passed": bool(s_rank and s_rank <= k),
                "session_id": session_id,
                "rank": s_rank,
                "score": entry["score"] if entry else None,
                "score_breakdown": entry["score_breakdown"] if entry else None,
                "candidates": len(trace.sessions_ranked),
                "top_sessions": k,
                "summary": summary,
                "has_summary": summary is not None,
            }
        )
    in_stage1 = (not flat) and stages[1]["passed"]
    pool_rank = _position(trace.pool, turn_id)
    pool_entry = {
        "stage": "pool",
        "passed": pool_rank is not None,
        "rank": pool_rank,
        "pool": p["pool"] if not flat else top_k,
        "scored": len(trace.scored),
    }
    stages.append(pool_entry)
    post: dict[str, Any] = {"stage": "post_filter", "passed": None}
    cap: dict[str, Any] = {"stage": "session_cap", "passed": None, "chunks_per_session": m}
    rer: dict[str, Any] = {"stage": "rerank", "passed": None, "reranked": bool(d.get("reranked"))}
    if d.get("rerank_error"):
        rer["error"] = d["rerank_error"]
    cut: dict[str, Any] = {"stage": "top_k", "passed": rank is not None, "rank": rank, "top_k": top_k}
    # the flat safety net (a chat's pool rule) re-adds the best Stage-2 turns whatever their session
    rescued = turn_id in set((d.get("pool_rules") or {}).get("safety_net") or [])
    if trace.path == "hierarchical" and pool_rank is not None:
        post["passed"] = bool(in_stage1) or rescued
        if not in_stage1:
            post["reason"] = NET_REASON if rescued else "its session is not among the Stage-1 sessions"
        if post["passed"]:
            mine = [c for c in trace.pool if c["session_id"] == session_id]
            in_session = _position(mine, turn_id)
            passed = rescued or (in_session is not None and in_session <= m)
            cap.update({"passed": passed, "rank_in_session": in_session})
            if rescued:
                cap["reason"] = "the safety net's turns are not capped by M"
            cap["session_pool_turns"] = len(mine)
            if cap["passed"]:
                before = _position(trace.before_rerank, turn_id)
                after = _position(trace.after_rerank, turn_id)
                rer.update({"rank_before": before, "rank_after": after})
                rer["moved"] = (before - after) if before and after else 0
                rer["passed"] = not (before is not None and after is not None and before <= top_k < after)
                cut["rank_before_cut"] = after
    elif trace.path != "hierarchical":
        cut["rank_before_cut"] = pool_rank
    stages += [post, cap, rer, cut]

    if not indexed:
        eliminated: str | None = "not_indexed"
    elif rank is not None:
        eliminated = None
    elif trace.path in ("flat", "stage1-empty"):
        eliminated = "top_k"
    elif trace.path == "stage2-empty":
        eliminated = "top_k" if pool_rank is not None else "pool"
    elif not in_stage1 and not rescued:
        eliminated = "post_filter" if pool_rank is not None else "stage1"
    elif pool_rank is None:
        eliminated = "pool"
    elif not cap["passed"]:
        eliminated = "session_cap"
    elif rer["passed"] is False:
        eliminated = "rerank"
    else:
        eliminated = "top_k"
    return {
        "turn_id": turn_id,
        "retrieved": rank is not None,
        "rank": rank,
        "eliminated_at": eliminated,
        "path": trace.path,
        "stages": stages,
    }


def _scope_stage(
    parts: IndexParts,
    index: LanceIndex,
    query: str,
    turn_id: str,
    where: str | None,
    trace: RecallTrace,
    indexed: bool,
) -> dict[str, Any]:
    """Dense, keyword and BM25 rank and score of the turn over the whole scope."""
    from memviewer.index.lance import TURNS

    scope_turns = index.count(TURNS, where)
    entry: dict[str, Any] = {"stage": "index", "passed": indexed, "scope_turns": scope_turns}
    if not indexed:
        entry["hint"] = (
            "the vector index has not caught up with this turn (a hub indexes in the "
            "background; `memviewer reindex` rebuilds it)"
        )
        return entry
    qvec = parts.embedder.embed([query])[0]
    dense = index.dense(TURNS, qvec, where, max(1, scope_turns), ["turn_id"])
    d_rank = _position(dense, turn_id)
    entry["dense"] = {
        "rank": d_rank,
        "score": _r(1.0 - float(dense[d_rank - 1]["_distance"])) if d_rank else None,
    }
    hits = lexical.turn_hits(index, query, where, max(1, scope_turns), ["turn_id", "text"], raw=True)
    b_rank = _position(hits, turn_id)
    bm25 = float(hits[b_rank - 1]["_score"]) if b_rank else 0.0
    entry["bm25"] = {"rank": b_rank, "score": round(bm25, 4) if b_rank else None, "matches": len(hits)}
    # Stage 2's lexical part, over the same matches: normalised BM25 (+ coverage share).
    w = scoring.Weights.from_settings(parts.settings)
    terms = scoring.content_terms(query)
    top = scoring.max_of(float(h["_score"]) for h in hits)
    kw = [
        (
            scoring.keyword_part(
                float(h["_score"]), top, scoring.coverage(terms, h["text"]), w.coverage_share
            ),
            h,
        )
        for h in hits
    ]
    kw.sort(key=lambda x: -x[0])
    k_rank = next((i for i, (_, h) in enumerate(kw, 1) if h["turn_id"] == turn_id), None)
    entry["keyword"] = {"rank": k_rank, "score": _r(kw[k_rank - 1][0]) if k_rank else None}
    s_rank = _position(trace.scored, turn_id)
    if s_rank:
        sid = trace.scored[s_rank - 1]["session_id"]
        entry["rank_in_session"] = _position([c for c in trace.scored if c["session_id"] == sid], turn_id)
    entry["stage2"] = {
        "rank": s_rank,
        "score": _r(trace.scored[s_rank - 1]["score"]) if s_rank else None,
        "score_breakdown": trace.scored[s_rank - 1]["score_breakdown"] if s_rank else None,
        "scored": len(trace.scored),
    }
    return entry


# -- the fix: re-run recall with bigger parameters ---------------------------------
def _ladder(current: int, hi: int, hints: list[int]) -> list[int]:
    steps = {current + 1, current + 2, current * 2, current * 3, current * 5, current * 10, *hints}
    return sorted(v for v in steps if current < v <= hi)


def _hints(why: dict[str, Any], cur: dict[str, int]) -> dict[str, list[int]]:
    """Values the trace predicts could be enough (each still checked by a re-run)."""
    stages = {s["stage"]: s for s in why["stages"]}
    out: dict[str, list[int]] = {key: [] for key in INT_KEYS}
    s1 = stages.get("stage1") or {}
    if s1.get("rank"):
        out["top_sessions"].append(int(s1["rank"]))
    cap = stages.get("session_cap") or {}
    if cap.get("rank_in_session"):
        out["chunks_per_session"].append(int(cap["rank_in_session"]))
    cut = stages.get("top_k") or {}
    if cut.get("rank_before_cut"):
        out["top_k"].append(int(cut["rank_before_cut"]))
    s2 = (stages.get("index") or {}).get("stage2") or {}
    if s2.get("rank"):  # a pool of K·M·3 that reaches the turn's Stage-2 rank
        q = int(s2["rank"])
        out["top_sessions"].append(math.ceil(q / (OVERFETCH * cur["chunks_per_session"])))
        out["chunks_per_session"].append(math.ceil(q / (OVERFETCH * cur["top_sessions"])))
        if why["path"] in ("flat", "stage1-empty"):
            out["top_k"].append(q)
    return out


def find_fix(
    parts: IndexParts,
    query: str,
    turn_id: str,
    params: Mapping[str, Any],
    why: dict[str, Any],
    *,
    reranker: Reranker | None = None,
    max_reruns: int = MAX_RERUNS,
    cache: RerunCache | None = None,
    progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """``{"fix", "fix_rank", "reruns", "tried"}``: the smallest verified change, or ``fix: None``.

    Every re-run shares ``cache`` (one is made when not given): K, M and top_k decide only
    the cut of shared lists wherever the fetch depth stays the same (``rerun_cache.py``)."""
    cur = {key: int(params.get(key) or DEFAULTS[key]) for key in INT_KEYS}
    flat = params.get("mode") == "flat" or why["path"] in ("flat", "stage1-empty")
    keys = ["top_k"] if flat else ["top_k", "chunks_per_session", "top_sessions"]
    hints = _hints(why, cur)
    ladders = {key: _ladder(cur[key], INT_KEYS[key], hints[key]) for key in keys}
    tried: list[dict[str, Any]] = []
    same = parts.with_embedder(_CachedEmbedder(parts.embedder))
    shared = cache if cache is not None else RerunCache()
    planned = [max_reruns]

    def attempt(change: dict[str, Any]) -> int | None:
        if len(tried) >= max_reruns:
            return None
        if cancelled is not None and cancelled():
            raise WhyCancelled(len(tried), planned[0])
        out = recall(same, query, reranker=reranker, cache=shared, **apply_overrides(params, change))
        got = _position(out["results"], turn_id)
        tried.append({"change": change, "rank": got})
        if progress is not None:
            planned[0] = max(planned[0], len(tried))
            progress(len(tried), planned[0])
        return got

    def done(change: dict[str, Any], got: int) -> dict[str, Any]:
        return {"fix": change, "fix_rank": got, "reruns": len(tried), "tried": tried}

    singles = sorted(
        ((value / cur[key], keys.index(key), key, value) for key in keys for value in ladders[key]),
    )
    pairs = []
    if len(keys) > 1:
        for a, b in itertools.combinations(keys, 2):
            for va, vb in itertools.product(ladders[a][:4], ladders[b][:4]):
                pairs.append((va / cur[a] * vb / cur[b], a, va, b, vb))
    predicted = _predicted(why, cur) if len(keys) > 1 else []
    weight_sets = [dict(ws) for ws in WEIGHT_SETS if all(k in WEIGHT_KEYS for k in ws)]
    # the queue when nothing works (a found change adds a few narrowing runs, then stops)
    planned[0] = min(max_reruns, len(singles) + len(predicted) + len(pairs) + len(weight_sets))
    for _ratio, _order, key, value in singles:
        got = attempt({key: value})
        if got is not None:
            below = max([v for v in [cur[key], *ladders[key]] if v < value], default=cur[key])
            best, best_rank = _narrow(attempt, key, below, value, got)
            return done({key: best}, best_rank)
        if len(tried) >= max_reruns:
            break
    for change in predicted:
        if len(tried) >= max_reruns:
            break
        got = attempt(change)
        if got is not None:
            return done(*_shrink(attempt, change, got, cur))
    for _ratio, a, va, b, vb in sorted(pairs):
        if len(tried) >= max_reruns:
            break
        got = attempt({a: va, b: vb})
        if got is not None:
            return done(*_shrink(attempt, {a: va, b: vb}, got, cur))
    for weights in weight_sets:
        if len(tried) >= max_reruns:
            break
        got = attempt(weights)
        if got is not None:
            return done(weights, got)
    return {"fix": None, "fix_rank": None, "reruns": len(tried), "tried": tried}


class _CachedEmbedder:
    """An embedder remembering each text's vector: every re-run asks the same query."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self._cache: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        missing = [t for t in texts if t not in self._cache]
        if missing:
            for text, vec in zip(missing, self.inner.embed(missing), strict=True):
                self._cache[text] = vec
        return np.asarray([self._cache[t] for t in texts])


def _predicted(why: dict[str, Any], cur: dict[str, int]) -> list[dict[str, int]]:
    """Changes of several parameters at once that the trace says should be enough: K up
    to the session's Stage-1 rank, M up to the turn's rank among its session's scored
    turns, the pool (K·M·3) up to its Stage-2 rank, then top_k up to K·M."""
    stages = {s["stage"]: s for s in why["stages"]}
    s1 = (stages.get("stage1") or {}).get("rank")
    within = (stages.get("index") or {}).get("rank_in_session")
    s2 = ((stages.get("index") or {}).get("stage2") or {}).get("rank")
    if not (s1 and within and s2):
        return []
    k = max(cur["top_sessions"], int(s1))
    m = max(cur["chunks_per_session"], int(within), math.ceil(int(s2) / (OVERFETCH * k)))
    k, m = min(k, INT_KEYS["top_sessions"]), min(m, INT_KEYS["chunks_per_session"])
    change = {key: v for key, v in (("top_sessions", k), ("chunks_per_session", m)) if v != cur[key]}
    out = [change] if change else []
    wide = max(cur["top_k"], min(k * m, INT_KEYS["top_k"]))
    if wide != cur["top_k"]:
        out.append({**change, "top_k": wide})
    return out


def _shrink(
    attempt: Callable[[dict[str, Any]], int | None], change: dict[str, int], got: int, cur: dict[str, int]
) -> tuple[dict[str, int], int]:
    """Make a verified change of several parameters smaller while re-runs still retrieve the
    turn: drop each parameter back to its value, then bisect each one that stays."""
    best, rank = dict(change), got
    for dropped in [k for k in ("top_k", "chunks_per_session", "top_sessions") if k in best]:
        if len(best) == 1:
            break
        trial = {k: v for k, v in best.items() if k != dropped}
        again = attempt(trial)
        if again is not None:
            best, rank = trial, again
    for key in list(best):
        lo, hi = cur[key], best[key]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            again = attempt({**best, key: mid})
            if again is None:
                lo = mid
            else:
                hi, rank = mid, again
                best = {**best, key: mid}
    return best, rank


def _narrow(
    attempt: Callable[[dict[str, Any]], int | None], key: str, failed: int, works: int, got: int
) -> tuple[int, int]:
    """Bisect between a value that did not retrieve the turn and one that did."""
    best, best_rank = works, got
    lo = failed
    while best - lo > 1:
        mid = (lo + best) // 2
        rank = attempt({key: mid})
        if rank is None:
            lo = mid
        else:
            best, best_rank = mid, rank
    return best, best_rank
