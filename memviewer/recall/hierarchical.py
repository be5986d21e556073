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

Both stages fuse dense and keyword evidence; the formulas are in
``memviewer.recall.scoring`` and each result carries its parts in
``score_breakdown``. ``TUNING_DEFAULTS`` hold the structural choices, picked
on the first half of the LongMemEval dev set and checked on the second
(docs/benchmarks.md). The alternatives stay available through ``tuning=`` so
the measurement can be repeated: Stage 1 also counting the session's best
Stage-2 turn, reciprocal-rank fusion, min-max normalised cosine, a
content-words-only BM25 query and a within-session redundancy penalty (MMR).

Without ``scope``/``scope_id`` recall runs over every session in the store.
Results are hydrated from SQLite (index, archived, content and metadata are
authoritative there); the LanceDB copy only finds candidates. Recall never
writes: it reads SQLite and LanceDB and changes neither.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from memviewer import params
from memviewer.errors import INVALID_ARGUMENT, MemviewerError
from memviewer.recall import lexical, names, scoring, timeref
from memviewer.recall import rerank as reranking
from memviewer.recall.trace import RecallTrace
from memviewer.store import speakers

if TYPE_CHECKING:
    from memviewer.index.parts import IndexParts
    from memviewer.index.window_cache import WindowVectors
    from memviewer.store.db import Store

STAGE1_EMPTY = "session-retriever:stage1-empty"
STAGE2_EMPTY = "session-retriever:stage2-empty"
OVERFETCH = 3
MODES = params.RECALL_MODES

#: Defaults chosen on the first 50 LongMemEval dev questions (docs/benchmarks.md).
TUNING_DEFAULTS: dict[str, float] = {
    "candidate_depth": 100,  # dense and BM25 hits fetched per retriever (at least the pool)
    "session_turn_weight": 0.0,  # Stage 1: share of the best candidate turn in a session's score
    "session_depth": 30,  # summaries fetched per retriever in Stage 1
    "rrf": 0.0,  # 1: reciprocal-rank fusion instead of the score blend (measured)
    "dense_minmax": 0.0,  # 1: min-max normalise cosine over the candidates (measured)
    "raw_keyword_query": 1.0,  # 0: send only content words to BM25 (measured worse)
    "session_mmr": 0.0,  # λ of a within-session redundancy penalty when picking M (measured)
    "name_prior": 1.0,  # 0: a question naming a turn's author (metadata.speaker) gets no speaker share
    "echo_penalty": 0.0,  # share taken off a turn that is itself a question echoing the query
    "neighbour_share": 0.0,  # share of the best adjacent candidate's score in a turn's score
    "chat_neighbour_share": 0.2,  # neighbour_share for chats between named people (both modes)
    "chat_session_turn_weight": 0.6,  # session_turn_weight for chats between named people (REALTALK)
    "adaptive_k": 0.0,  # r > 0: up to K more sessions whose Stage-1 score is ≥ r × the best one
    "flat_pool": 0.0,  # N > 0: the best N Stage-2 turns join the pool whatever their session
    "session_prior": 0.0,  # γ: a pooled turn's score × (1 - γ + γ · its session's Stage-1 score / best)
    "chat_flat_pool": 3.0,  # flat_pool for chats between named people
    "chat_chunks_per_session": 10.0,  # in a chat, M is at least this (0: off)
    "chat_session_prior": 0.2,  # session_prior for chats between named people (REALTALK)
    "session_turn_top": 1.0,  # n: Stage 1's turn part sums a session's best n turns, halving each
    "chat_dense_share": 0.7,  # in a chat, dense / (dense + keyword) weight (0: the configured weights)
    "strip_names": 1.0,  # 0: a query naming the scope's authors is searched with the names kept
    "chat_window_share": 0.4,  # in a chat, Stage 1's share of the session's best window (0: off)
    "window_depth": 100,  # windows fetched by similarity when a scope has too many to keep
    "chat_question_penalty": 0.5,  # in a chat, share taken off a turn whose every sentence asks
    "name_aliases": 1.0,  # 0: names a chat calls its two authors by ("Hey Kate!") do not name them
    "chat_length_prior": 0.2,  # in a chat, λ: a turn of n content words × (1 - λ + λ · min(1, n / words))
    "chat_length_words": 10.0,  # the content words from which a chat turn has its whole score
}

TURN_COLUMNS = ["turn_id", "session_id", "role", "archived", "timestamp", "text", "vector"]
SUMMARY_COLUMNS = ["session_id", "summary", "vector"]


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
    """
    if not isinstance(query, str) or not query.strip():
        raise MemviewerError(INVALID_ARGUMENT, "query must be a non-empty string")
    if not isinstance(hide_later, bool):
        raise MemviewerError(INVALID_ARGUMENT, "hide_later must be true or false")
    if not isinstance(with_tool_calls, bool):
        raise MemviewerError(INVALID_ARGUMENT, "with_tool_calls must be true or false")
    if mode not in MODES:
        raise MemviewerError(INVALID_ARGUMENT, f"mode must be one of {MODES}, not {mode!r}")
    scope, scope_id = _opt_str("scope", scope), _opt_str("scope_id", scope_id)
    window_as_of = _as_of(as_of)
    window = timeref.parse(query, window_as_of)
    k = params.int_param(
        "top_sessions", top_sessions, params.DEFAULT_TOP_SESSIONS, 1, params.MAX_TOP_SESSIONS
    )
    m = params.int_param(
        "chunks_per_session",
        chunks_per_session,
        params.DEFAULT_CHUNKS_PER_SESSION,
        1,
        params.MAX_CHUNKS_PER_SESSION,
    )
    top_k = params.int_param("top_k", top_k, params.DEFAULT_TOP_K, 1, params.MAX_TOP_K)
    tune = {**TUNING_DEFAULTS, **(tuning or {})}
    unknown = set(tune) - set(TUNING_DEFAULTS)
    if unknown:
        raise MemviewerError(INVALID_ARGUMENT, f"unknown tuning keys: {sorted(unknown)}")
    try:
        w = scoring.Weights.from_settings(parts.settings, **(weights or {}))
    except ValueError as exc:
        raise MemviewerError(INVALID_ARGUMENT, str(exc)) from None
    if _own_blend(weights, w):  # a blend the caller or the configuration chose is kept in chats too
        tune["chat_dense_share"] = 0.0
    if rerank is False:  # the caller switched reranking off (TUI toggle, --no-rerank)
        reranker = None

    clock = _Clock()
    from memviewer.index.lance import SUMMARIES, TURNS, IndexMismatchError, scope_filter

    index = parts.lance
    if index.readonly:
        index.refresh()
    embedder = parts.embedder
    try:
        index.check_model(embedder.name, int(embedder.dim))
    except IndexMismatchError as exc:
        raise MemviewerError(INVALID_ARGUMENT, str(exc), data={"hint": "memviewer reindex"}) from None
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

    def stage2(n: int, depth: int | None = None) -> list[dict[str, Any]]:
        return _turn_candidates(
            index,
            qvec,
            query,
            turn_where,
            n,
            w,
            tune,
            use_ann,
            window,
            trace,
            store=parts.store,
            depth=depth,
            search=search,
            aliases=aliases,
        )

    if mode == "flat":
        candidates = stage2(top_k)
        clock.lap("stage2")
        diagnostics["stage2_candidates"] = len(candidates)
        chosen = candidates[:top_k]
    else:
        has_sessions = index.count(SUMMARIES, where) > 0
        if not has_sessions:
            diagnostics["escalations"].append(STAGE1_EMPTY)
            candidates = stage2(top_k)
            clock.lap("stage2")
            diagnostics["stage2_candidates"] = len(candidates)
            chosen = candidates[:top_k]
        else:
            chat_m = max(m, int(tune["chat_chunks_per_session"]))
            # as deep as for M, so agent sessions see the same candidates
            candidates = stage2(k * chat_m * OVERFETCH, depth=pool_size)
            chat = _is_chat(candidates)
            if chat and chat_m > m:  # a day of chat holds more than M answers per session
                m, pool_size = chat_m, k * chat_m * OVERFETCH
                diagnostics["params"].update(chunks_per_session=m, pool=pool_size)
            candidates = candidates[:pool_size]  # for agent sessions, the same pool as before
            clock.lap("stage2")
            extra_k = float(tune["adaptive_k"])
            sessions = _rank_sessions(
                parts.store,
                index,
                qvec,
                search,
                where,
                (scope, scope_id),
                2 * k if extra_k > 0 else k,
                w,
                tune,
                candidates,
                window,
                trace,
                windows=parts.windows,
            )
            if extra_k > 0:  # sessions beyond K that score close to the best one join
                top = sessions[0]["score"] if sessions else 0.0
                sessions = sessions[:k] + [s for s in sessions[k:] if s["score"] >= extra_k * top]
            clock.lap("stage1")
            diagnostics["stage1"] = sessions
            diagnostics["stage2_candidates"] = len(candidates)
            chosen, kept, dropped, capped = _post_filter(candidates, sessions, m, float(tune["session_mmr"]))
            net_n = int(tune["flat_pool"] or (tune["chat_flat_pool"] if chat else 0))
            prior = float(tune["session_prior"] or (tune["chat_session_prior"] if chat else 0.0))
            net = _add_flat(chosen, candidates, net_n) if net_n > 0 else []
            if net:  # a safety net: the best turns anywhere stay in the pool
                back = set(net)
                dropped = [d for d in dropped if d["turn_id"] not in back]
                capped = [c for c in capped if c["turn_id"] not in back]
            if prior > 0:
                _session_prior(chosen, sessions, prior)
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
        used = _chat_weights(w, tune).public()
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


def _turn_candidates(
    index: Any,
    qvec: Any,
    query: str,
    where: str | None,
    n: int,
    w: scoring.Weights,
    tune: dict[str, float],
    use_ann: bool,
    window: timeref.TimeWindow | None = None,
    trace: RecallTrace | None = None,
    *,
    store: Store | None = None,
    depth: int | None = None,
    search: str | None = None,
    aliases: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Stage 2: dense ∪ BM25 hits of the scope (``depth``, default ``n``, or
    ``candidate_depth`` if more, from each), blended, best ``n`` first. ``search`` (default
    ``query``) is the text BM25 and the coverage share match, ``qvec`` its embedding; the names
    and the "I / you" rule read the question as asked."""
    import numpy as np

    from memviewer.index.lance import TURNS

    depth = max(n if depth is None else depth, int(tune["candidate_depth"]))
    dense = index.dense(TURNS, qvec, where, depth, TURN_COLUMNS, use_ann=use_ann)
    text = query if search is None else search
    keyword = lexical.turn_hits(index, text, where, depth, TURN_COLUMNS, raw=bool(tune["raw_keyword_query"]))
    rows: dict[str, dict[str, Any]] = {}
    for r in dense:
        rows[r["turn_id"]] = r
    bm25: dict[str, float] = {}
    for r in keyword:
        bm25[r["turn_id"]] = float(r["_score"])
        rows.setdefault(r["turn_id"], r)
    if not rows:
        return []
    ids = list(rows)
    vecs = np.asarray([rows[i]["vector"] for i in ids], dtype=np.float32)
    cos = vecs @ np.asarray(qvec, dtype=np.float32)
    max_bm25 = scoring.max_of(bm25.values())
    newest = max(float(rows[i]["timestamp"]) for i in ids)
    q_terms = scoring.content_terms(text)
    addressed = scoring.addressed_speaker(query)
    authors: dict[str, str] = {}
    preferred: set[str] = set()
    if store is not None:
        authors = _authors(store, ids)
    chat = speakers.is_chat(len(authors), len(ids))
    if chat:
        w = _chat_weights(w, tune)
    if authors and w.speaker > 0 and tune["name_prior"]:
        preferred = names.preferred_authors(query, authors.values(), aliases)
    echo = float(tune["echo_penalty"])
    dense_v = np.maximum(cos, 0.0)
    if tune["dense_minmax"] and len(ids) > 1:
        lo, hi = float(cos.min()), float(cos.max())
        dense_v = (cos - lo) / (hi - lo) if hi > lo else np.ones_like(cos)
    if tune["rrf"]:
        d_rank = {tid: i for i, tid in enumerate(sorted(ids, key=lambda t: -cos[ids.index(t)]))}
        k_rank = {tid: i for i, tid in enumerate(sorted(bm25, key=lambda t: -bm25[t]))}
    out = []
    for i, tid in enumerate(ids):
        r = rows[tid]
        terms = scoring.content_terms(str(r["text"]))
        cov = scoring.covered(q_terms, terms)
        if tune["rrf"]:
            rrf_d = 60.0 / (60.0 + d_rank[tid])
            rrf_k = 60.0 / (60.0 + k_rank[tid]) if tid in k_rank else 0.0
        parts = {
            "dense": rrf_d if tune["rrf"] else float(dense_v[i]),
            "keyword": rrf_k
            if tune["rrf"]
            else scoring.keyword_part(bm25.get(tid, 0.0), max_bm25, cov, w.coverage_share),
            "recency": scoring.recency(float(r["timestamp"]), newest, w.half_life_s),
        }
        score = scoring.blend(parts, w)
        priors = []
        if preferred:  # the question names this turn's author (or the other one)
            parts["speaker"] = 1.0 if authors.get(tid) in preferred and str(r["text"]).strip() else 0.0
            priors.append((w.speaker, parts["speaker"]))
        elif addressed is not None and w.speaker > 0:
            # a turn without text (a bare tool call) cannot be where anyone said it
            parts["speaker"] = 1.0 if r["role"] == addressed and str(r["text"]).strip() else 0.0
            priors.append((w.speaker, parts["speaker"]))
        if window is not None:
            parts["time"] = window.closeness(float(r["timestamp"]))
            priors.append((w.time, parts["time"]))
        score = scoring.with_priors(score, priors)
        if echo > 0 and scoring.echoes_query(str(r["text"]), q_terms):
            parts["echo"] = 1.0  # a question like the query restates it rather than answering it
            score *= 1.0 - echo
        breakdown = {k: round(v, 6) for k, v in parts.items()}
        breakdown["bm25"] = round(bm25.get(tid, 0.0), 4)
        breakdown["coverage"] = round(cov, 4)
        out.append(
            {
                "turn_id": tid,
                "session_id": r["session_id"],
                "text": r["text"],
                "score": score,
                "score_breakdown": breakdown,
                "_vec": vecs[i],
                "_authored": tid in authors,
                "_chat": chat,
                "_words": len(terms),
            }
        )
    share = float(tune["neighbour_share"])
    if share <= 0 and chat:  # a chat: a short message is answered next door
        share = float(tune["chat_neighbour_share"])
    if share > 0 and store is not None:
        _with_neighbours(store, out, share)
    brief = float(tune["chat_length_prior"]) if chat else 0.0
    if brief > 0:  # after the neighbour share too: "Yes!" still lends its score to the turn it answers
        _length_prior(out, brief, float(tune["chat_length_words"]))
    ask = float(tune["chat_question_penalty"]) if chat else 0.0
    if ask > 0:  # after the neighbour share: a question still points at the answer next to it
        _question_penalty(out, ask)
    out.sort(key=lambda c: (-c["score"], c["turn_id"]))
    if trace is not None:
        trace.scored = out
    return out[:n]


def _question_penalty(cands: list[dict[str, Any]], share: float) -> None:
    """A chat turn that only asks (``scoring.only_questions``) loses ``share`` of its score."""
    for c in cands:
        if scoring.only_questions(str(c["text"])):
            c["score_breakdown"]["question"] = 1.0
            c["score"] *= 1.0 - share


def _length_prior(cands: list[dict[str, Any]], share: float, words: float) -> None:
    """A chat turn of ``n`` content words (``scoring.content_terms``, as ``_words``) keeps
    ``1 - share + share · min(1, n / words)`` of its score; ``score_breakdown.short`` is the
    part taken off. Greetings and one-word replies match a question's name or topic word as
    strongly as the message that states the fact (BM25 favours short texts, and so does a
    short text's embedding), but rarely hold the answer themselves."""
    full = max(words, 1.0)
    for c in cands:
        cut = share * max(0.0, 1.0 - c["_words"] / full)
        if cut > 0:
            c["score_breakdown"]["short"] = round(cut, 4)
            c["score"] *= 1.0 - cut


def _with_neighbours(store: Store, cands: list[dict[str, Any]], share: float) -> None:
    """``score = (1 - share) * score + share * best score of the turns just before and after``
    (among the candidates): a short chat message is often answered, or completed, next door."""
    from memviewer.store import repos

    with store.read() as conn:
        pos = repos.turn_positions(conn, [c["turn_id"] for c in cands])
    at = {pos[c["turn_id"]]: c["score"] for c in cands if c["turn_id"] in pos}
    for c in cands:
        p = pos.get(c["turn_id"])
        if p is None:
            continue
        near = max(at.get((p[0], p[1] - 1), 0.0), at.get((p[0], p[1] + 1), 0.0))
        c["score_breakdown"]["neighbour"] = round(near, 6)
        c["score"] = (1.0 - share) * c["score"] + share * near


def _authors(store: Store, ids: list[str]) -> dict[str, str]:
    """``{turn id: author name}`` from the turns' ``metadata.speaker``."""
    from memviewer.store import repos

    with store.read() as conn:
        fields = repos.turn_meta_fields(conn, ids, ("speaker",))
    return {tid: a for tid, f in fields.items() if (a := speakers.author_of(f))}


def _rank_sessions(
    store: Store,
    index: Any,
    qvec: Any,
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
) -> list[dict[str, Any]]:
    """Stage 1: sessions by summary similarity + summary BM25 (+ their best candidate turn,
    + in a chat their best window, + closeness to a date the query names)."""
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
    chat = _is_chat(candidates)
    if chat:
        w = _chat_weights(w, tune)
    if turn_w <= 0 and chat:
        # a chat between named people: its summary cannot hold a day of talk, so the session's
        # best turn takes a share (0.4, then 0.6 once names left the query; docs/benchmarks.md)
        turn_w = float(tune["chat_session_turn_weight"])
    wanted = [sid for sid in best_turn if sid not in rows] if turn_w > 0 else []
    if window is not None:  # sessions with a turn in the window join the candidates
        wanted += [sid for sid in _sessions_in(store, scope, window) if sid not in rows and sid not in wanted]
    if wanted:
        for r in index.rows(SUMMARIES, in_filter("session_id", wanted), SUMMARY_COLUMNS):
            rows[r["session_id"]] = r
    if not rows:
        return []
    closeness = _time_closeness(store, list(rows), window) if window is not None else {}
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
    return out[:k]


WINDOW_SESSIONS = 200  # at most this many sessions with a turn in the window join Stage 1
REACH = 5  # slack lengths around the window that still count (exp(-5) ≈ 0.007)
#: Only sessions whose last turn is at most this long after the window join Stage 1 by
#: date alone: it bounds the index walk (measured in bench/bench_time_prior.py). A
#: longer-lived session still gets its time share when its summary or turns match.
WINDOW_HORIZON_S = 30 * 86_400.0


def _sessions_in(store: Store, scope: tuple[str | None, str | None], window: timeref.TimeWindow) -> list[str]:
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


def _time_closeness(store: Store, ids: list[str], window: timeref.TimeWindow) -> dict[str, float]:
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


def _post_filter(
    candidates: list[dict[str, Any]], sessions: list[dict[str, Any]], m: int, mmr: float = 0.0
) -> tuple[list[dict[str, Any]], int, list[dict[str, Any]], list[dict[str, Any]]]:
    """Keep Stage-1 sessions' turns, top ``m`` each, grouped in Stage-1 order."""
    order = {s["session_id"]: i for i, s in enumerate(sessions)}
    members: dict[str, list[dict[str, Any]]] = {sid: [] for sid in order}
    dropped = []
    for c in candidates:  # already best-first
        sid = c["session_id"]
        if sid not in members:
            dropped.append({"turn_id": c["turn_id"], "session_id": sid, "score": round(c["score"], 6)})
            continue
        members[sid].append(c)
    kept = sum(len(v) for v in members.values())
    pool: list[dict[str, Any]] = []
    capped: list[dict[str, Any]] = []
    for sid in sorted(members, key=order.__getitem__):
        picked = _pick(members[sid], m, mmr)
        ids = {c["turn_id"] for c in picked}
        pool.extend(sorted(picked, key=lambda c: -c["score"]))
        capped.extend(
            {"turn_id": c["turn_id"], "session_id": sid, "score": round(c["score"], 6)}
            for c in members[sid]
            if c["turn_id"] not in ids
        )
    return pool, kept, dropped, capped


def _own_blend(weights: dict[str, float] | None, w: scoring.Weights) -> bool:
    """The dense / keyword weights were chosen: given to this recall, or configured away from
    the defaults (``w_dense`` / ``w_keyword``)."""
    given = any((weights or {}).get(k) is not None for k in ("dense", "keyword"))
    default = scoring.Weights()
    return given or (w.dense, w.keyword) != (default.dense, default.keyword)


def _chat_weights(w: scoring.Weights, tune: dict[str, float]) -> scoring.Weights:
    """The blend for a chat between named people: the dense part takes ``chat_dense_share`` of
    the dense + keyword weight (0: the configured weights). A chat paraphrases more than an
    agent session quotes, and with its names out of the query the embedding is the better
    evidence (REALTALK tune half +0.014 turn R@10; docs/benchmarks.md)."""
    share = float(tune["chat_dense_share"])
    if share <= 0:
        return w
    total = w.dense + w.keyword
    return dataclasses.replace(w, dense=total * share, keyword=total * (1.0 - share))


def _is_chat(candidates: list[dict[str, Any]]) -> bool:
    """At least half the candidate turns name their author (``metadata.speaker``): a chat
    between people, which the chat rules (``chat_*`` tuning keys) are for."""
    return speakers.is_chat(sum(1 for c in candidates if c.get("_authored")), len(candidates))


def _add_flat(pool: list[dict[str, Any]], candidates: list[dict[str, Any]], n: int) -> list[str]:
    """Append the best ``n`` candidates not pooled yet (they may come from any session);
    returns their turn ids."""
    have = {c["turn_id"] for c in pool}
    added = [c for c in candidates[:n] if c["turn_id"] not in have]
    pool.extend(added)
    return [c["turn_id"] for c in added]


def _session_prior(pool: list[dict[str, Any]], sessions: list[dict[str, Any]], share: float) -> None:
    """``score *= (1 - share) + share * session score / best session score``: a turn keeps its
    own order against the turns of its session and loses at most ``share`` of its score for a
    weaker session (a product, not a sum: the sum lifted a top session's weak turns over a
    second answer from a lower one; REALTALK docs/benchmarks.md). A turn the safety net
    brought from a session outside Stage 1 takes the weakest Stage-1 session's part: with none,
    the prior would push the net's turns below everything it is meant to rescue."""
    top = max((s["score"] for s in sessions), default=0.0)
    of = {s["session_id"]: s["score"] / top if top > 0 else 0.0 for s in sessions}
    floor = min(of.values(), default=0.0)
    for i, c in enumerate(pool):
        c = pool[i] = {**c, "score_breakdown": dict(c["score_breakdown"])}
        part = of.get(c["session_id"], floor)
        c["score_breakdown"]["session"] = round(part, 6)
        c["score"] *= 1.0 - share + share * part


def _pick(group: list[dict[str, Any]], m: int, mmr: float) -> list[dict[str, Any]]:
    """Top ``m`` by score; with ``mmr`` > 0, penalise turns that repeat an already picked one."""
    if mmr <= 0 or len(group) <= m:
        return group[:m]
    import numpy as np

    picked: list[dict[str, Any]] = []
    rest = list(group)
    while rest and len(picked) < m:

        def value(c: dict[str, Any]) -> float:
            if not picked:
                return c["score"]
            return c["score"] - mmr * max(float(np.dot(c["_vec"], p["_vec"])) for p in picked)

        best = max(rest, key=value)
        picked.append(best)
        rest.remove(best)
    return picked


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
