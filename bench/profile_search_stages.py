"""The stages of one in-process keyword search, stamped: parse, plan, candidates, ranking, hits.

Wraps the stage functions of ``memviewer.recall.keyword`` (``fts_query.parse``,
``_word_match``, ``_fts_candidates``, ``_common_candidates``, ``_rank``, ``_hits``) and
the statements of ``memviewer.store.keyword_candidates`` they run (``ranked_rows``,
``newest_turns``, ``session_rows``, ``rate_stats``, ``hit_rows``, ``begin``/``end``) with
``perf_counter_ns`` stamps, runs the planted phrases and the common-word queries
``--rounds`` times, and prints the p50 µs of each per search (a stage includes the statements
it runs). ``--gap MS`` sleeps before each search, as a hub's thread waits for a request.

    cd /tmp && PYTHONPATH=/path/to/tree python -m bench profile_search_stages --home DIR/home-2000 \\
        --planted DIR/sessions-2000.planted.json [--gap 5]
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import (
    harness,
    search_corpus,
)
from memviewer.recall import fts_query
from memviewer.recall import keyword as kw
from memviewer.store import keyword_candidates as kc
from memviewer.store.db import Store

STAGES = ("_word_match", "_fts_candidates", "_common_candidates", "_rank", "_hits")
STATEMENTS = ("ranked_rows", "newest_turns", "session_rows", "rate_stats", "hit_rows", "begin", "end")


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--planted", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--gap", type=float, default=0.0, help="ms to sleep before each search")
    args = harness.parse(
        ap,
        {"home": lambda: harness.search_home()[0], "planted": lambda: harness.search_home()[1], "rounds": 1},
    )
    harness.header("profile_search_stages")
    logging.disable(logging.WARNING)
    store = Store.open(args.home / "memviewer.db", readonly=True)
    ks = kw.KeywordSearch(store)
    spent: dict[str, int] = defaultdict(int)

    def stamped(owner: Any, name: str) -> None:
        real: Callable[..., Any] = getattr(owner, name)

        def run(*a: Any, **k: Any) -> Any:
            t = time.perf_counter_ns()
            try:
                return real(*a, **k)
            finally:
                spent[name] += time.perf_counter_ns() - t

        setattr(owner, name, run)

    stamped(fts_query, "parse")
    for name in STAGES:
        stamped(kw, name)
    for name in STATEMENTS:
        stamped(kc, name)
    planted = [p["query"] for p in json.loads(args.planted.read_text())]
    common = [q for q in search_corpus.COMMON_QUERIES if q.isascii()]
    print(f"# {args.home}, gap {args.gap} ms")
    for label, queries in (("rare phrase", planted), ("common words", common)):
        for q in queries:
            ks.search(q, limit=5, window=5)
        got: dict[str, list[int]] = defaultdict(list)
        for _ in range(args.rounds):
            for q in queries:
                if args.gap:
                    time.sleep(args.gap / 1000)
                spent.clear()
                t = time.perf_counter_ns()
                ks.search(q, limit=5, window=5)
                spent["whole search"] = time.perf_counter_ns() - t
                for name in ("whole search", "parse", *STAGES, *STATEMENTS):
                    got[name].append(spent.get(name, 0))
        print(f"| {label} | p50 µs |\n|---|---:|")
        for name, values in got.items():
            p50 = statistics.median(values) / 1e3
            if p50 >= 1:
                kind = "statement" if name in STATEMENTS else "stage"
                print(
                    f"| {name} ({kind}) | {p50:.0f} |"
                    if name != "whole search"
                    else f"| {name} | {p50:.0f} |"
                )
    ks.close()
    store.close()


if __name__ == "__main__":
    main()
