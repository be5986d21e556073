"""Dump the answers of keyword search for a fixed query set, to check that a change keeps
them byte-identical (``KeywordSearch.search`` in-process, read-only, nothing logged).

The set: the planted phrases of ``bench/search_corpus.py``'s corpus, its common-word
queries (two CJK ones among them), a few single words and a mixed query, each at the
benchmark's ``limit=5, window=5`` and some at other limits and windows, a search inside
one session, and scrolls (an anchor in the middle, at the start, none). Run it with
one tree, then with another, and compare the files (``cmp``):

    cd /tmp && PYTHONPATH=/path/to/tree python -m bench search_answers_dump \\
        --home /work/cache/hub-bench/r5/home-2000 --planted .../sessions-2000.planted.json OUT.json

``--tree DIR`` imports ``memviewer`` from ``DIR`` (e.g. a ``git archive`` of main) instead of
the tree holding this script. The JSON is written with ``sort_keys=False``: the order of
the keys is part of the answer.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

from bench import harness

EXTRA = [
    "rollback",
    "予算",
    "Stripe Adyen invoices",
    "billing",
    "what did we decide about the rollback plan?",
]


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--planted", type=Path, required=True)
    ap.add_argument("--tree", type=Path, help="import memviewer from this source tree")
    ap.add_argument("out", type=Path)
    args = harness.parse(ap, needs="a search home and its planted queries (bench_search --work)")
    harness.header("search_answers_dump")
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(args.tree.resolve() if args.tree else here.parent))
    logging.disable(logging.WARNING)
    import memviewer
    from bench import search_corpus
    from memviewer.recall.keyword import KeywordSearch
    from memviewer.store.db import Store

    store = Store.open(args.home / "memviewer.db", readonly=True)
    ks = KeywordSearch(store)
    planted = [p["query"] for p in json.loads(args.planted.read_text())]
    queries = planted + list(search_corpus.COMMON_QUERIES) + EXTRA
    out: dict[str, Any] = {}
    for q in queries:
        out[q] = ks.search(q, limit=5, window=5)
    for q in (planted[0], planted[-1], "rollback plan", "数据库迁移"):
        out[f"{q} (limit 20, window 0)"] = ks.search(q, limit=20, window=0)
        out[f"{q} (limit 1, window 12)"] = ks.search(q, limit=1, window=12)
    first = out[planted[0]]["results"][0]
    sid = first["session_id"]
    out["__inside"] = ks.search("rollback plan", session_id=sid, limit=5, window=3)
    out["__scroll"] = ks.search(None, session_id=sid, around=first["anchor_index"], window=5)
    out["__scroll_start"] = ks.search(None, session_id=sid, around=0, window=3)
    out["__scroll_none"] = ks.search(None, session_id=sid, window=4)
    out["__browse"] = ks.search(None, limit=7)
    out["__unknown"] = ks.search(None, session_id="no-such-session")
    args.out.write_text(json.dumps(out, ensure_ascii=False, sort_keys=False))
    ks.close()
    store.close()
    hits = sum(len(v.get("results") or v.get("messages") or []) for v in out.values())
    print(f"{len(out)} answers, {hits} hits or messages, memviewer from {Path(memviewer.__file__).parent}")


if __name__ == "__main__":
    main()
