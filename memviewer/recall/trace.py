"""What one recall run did at every stage, for callers that ask "why not this turn?".

``recall(..., trace=RecallTrace())`` fills it; recall's result and diagnostics are
the same with or without one. The lists hold recall's internal candidate dicts
(``turn_id``, ``session_id``, ``score``, ``score_breakdown``, …), best first
unless said otherwise. ``memviewer.recall.why`` reads them; nothing else should
depend on their exact keys beyond those.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Which way recall went: a flat query, the two stages, or one of the fallbacks.
PATHS = ("flat", "hierarchical", "stage1-empty", "stage2-empty")


@dataclass
class RecallTrace:
    path: str = ""
    #: The text the retrievers searched: the query, or the query without the names of a
    #: chat's authors (``memviewer.recall.names.without_names``).
    search_query: str = ""
    #: Every turn Stage 2 scored (dense top-D ∪ BM25 top-D), blended, before the pool cut.
    scored: list[dict[str, Any]] = field(default_factory=list)
    #: The Stage-2 pool: the best K·M·3 of ``scored`` (``top_k`` on the flat paths).
    pool: list[dict[str, Any]] = field(default_factory=list)
    #: Every Stage-1 candidate session scored, before the cut to K.
    sessions_ranked: list[dict[str, Any]] = field(default_factory=list)
    #: The Stage-1 sessions (top K).
    sessions: list[dict[str, Any]] = field(default_factory=list)
    #: After the post-filter and the per-session cap M, session by session (Stage-1 order).
    capped_pool: list[dict[str, Any]] = field(default_factory=list)
    #: ``capped_pool`` by score: the order without a reranker.
    before_rerank: list[dict[str, Any]] = field(default_factory=list)
    #: The order after the rerank step (a failed reranker keeps the session order).
    after_rerank: list[dict[str, Any]] = field(default_factory=list)
    #: What survived the ``top_k`` cut (before hydration from SQLite).
    final: list[dict[str, Any]] = field(default_factory=list)
