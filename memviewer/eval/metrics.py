"""Retrieval metrics shared by every evaluator (LongMemEval, golden sets), so a number
means the same thing in each report.

``ranked`` is a best-first list of ids, ``gold`` the set of relevant ids. Relevance
is binary. ``k=None`` reads the whole list.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Iterable, Sequence


def _top(ranked: Sequence[str], k: int | None) -> Sequence[str]:
    return ranked if k is None else ranked[:k]


def recall_at(ranked: Sequence[str], gold: Collection[str], k: int | None = None) -> float:
    """The share of ``gold`` found in the first ``k``."""
    if not gold:
        raise ValueError("recall needs at least one relevant id")
    return len(set(_top(ranked, k)) & set(gold)) / len(set(gold))


def hit_any_at(ranked: Sequence[str], gold: Collection[str], k: int | None = None) -> float:
    """1.0 when any relevant id is in the first ``k``."""
    return 1.0 if set(_top(ranked, k)) & set(gold) else 0.0


def hit_all_at(ranked: Sequence[str], gold: Collection[str], k: int | None = None) -> float:
    """1.0 when every relevant id is in the first ``k``."""
    return 1.0 if set(gold) <= set(_top(ranked, k)) else 0.0


def reciprocal_rank(ranked: Sequence[str], gold: Collection[str], k: int | None = None) -> float:
    """1 / the rank of the first relevant id (0 when none is in the first ``k``)."""
    wanted = set(gold)
    return next((1.0 / i for i, x in enumerate(_top(ranked, k), 1) if x in wanted), 0.0)


def ndcg_at(ranked: Sequence[str], gold: Collection[str], k: int = 10) -> float:
    """Binary-relevance nDCG@k: Σ 1/log2(rank+1) over hits, over the ideal ordering's sum."""
    wanted = set(gold)
    if not wanted:
        raise ValueError("nDCG needs at least one relevant id")
    dcg = sum(1.0 / math.log2(i + 1) for i, x in enumerate(ranked[:k], 1) if x in wanted)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(wanted), k) + 1))
    return dcg / ideal


def mean(values: Iterable[float], digits: int = 4) -> float | None:
    """The mean rounded to ``digits`` places, or None for no values."""
    xs = list(values)
    return round(statistics.fmean(xs), digits) if xs else None
