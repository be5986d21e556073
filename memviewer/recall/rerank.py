"""Optional neural re-ranking of recall's merged pool (step 4 of recall in docs/cli.md).

A reranker is anything with ``score(query, texts) -> list[float]`` returning
one relevance value in [0, 1] per text (e.g. a cross-encoder behind a local
server). None ships by default: without one the step is skipped and the trace
says ``reranked: false``. When it raises or returns the wrong number of
scores, the pool keeps its session-by-session order and the error is put in
the trace, because a broken reranker must never hide results.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from memviewer.recall.scoring import RERANK_BLEND

log = logging.getLogger("memviewer.recall")


@runtime_checkable
class Reranker(Protocol):
    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """Relevance of each text to the query, in [0, 1] (higher is better)."""
        ...


def _unit(value: float) -> float:
    """Accept logits as well as probabilities: squash anything outside [0, 1]."""
    v = float(value)
    if math.isnan(v):
        return 0.0
    if 0.0 <= v <= 1.0:
        return v
    return 1.0 / (1.0 + math.exp(-v))


def apply(
    reranker: Reranker | None, query: str, pool: list[dict[str, Any]], text_of: Any
) -> tuple[list[dict[str, Any]], bool, str | None]:
    """Blend ``RERANK_BLEND * score + (1 - RERANK_BLEND) * neural`` and sort.

    Returns ``(pool, reranked, error)``. Each item gets ``score_breakdown.rerank``
    and its ``score`` replaced by the blend when the reranker succeeded.
    """
    if reranker is None or not pool:
        return pool, False, None
    try:
        neural = list(reranker.score(query, [text_of(item) for item in pool]))
        if len(neural) != len(pool):
            raise ValueError(f"reranker returned {len(neural)} scores for {len(pool)} texts")
        values = [_unit(v) for v in neural]
    except Exception as exc:  # keep the session-by-session order
        log.warning("reranker failed, keeping the pool order: %s", exc)
        return pool, False, f"{type(exc).__name__}: {exc}"
    out = []
    for item, v in zip(pool, values, strict=True):
        item = dict(item)
        breakdown = dict(item["score_breakdown"])
        breakdown["rerank"] = round(v, 6)
        breakdown["pre_rerank"] = item["score"]
        item["score_breakdown"] = breakdown
        item["score"] = RERANK_BLEND * item["score"] + (1.0 - RERANK_BLEND) * v
        out.append(item)
    out.sort(key=lambda x: -x["score"])
    return out, True, None
