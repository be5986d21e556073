"""Benchmark: keyword search on PostgreSQL (tsvector + GIN, pg_trgm) against SQLite (FTS5),
same sessions, one run, the two backends alternating query by query.

Self-contained: it writes ``--sessions`` sessions (``--turns`` turns each, seeded: a common
vocabulary, one planted rare phrase, CJK text in 5 % of sessions) through
``SessionManager.import_session`` into a SQLite file and into a fresh PostgreSQL database,
then times ``KeywordSearch.search`` in-process (``limit=5, window=2``) for a common word, a
rare phrase, a common question and two CJK queries; p50/p99/max in milliseconds per backend.
The load of the machine (``os.getloadavg``) is printed before and after.

    pg_bin=/usr/lib/postgresql/15/bin  # a throwaway server, see tests/test_postgres.py
    .venv/bin/python bench/bench_pg_search.py --pg-url 'postgresql+psycopg://postgres@/postgres?host=/tmp/pg&port=5432'
    .venv/bin/python -m bench bench_pg_search --quick     # 300 sessions, 5 rounds (CI)

``--pg-url`` defaults to ``MEMVIEWER_TEST_PG_URL``; the database it creates is dropped at the
end (``--keep`` keeps both stores under ``--work``). Results: ``docs/benchmarks.md``.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench import harness
from memviewer.recall.keyword import KeywordSearch
from memviewer.session.manager import SessionManager
from memviewer.store import pg_fts
from memviewer.store.db import Store

T0 = 1_770_000_000.0
WORDS = (
    "plan deploy billing migration cache invoice token rollout review report queue retry "
    "schema index latency budget customer refund contract service config release branch test "
    "build error warning metric alert owner team meeting week note draft ticket issue fix "
    "database table column query request response timeout limit server client worker job"
).split()
CJK = [
    "我们下周讨论数据库迁移计划",
    "预算已经批准了",
    "来週の会議で予算を最終決定します",
    "締め切りは六月末です",
]
RARE = "zephyr quota reconciliation"
QUERIES = {
    "common word": "plan",
    "common question": "what was the billing migration plan",
    "rare phrase": f'"{RARE}"',
    "CJK long run": "数据库迁移",
    "CJK two chars": "预算",
}


def _sessions(n: int, turns: int, seed: int = 11) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        sid = f"s-{i:06d}"
        t0 = T0 + i * 600.0
        rows = []
        for k in range(turns):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))
            if i % 20 == 7 and k == 2:
                text = rng.choice(CJK) + "，" + text
            if i == n // 3 and k == turns // 2:
                text = f"{text} and the {RARE} is done"
            rows.append(
                {
                    "id": f"{sid}-t{k}",
                    "role": ("user", "assistant")[k % 2],
                    "content": text,
                    "timestamp": t0 + k * 30.0,
                    "archived": k < turns // 3,
                }
            )
        out.append(({"id": sid, "title": sid, "started_at": t0, "last_seen_at": t0 + turns * 30.0}, rows))
    return out


def _fill(store: Store, data: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> float:
    mgr = SessionManager(store)
    start = time.perf_counter()
    for row, turns in data:
        mgr.import_session(dict(row), [dict(t) for t in turns])
    return time.perf_counter() - start


def _pg_database(admin_url: str) -> tuple[str, Any]:
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    name = f"mvbench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE \"{name}\" ENCODING 'UTF8' TEMPLATE template0")
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False), (admin, name)


def main() -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--turns", type=int, default=12, help="turns per session")
    ap.add_argument("--rounds", type=int, default=40, help="searches per query and backend")
    ap.add_argument("--pg-url", default=os.environ.get("MEMVIEWER_TEST_PG_URL"))
    ap.add_argument("--work", type=Path, default=None, help="folder for the SQLite file")
    ap.add_argument("--keep", action="store_true", help="do not drop the PostgreSQL database")
    args = harness.parse(ap, {"sessions": 300, "rounds": 5})
    if not args.pg_url:
        if args.quick:
            harness.skip("bench_pg_search", "no PostgreSQL (--pg-url or MEMVIEWER_TEST_PG_URL)")
        ap.error("pass --pg-url or set MEMVIEWER_TEST_PG_URL")
    work = args.work or Path(tempfile.mkdtemp(prefix="mvpgbench-"))
    work.mkdir(parents=True, exist_ok=True)
    harness.header("bench_pg_search")
    data = _sessions(args.sessions, args.turns)
    print(f"# {args.sessions} sessions × {args.turns} turns = {args.sessions * args.turns} turns")
    sqlite_store = Store.open(work / f"bench-{uuid.uuid4().hex[:6]}.db")
    pg_url, (admin, name) = _pg_database(args.pg_url)
    pg_store = Store(pg_url)
    try:
        for label, store in (("sqlite", sqlite_store), ("postgres", pg_store)):
            print(f"# import {label}: {_fill(store, data):.1f} s")
        with pg_store.write() as tx:  # fresh statistics, as autovacuum would leave them
            pg_fts.analyze(tx.conn)
        engines = {"sqlite": KeywordSearch(sqlite_store), "postgres": KeywordSearch(pg_store)}
        print(f"# modes: {', '.join(f'{k} {v.mode}' for k, v in engines.items())}")
        print("| query | backend | p50 ms | p99 ms | max ms | found | top hit |")
        print("|---|---|---:|---:|---:|---:|---|")
        for qname, q in QUERIES.items():
            times: dict[str, list[float]] = {k: [] for k in engines}
            last: dict[str, dict[str, Any]] = {}
            for k in engines:  # warm each once (plans, caches)
                last[k] = engines[k].search(q, limit=5, window=2)
            for r in range(args.rounds):
                order = list(engines) if r % 2 == 0 else list(reversed(engines))
                for k in order:
                    t = time.perf_counter()
                    last[k] = engines[k].search(q, limit=5, window=2)
                    times[k].append((time.perf_counter() - t) * 1000)
            for k, xs in times.items():
                res = last[k]
                top = res["results"][0]["session_id"] if res.get("results") else "-"
                print(
                    f"| {qname} `{q}` | {k} | {statistics.median(xs):.2f} | {harness.pct(xs, 99):.2f} | "
                    f"{max(xs):.2f} | {res.get('total_found')} | {top} |"
                )
        for e in engines.values():
            e.close()
    finally:
        sqlite_store.close()
        pg_store.close()
        pg_store.engine.dispose()
        if not args.keep:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()
    harness.footer()
    return 0


if __name__ == "__main__":
    sys.exit(main())
