"""Stage 2 of recall: the scope's turns scored against the query (flat mode is this alone).

Dense and BM25 hits of the scope are blended (``memviewer.recall.scoring``), the priors a
question asks for take their share (the speaker it names or addresses, the date it names), and
in a chat between named people four rules follow: the chat's blend (``tuning.chat_weights``),
a share of the better neighbour's score, less for a short message and less for a turn that only
asks. Each candidate carries its parts in ``score_breakdown``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from memviewer.contract import timeref
from memviewer.present.speaker import addressed_speaker
from memviewer.recall import lexical, names, scoring
from memviewer.recall.trace import RecallTrace
from memviewer.recall.tuning import chat_weights
from memviewer.store import speakers

if TYPE_CHECKING:
    import numpy as np

    from memviewer.index.lance import LanceIndex
    from memviewer.store.db import Store

TURN_COLUMNS = ["turn_id", "session_id", "role", "archived", "timestamp", "text", "vector"]


def turn_candidates(
    index: LanceIndex,
    qvec: np.ndarray,
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
    addressed = addressed_speaker(query)
    authors: dict[str, str] = {}
    preferred: set[str] = set()
    if store is not None:
        authors = _authors(store, ids)
    chat = speakers.is_chat(len(authors), len(ids))
    if chat:
        w = chat_weights(w, tune)
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
    brief = float(tune["chat_length_prior"] if chat else tune["length_prior"])
    if brief > 0:  # after the neighbour share too: "Yes!" still lends its score to the turn it answers
        _length_prior(out, brief, float(tune["length_words"]))
    ask = float(tune["chat_question_penalty"] if chat else tune["question_penalty"])
    if ask > 0:  # after the neighbour share: a question still points at the answer next to it
        _question_penalty(out, ask, scoring.only_questions if chat else scoring.asks_to_recall)
    out.sort(key=lambda c: (-c["score"], c["turn_id"]))
    if trace is not None:
        trace.scored = out
    return out[:n]


def _question_penalty(cands: list[dict[str, Any]], share: float, asks: Callable[[str], bool]) -> None:
    """A turn that only asks loses ``share`` of its score: in a chat any such turn
    (``scoring.only_questions``), in an agent session a request to recall
    (``scoring.asks_to_recall``)."""
    for c in cands:
        if asks(str(c["text"])):
            c["score_breakdown"]["question"] = 1.0
            c["score"] *= 1.0 - share


def _length_prior(cands: list[dict[str, Any]], share: float, words: float) -> None:
    """A turn of ``n`` content words (``scoring.content_terms``, as ``_words``) keeps
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


def is_chat(candidates: list[dict[str, Any]]) -> bool:
    """At least half the candidate turns name their author (``metadata.speaker``): a chat
    between people, which the chat rules (``chat_*`` tuning keys) are for."""
    return speakers.is_chat(sum(1 for c in candidates if c.get("_authored")), len(candidates))
