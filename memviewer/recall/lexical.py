"""Keyword (BM25) evidence for recall, from LanceDB's native full-text indexes.

The turns table indexes turn text; the summaries table indexes each session's
summary search text. Both use the ICU tokenizer with English stemming and
stop-word removal, so "appointments" matches "appointment" and Chinese or
Japanese text is split into words. BM25 statistics are table-wide (not per
scope); the scope filter is applied before ranking.

By default the whole question goes to the index (its own stop-word list drops
"the", "did", …). ``keyword_query`` can instead keep only content words (also
dropping question words such as "remember" or "previous"); on the LongMemEval
dev set that lost recall, because words like "time" or "recommend" do carry
evidence, so it is only an option (``tuning={"raw_keyword_query": 0}``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from memviewer.index.summarizer import STOP_WORDS
from memviewer.recall.scoring import _QUESTION_WORDS

if TYPE_CHECKING:
    from memviewer.index.lance import LanceIndex

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)


def keyword_query(query: str) -> str:
    words = _TOKEN.findall(query)
    keep = [w for w in words if w.lower() not in STOP_WORDS and w.lower() not in _QUESTION_WORDS]
    return " ".join(keep or words)


def turn_hits(
    index: LanceIndex, query: str, where: str | None, limit: int, columns: list[str], *, raw: bool = False
) -> list[dict[str, Any]]:
    from memviewer.index.lance import TURNS

    q = query if raw else keyword_query(query)
    if not q:
        return []
    return index.fulltext(TURNS, q, where, limit, columns)


def summary_hits(
    index: LanceIndex, query: str, where: str | None, limit: int, columns: list[str], *, raw: bool = False
) -> list[dict[str, Any]]:
    from memviewer.index.lance import SUMMARIES

    q = query if raw else keyword_query(query)
    if not q:
        return []
    return index.fulltext(SUMMARIES, q, where, limit, columns)
