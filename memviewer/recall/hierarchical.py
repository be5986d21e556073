"""Two-stage hierarchical recall with an explain trace (contract: docs/cli.md, "recall").

1. Stage 1 ranks the sessions of the scope by their summaries and keeps the
   top ``top_sessions`` (K).
2. Stage 2 is one turn query over the scope returning ``K * M * 3`` candidates
   (M = ``chunks_per_session``; the ×3 over-fetch leaves enough turns per
   session after the post-filter).
3. The post-filter keeps turns of Stage-1 sessions, grouped by session in
   Stage-1 order, at most M per session. In a chat between named people
   (``metadata.speaker`` on at least half the candidates) M is at least
   ``chat_chunks_per_session`` (10: a day of chat holds more answers than an
   agent session's M) and every pooled turn's score is multiplied by
   ``1 - γ + γ · its session's Stage-1 score / the best`` (γ =
   ``chat_session_prior``, 0.2), so the ranking mixes the turn's own evidence
   with its session's. ``flat_pool`` / ``chat_flat_pool`` (0 / 3) add the best
   N Stage-2 turns of any session to the pool, a safety net that keeps flat's
   best turns in a chat's pool. In chats Stage 2
   (flat mode too) also gives a turn ``chat_neighbour_share`` (0.2) of the
   better score of its candidate neighbours.
4. An optional reranker blends ``0.7 * score + 0.3 * neural``; without one the
   pool is sorted by score; if it raises, the session-by-session order stays.
5. The pool is truncated to ``top_k``.

Fallbacks: no session summaries in the scope → one plain turn query for
``top_k`` (escalation ``session-retriever:stage1-empty``); nothing left after
the post-filter → the raw Stage-2 top ``top_k``
(``session-retriever:stage2-empty``). ``mode="flat"`` runs only the turn
query, for comparison.

Where each part lives: Stage 1 in ``stage1.py``, Stage 2 (and flat mode) in
``stage2.py``, the post-filter and a chat's pool rules in ``pool.py``, the
tuning keys and their defaults in ``tuning.py``, the formulas both stages use
in ``scoring.py``; this module runs them in order, escalates and hydrates.
Each result carries its score's parts in ``score_breakdown``.

Without ``scope``/``scope_id`` recall runs over every session in the store.
Results are hydrated from SQLite (index, archived, content and metadata are
authoritative there); the LanceDB copy only finds candidates. Recall never
writes: it reads SQLite and LanceDB and changes neither.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memviewer import params
from memviewer.contract import timeref
from memviewer.errors import INVALID_ARGUMENT, MemviewerError
from memviewer.recall import names, pool, scoring, stage1, stage2
from memviewer.recall import rerank as reranking
from memviewer.recall.rerun_cache import RerunCache, candidates_key, copy_candidates, vector_key
from memviewer.recall.trace import RecallTrace
from memviewer.recall.tuning import TUNING_DEFAULTS, chat_weights, own_blend

if TYPE_CHECKING:
    from memviewer.index.parts import IndexParts
    from memviewer.store.db import Store

STAGE1_EMPTY = "session-retriever:stage1-empty"
STAGE2_EMPTY = "session-retriever:stage2-empty"
OVERFETCH = 3
MODES = params.RECALL_MODES


def _opt_str(name: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise MemviewerError(INVALID_ARGUMENT, f"{name} must be a string, not {type(value).__name__}")
    return value


class _Clock:
    def __init__(self) -> None:
        self.start = self.mark = time.perf_counter()
        self.timings: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = round((now - self.mark) * 1000, 3)
        self.mark = now

    def total(self) -> dict[str, float]:
        self.timings["total"] = round((time.perf_counter() - self.start) * 1000, 3)
        return self.timings


def recall(
    parts: IndexParts,
    query: str,
    *,
    scope: str | None = None,
    scope_id: str | None = None,
    top_sessions: int | None = None,
    chunks_per_session: int | None = None,
    top_k: int | None = None,
    mode: str = "hierarchical",
    reranker: reranking.Reranker | None = None,
    rerank: bool | None = None,
    weights: dict[str, float] | None = None,
    tuning: dict[str, float] | None = None,
    as_of: float | str | None = None,
    hide_later: bool = True,
    trace: RecallTrace | None = None,
    with_tool_calls: bool = False,
    cache: RerunCache | None = None,
) -> dict[str, Any]:
    """Run recall and return the ``recall --json`` object of docs/cli.md.

    ``reranker``: an optional neural reranker (the service passes its own);
    ``rerank=False`` skips it.
    ``as_of`` is the moment the question is asked (epoch seconds or ISO 8601;
    default now): relative dates in the query ("a week ago") count from it, and turns
    said after it are left out unless ``hide_later=False``. The evaluators turn that off:
    a benchmark's memory is its whole haystack, and data sets stamp some evidence later
    than the question (LongMemEval: later on the question's own day).
    ``trace`` (optional) is filled with every stage's full internals
    (``memviewer.recall.trace``); the result is the same with or without it.
    ``with_tool_calls``: each result row of a turn that called tools carries them
    (``tool_calls``), for front ends that show them; off, the rows are the JSON contract's.
    ``cache``: a ``RerunCache`` shared by runs of the same question (a why-not search): the
    LanceDB reads and the stages whose inputs did not change are reused, the result is the same.
    """
    if not isinstance(query, str) or not query.strip():
        raise MemviewerError(INVALID_ARGUMENT, "query must be a non-empty string")
    params.check_query_length(query)  # the bound search has too (one contract)
    if not isinstance(hide_later, bool):
        raise MemviewerError(INVALID_ARGUMENT, "hide_later must be true or false")
    if not isinstance(with_tool_calls, bool):
        raise MemviewerError(INVALID_ARGUMENT, "with_tool_calls must be true or false")
    if mode not in MODES:
        raise MemviewerError(INVALID_ARGUMENT, f"mode must be one of {MODES}, not {mode!r}")
    scope, scope_id = _opt_str("scope", scope), _opt_str("scope_id", scope_id)
    window_as_of = _as_of(as_of)
    window = timeref.parse(query, window_as_of)
    bounds = params.RECALL_INT_BOUNDS
    k = params.int_param("top_sessions", top_sessions, params.DEFAULT_TOP_SESSIONS, *bounds["top_sessions"])
    m = params.int_param(
        "chunks_per_session",
        chunks_per_session,
        params.DEFAULT_CHUNKS_PER_SESSION,
        *bounds["chunks_per_session"],
    )
    top_k = params.int_param("top_k", top_k, params.DEFAULT_TOP_K, *bounds["top_k"])
    tune = {**TUNING_DEFAULTS, **(tuning or {})}
    unknown = set(tune) - set(TUNING_DEFAULTS)
    if unknown:
        raise MemviewerError(INVALID_ARGUMENT, f"unknown tuning keys: {sorted(unknown)}")
    try:
        w = scoring.Weights.from_settings(parts.settings, **(weights or {}))
    except ValueError as exc:
        raise MemviewerError(INVALID_ARGUMENT, str(exc)) from None
    if own_blend(weights, w):  # a blend the caller or the configuration chose is kept in chats too
        tune["chat_dense_share"] = 0.0
    if rerank is False:  # the caller switched reranking off (TUI toggle, --no-rerank)
        reranker = None

    clock = _Clock()
    from memviewer.index.lance import SUMMARIES, TURNS, IndexMismatchError, scope_filter

    index = parts.lance if cache is None else cache.index(parts.lance)
    if index.readonly:
        index.refresh()
    embedder = parts.embedder
    try:
        index.check_model(embedder.name, int(embedder.dim))
    except IndexMismatchError as exc:
        raise MemviewerError(INVALID_ARGUMENT, str(exc), hint="memviewer reindex") from None
    # what the retrievers search: the query without the names of the scope's own authors
    own, aliases = (
        parts.authors.names(scope, scope_id)
        if tune["name_aliases"]
        else (parts.authors.of(scope, scope_id), {})
    )
    search = names.without_names(query, own, aliases) if tune["strip_names"] else query
    qvec = embedder.embed([search])[0]
    clock.lap("embed")

    where = scope_filter(scope, scope_id)
    turn_where = where  # as of a given moment: no turn said later is known yet
    if hide_later and as_of is not None and as_of != "":
        turn_where = _and(where, f"timestamp <= {float(window_as_of)!r}")
    pool_size = k * m * OVERFETCH
    scope_turns = index.count(TURNS, turn_where)
    use_ann = index.has_vector_index() and scope_turns > int(parts.settings.ann_threshold)
    diagnostics: dict[str, Any] = {
        "mode": mode,
        "escalations": [],
        "stage1": [],
        "stage2_candidates": 0,
        "post_filter": 0,
        "reranked": False,
        "timings_ms": {},
        "params": {
            "top_sessions": k,
            "chunks_per_session": m,
            "top_k": top_k,
            "pool": pool_size,
            **w.public(),
            **tune,
        },
        "index": {"scope_turns": scope_turns, "vector_search": "ivf_pq" if use_ann else "exact"},
        "dropped": [],
        "capped": [],
        "time_window": window.public() if window and w.time > 0 else None,
    }
    if w.time <= 0:
        window = None

    # everything Stage 2 (and so Stage 1) depends on but K, M and top_k: a cache's key
    stage_key = repr(
        (search, query, vector_key(qvec), turn_where, w, sorted(tune.items()), use_ann, window)
        + (sorted(aliases.items()), where, scope, scope_id)
    )

    def scored_turns(n: int, depth: int | None = None) -> list[dict[str, Any]]:
        fetch = n if depth is None else depth

        def score(cut: int) -> list[dict[str, Any]]:
            return stage2.turn_candidates(
                index,
                qvec,
                query,
                turn_where,
                cut,
                w,
                tune,
                use_ann,
                window,
                trace,
                store=parts.store,
                depth=fetch,
                search=search,
                aliases=aliases,
            )

        if cache is None:
            return score(n)
        depth_used = max(fetch, int(tune["candidate_depth"]))  # what turn_candidates fetches
        full = cache.stage2(f"{stage_key}|{depth_used}", lambda: score(sys.maxsize))
        if trace is not None:
            trace.scored = full
        return copy_candidates(full[:n])

    def ranked_sessions(kk: int, candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
        def rank(cut: bool) -> list[dict[str, Any]]:
            return stage1.rank_sessions(
                parts.store,
                index,
                qvec,
                search,
                where,
                (scope, scope_id),
                kk,
                w,
                tune,
                candidates,
                window,
                trace,
                windows=parts.windows,
                cut=cut,
            )

        if cache is None:
            return rank(True)
        depth_used = max(kk, int(tune["session_depth"]))  # what rank_sessions fetches
        key = repr((stage_key, depth_used, candidates_key(candidates)))
        full = cache.stage1(key, lambda: rank(False))
        if trace is not None:
            trace.sessions_ranked = full
        return [{**s, "score_breakdown": dict(s["score_breakdown"])} for s in full[:kk]]

    if mode == "flat":
        candidates = scored_turns(top_k)
        clock.lap("stage2")
        diagnostics["stage2_candidates"] = len(candidates)
        chosen = candidates[:top_k]
    else:
        has_sessions = index.count(SUMMARIES, where) > 0
        if not has_sessions:
            diagnostics["escalations"].append(STAGE1_EMPTY)
            candidates = scored_turns(top_k)
            clock.lap("stage2")
            diagnostics["stage2_candidates"] = len(candidates)
            chosen = candidates[:top_k]
        else:
            chat_m = max(m, int(tune["chat_chunks_per_session"]))
            # as deep as for M, so agent sessions see the same candidates
            candidates = scored_turns(k * chat_m * OVERFETCH, depth=pool_size)
            chat = stage2.is_chat(candidates)
            if chat and chat_m > m:  # a day of chat holds more than M answers per session
                m, pool_size = chat_m, k * chat_m * OVERFETCH
                diagnostics["params"].update(chunks_per_session=m, pool=pool_size)
            candidates = candidates[:pool_size]  # for agent sessions, the same pool as before
            clock.lap("stage2")
            extra_k = float(tune["adaptive_k"])
            sessions = ranked_sessions(2 * k if extra_k > 0 else k, candidates)
            if extra_k > 0:  # sessions beyond K that score close to the best one join
                top = sessions[0]["score"] if sessions else 0.0
                sessions = sessions[:k] + [s for s in sessions[k:] if s["score"] >= extra_k * top]
            clock.lap("stage1")
            diagnostics["stage1"] = sessions
            diagnostics["stage2_candidates"] = len(candidates)
            mmr = float(tune["session_mmr"])
            chosen, kept, dropped, capped = pool.post_filter(candidates, sessions, m, mmr)
            net_n = int(tune["flat_pool"] or (tune["chat_flat_pool"] if chat else 0))
            prior = float(tune["session_prior"] or (tune["chat_session_prior"] if chat else 0.0))
            net = pool.add_flat(chosen, candidates, net_n) if net_n > 0 else []
            if net:  # a safety net: the best turns anywhere stay in the pool
                back = set(net)
                dropped = [d for d in dropped if d["turn_id"] not in back]
                capped = [c for c in capped if c["turn_id"] not in back]
            if prior > 0:
                pool.session_prior(chosen, sessions, prior)
            diagnostics["pool_rules"] = {
                "chat": chat,
                "chunks_per_session": m,
                "flat_pool": net_n,
                "session_prior": prior,
                "safety_net": net,
            }
            diagnostics["post_filter"] = kept
            diagnostics["dropped"] = dropped
            diagnostics["capped"] = capped
            clock.lap("post_filter")
            if trace is not None:
                trace.sessions, trace.capped_pool = sessions, list(chosen)
                trace.before_rerank = sorted(chosen, key=lambda c: -c["score"])
            if not chosen:
                diagnostics["escalations"].append(STAGE2_EMPTY)
                chosen = candidates[:top_k]
            else:
                chosen, reranked, error = reranking.apply(reranker, query, chosen, lambda c: c["text"])
                diagnostics["reranked"] = reranked
                if error:
                    diagnostics["rerank_error"] = error
                elif not reranked:
                    chosen.sort(key=lambda c: -c["score"])
                clock.lap("rerank")
                if trace is not None:
                    trace.after_rerank = list(chosen)
                chosen = chosen[:top_k]
    if trace is not None:
        trace.path = mode if mode == "flat" else (diagnostics["escalations"] or ["hierarchical"])[-1]
        trace.path = trace.path.removeprefix("session-retriever:")
        trace.pool, trace.final = candidates, list(chosen)
    diagnostics["search_query"] = search
    if candidates and candidates[0]["_chat"]:  # the blend a chat was scored with
        used = chat_weights(w, tune).public()
        diagnostics["params"].update(w_dense=used["w_dense"], w_keyword=used["w_keyword"])
    if trace is not None:
        trace.search_query = search
    results, stale = _hydrate(parts.store, chosen, with_tool_calls)
    if stale:
        diagnostics["stale"] = stale
    clock.lap("hydrate")
    diagnostics["timings_ms"] = clock.total()
    return {
        "query": query,
        "scope": scope,
        "scope_id": scope_id,
        "results": results,
        "diagnostics": diagnostics,
    }


def _and(where: str | None, clause: str) -> str:
    return f"{where} AND {clause}" if where else clause


def _as_of(value: float | str | None) -> float:
    """Epoch seconds of the moment of asking (now when not given)."""
    if value is None or value == "":
        return time.time()
    try:
        return timeref.parse_as_of(value)
    except ValueError as exc:
        raise MemviewerError(INVALID_ARGUMENT, str(exc)) from None


def _hydrate(
    store: Store, chosen: list[dict[str, Any]], with_tool_calls: bool = False
) -> tuple[list[dict[str, Any]], list[str]]:
    """Public result rows read from SQLite; LanceDB rows without a SQLite turn are reported stale."""
    from memviewer.store import repos

    with store.read() as conn:
        rows = repos.get_turns(conn, [c["turn_id"] for c in chosen])
    out, stale = [], []
    for c in chosen:
        row = rows.get(c["turn_id"])
        if row is None:
            stale.append(c["turn_id"])
            continue
        pub = repos.turn_public(row)
        out.append(
            {
                "turn_id": pub["turn_id"],
                "session_id": pub["session_id"],
                "episode_id": pub["episode_id"],
                "index": pub["index"],
                "role": pub["role"],
                "content": pub["content"],
                "archived": pub["archived"],
                "timestamp": pub["timestamp"],
                "score": round(float(c["score"]), 6),
                "score_breakdown": c["score_breakdown"],
                "metadata": row["meta"] if row["meta"] is not None else {},
            }
        )
        if with_tool_calls and row["tool_calls"]:
            out[-1]["tool_calls"] = row["tool_calls"]
    return out, stale


Recall = Callable[..., dict[str, Any]]
