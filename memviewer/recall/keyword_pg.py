"""Keyword candidates on PostgreSQL (``memviewer.store.pg_fts``): the same plan as FTS5's
(``memviewer.recall.keyword``), with ``ts_rank_cd`` where SQLite has BM25.

* Each word unit's matches are counted (capped at ``common_df + 1``). Words in more turns
  than ``common_df`` only rank turns that also hold a rarer word of the query.
* When the rarer words still match more than ``ranked_max`` turns, or every word is common,
  the newest ``common_turns`` matching turns are ranked (those holding every word first),
  and the answer says ``ranked_window`` as on SQLite.
* Otherwise the newest ``broad_window`` matching turns are ranked in full.
* Unspaced scripts (``kind == "cjk"``) are substring matches through pg_trgm, scored
  0.1 per occurrence (``ts_rank_cd``'s weight for one unlabelled match).

A turn's score is its rank × ``ParsedQuery.coverage`` (the share of units it holds), as on
SQLite; ranks are on another scale than BM25, so scores differ between backends, the
order the contract fixes (coverage, phrase, demotion, lineage, recency on ties) does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from memviewer.recall.fts_query import ParsedQuery
from memviewer.store import pg_fts
from memviewer.store.keyword_candidates import Filters, KeywordDb

CJK_WEIGHT = 0.1


class Found(NamedTuple):
    """One candidate turn: its score and the row its session columns start at ``at``."""

    num: int
    score: float
    idx: int
    summary: bool
    row: Sequence[Any]
    at: int


def word_candidates(
    db: KeywordDb,
    pq: ParsedQuery,
    filters: Filters,
    *,
    common_df: int,
    ranked_max: int,
    broad_window: int,
    common_turns: int,
    keep: int,
) -> tuple[list[Found], int | None]:
    """(candidates, ranked window or None) for the query's word units."""
    units = [u.text for u in pq.word_units]
    if not units:
        return [], None
    counts = pg_fts.unit_counts(db, units, common_df + 1)
    found = {u: n for u, n in zip(units, counts, strict=True) if n > 0}
    if not found:
        return [], None
    rare = [u for u in units if 0 < found.get(u, 0) <= common_df]
    any_of = units + ([pq.phrase] if pq.phrase else [])
    windowed = not rare or sum(found[u] for u in rare) > ranked_max
    if not windowed:
        need = rare if len(rare) != len(found) else []
        rows = pg_fts.ranked_rows(db, any_of, need, False, filters, broad_window, keep)
        return _scored(rows, pq), None
    occurring = [u for u in units if u in found]
    rows = []
    if len(occurring) > 1:
        rows = pg_fts.ranked_rows(db, any_of, occurring, True, filters, common_turns, common_turns)
    if len(rows) < common_turns:
        have = {r[0] for r in rows}
        more = pg_fts.ranked_rows(db, any_of, [], False, filters, common_turns, common_turns)
        rows = (rows + [r for r in more if r[0] not in have])[:common_turns]
    return _scored(rows, pq), common_turns


def _scored(rows: Sequence[Any], pq: ParsedQuery) -> list[Found]:
    return [
        Found(int(r[0]), float(r[1]) * pq.coverage(r[4] or ""), int(r[2]), bool(r[3]), r, 5) for r in rows
    ]


def cjk_candidates(db: KeywordDb, pq: ParsedQuery, filters: Filters, max_rows: int) -> list[Found]:
    """Turns holding any unspaced-script unit, scored by occurrences × coverage."""
    runs = [u.text for u in pq.cjk_units]
    out: list[Found] = []
    lowered = [r.lower() for r in runs]
    for r in pg_fts.substring_rows(db, runs, filters, max_rows):
        low = (r[1] or "").lower()
        tf = sum(low.count(n) for n in lowered)
        if tf:
            score = CJK_WEIGHT * tf * pq.coverage(r[1] or "")
            out.append(Found(int(r[0]), score, int(r[2]), bool(r[3]), r, 4))
    return out
