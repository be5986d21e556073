"""Would a session-level candidate step make common-word searches cheaper? (Not enough.)

Issue 17's eighth round, item (b): before the turn-level scoring of a common-word query
(``recall.keyword._common_candidates``: the newest ``COMMON_TURNS`` = 100 matching turns,
BM25 in Python), pick candidate sessions first and score only their turns. Measured here as
a prototype, not in the package:

* the window is walked as the package walks it (turns holding every word, then any word;
  newest first, 100 turns) but without the turns' text;
* the ``--sessions`` sessions with the most matching turns in the window (ties: the newest)
  are kept, the text of their turns read in one statement, and those turns scored by the
  package's own scorer (``_common_candidates`` fed the kept rows);
* ``total_found`` then counts only the kept sessions (the package counts every session of
  the window), so that key changes whenever more sessions matched.

It prints, per query, whether the top-1 and the top 5 stay the same, both ``total_found``,
and the p50 of the whole ``KeywordSearch.search`` with each path, the two interleaved per
query and order alternating.

    cd /tmp && PYTHONPATH=/path/to/tree python -m bench ab_common_session_step --home DIR/home-2000
"""

from __future__ import annotations

import logging
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import (
    harness,
    search_corpus,
)
from memviewer.recall import fts_query
from memviewer.recall import keyword as kw
from memviewer.store import fts
from memviewer.store import keyword_candidates as kc
from memviewer.store.db import Store

QUERIES = [q for q in search_corpus.COMMON_QUERIES if q.isascii()] + [
    "rollback",
    "billing",
    "what did we decide about the rollback plan?",
]


def _walk(db: kc.KeywordDb, match: str, filters: kc.Filters, window: int) -> list[Any]:
    """``kc.newest_turns`` without the text: ``(num, idx, is_compaction_summary, None, session_id)``."""
    table = fts.WORD_TABLE
    join, where, params = kc._filter_sql(table, filters)  # noqa: SLF001 - the package's own filter SQL
    where = [f"{table} MATCH ?", *where]
    sql = (
        "SELECT r.num, t.idx, t.is_compaction_summary, NULL, t.session_id FROM ("
        f"SELECT {table}.rowid AS num FROM {table}{join} WHERE {' AND '.join(where)} "
        f"ORDER BY {table}.rowid DESC LIMIT ?) r JOIN turns t ON t.num = r.num ORDER BY r.num DESC"
    )
    return db.all(sql, [match, *params, window])


def session_step(keep: int) -> Callable[..., list[tuple[int, Any]]]:
    package = kw._common_candidates  # noqa: SLF001

    def candidates(db: kc.KeywordDb, plan: Any, pq: Any, filters: kc.Filters) -> list[tuple[int, Any]]:
        occurring = [u for u in pq.word_units if u.text in plan.counts]
        rows: list[Any] = []
        if len(occurring) > 1:
            every = " AND ".join(fts_query.fts_string(u.text) for u in occurring)
            rows = _walk(db, every, filters, kw.COMMON_TURNS)
        if len(rows) < kw.COMMON_TURNS:
            have = {r[0] for r in rows}
            rows += [r for r in _walk(db, plan.match, filters, kw.COMMON_TURNS) if r[0] not in have]
            rows = rows[: kw.COMMON_TURNS]
        count = Counter(r[4] for r in rows)
        first: dict[str, int] = {}
        for i, r in enumerate(rows):
            first.setdefault(r[4], i)
        kept_sessions = set(sorted(count, key=lambda s: (-count[s], first[s]))[:keep])
        kept = [r for r in rows if r[4] in kept_sessions]
        if not kept:
            return []
        marks = ",".join("?" * len(kept))
        text = dict(db.all(f"SELECT num, content FROM turns WHERE num IN ({marks})", [r[0] for r in kept]))
        full = [(r[0], r[1], r[2], text[r[0]], r[4]) for r in kept]
        # the package's scorer on the kept rows: its walk answers with them, once
        real_walk, real_window = kc.newest_turns, kw.COMMON_TURNS
        answers = iter([full])
        kc.newest_turns = lambda *_a, **_k: next(answers, [])
        kw.COMMON_TURNS = len(full)
        try:
            return package(db, plan, pq, filters)
        finally:
            kc.newest_turns, kw.COMMON_TURNS = real_walk, real_window

    return candidates


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--sessions", type=int, default=15, help="candidate sessions kept")
    ap.add_argument("--rounds", type=int, default=12)
    args = harness.parse(ap, {"home": lambda: harness.search_home()[0], "rounds": 1})
    harness.header("ab_common_session_step")
    logging.disable(logging.WARNING)
    store = Store.open(args.home / "memviewer.db", readonly=True)
    ks = kw.KeywordSearch(store)
    package = kw._common_candidates  # noqa: SLF001
    variant = session_step(args.sessions)

    def search(fn: Callable[..., Any], q: str) -> dict[str, Any]:
        kw._common_candidates = fn  # noqa: SLF001
        try:
            return ks.search(q, limit=5, window=5)
        finally:
            kw._common_candidates = package  # noqa: SLF001

    print(f"# {args.home}")
    print(f"| query | same top-1 | top-5 overlap | total_found package / {args.sessions} sessions |")
    print("|---|---|---:|---|")
    for q in QUERIES:
        a, b = search(package, q), search(variant, q)
        ta = [h["session_id"] for h in a["results"]]
        tb = [h["session_id"] for h in b["results"]]
        same = len(set(ta) & set(tb))
        print(f"| {q} | {ta[:1] == tb[:1]} | {same}/5 | {a['total_found']} / {b['total_found']} |")
    times: dict[str, list[int]] = {"package": [], "session step": []}
    for rnd in range(args.rounds):
        for i, q in enumerate(QUERIES):
            order = [("package", package), ("session step", variant)]
            if (rnd + i) % 2:
                order.reverse()
            for name, fn in order:
                t = time.perf_counter_ns()
                search(fn, q)
                times[name].append(time.perf_counter_ns() - t)
    pa, pb = (statistics.median(v) / 1e3 for v in times.values())
    load = harness.load()
    print(
        f"\nKeywordSearch.search p50: package {pa:.0f} µs, session step {pb:.0f} µs ({pb / pa:.2f}x), "
        f"load {load}"
    )
    ks.close()
    store.close()


if __name__ == "__main__":
    main()
