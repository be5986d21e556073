"""Recall's structural choices and the blend a chat between people is scored with.

``TUNING_DEFAULTS`` hold the choices both stages read; a ``tuning=`` argument overrides any
of them and unknown keys are refused. They were picked on the first half of a development set
and checked on the second (docs/benchmarks.md has what each measured). The alternatives stay
available so the measurement can be repeated: Stage 1 also counting the session's best
Stage-2 turn, reciprocal-rank fusion, min-max normalised cosine, a content-words-only BM25
query and a within-session redundancy penalty (MMR). The ``chat_*`` keys apply only to a chat
between named people (``stage2.is_chat``), never to agent sessions.
"""

from __future__ import annotations

import dataclasses

from memviewer.recall import scoring

#: Defaults chosen on the first 50 LongMemEval dev questions, the ``chat_*`` ones on the first
#: five REALTALK chats (docs/benchmarks.md).
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
    "question_penalty": 0.5,  # in an agent session, the same for a turn that only asks to recall
    "name_aliases": 1.0,  # 0: names a chat calls its two authors by ("Hey Kate!") do not name them
    "length_prior": 0.0,  # λ: a turn of n content words × (1 - λ + λ · min(1, n / length_words))
    "chat_length_prior": 0.2,  # length_prior for chats between named people (agent sessions: measured worse)
    "length_words": 10.0,  # the content words from which a turn keeps its whole score
}


def own_blend(weights: dict[str, float] | None, w: scoring.Weights) -> bool:
    """The dense / keyword weights were chosen: given to this recall, or configured away from
    the defaults (``w_dense`` / ``w_keyword``)."""
    given = any((weights or {}).get(k) is not None for k in ("dense", "keyword"))
    default = scoring.Weights()
    return given or (w.dense, w.keyword) != (default.dense, default.keyword)


def chat_weights(w: scoring.Weights, tune: dict[str, float]) -> scoring.Weights:
    """The blend for a chat between named people: the dense part takes ``chat_dense_share`` of
    the dense + keyword weight (0: the configured weights). A chat paraphrases more than an
    agent session quotes, and with its names out of the query the embedding is the better
    evidence (REALTALK tune half +0.014 turn R@10; docs/benchmarks.md)."""
    share = float(tune["chat_dense_share"])
    if share <= 0:
        return w
    total = w.dense + w.keyword
    return dataclasses.replace(w, dense=total * share, keyword=total * (1.0 - share))
