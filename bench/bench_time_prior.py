"""Benchmark: what a relative date in a recall query costs in SQLite at scale.

A query naming a date ("what did I cook a week ago?") runs two extra SQL
statements (``memviewer.recall.stage1``): ``sessions_in`` (sessions of the
scope with a turn inside the window: the session-span indexes narrow, an EXISTS
on the (session, timestamp) index decides) and ``time_closeness`` (each Stage-1
candidate's turn nearest the window, one grouped statement). Undated queries run
neither. This measures both against a real SQLite store of N sessions with 10
turns each, spread over two years, in one scope (the worst case), plus a handful
of month-long sessions that overlap every window.

Only the SQL is timed: the LanceDB and embedding parts of recall are unchanged by
a date (bench_recall.py measures them).

Run: ``/tmp/venv/bin/python -m bench bench_time_prior [--sessions 10000,100000] [--queries 200]``
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

from bench import harness
from memviewer.contract import timeref
from memviewer.recall.stage1 import sessions_in, time_closeness
from memviewer.store import repos
from memviewer.store.db import Store

DAY = 86_400.0
NOW = 1_764_460_800.0  # 2025-11-30
TURNS_PER_SESSION = 10
PHRASES = ("a week ago", "10 days ago", "last Saturday", "two months ago", "in the past three weeks")


def build(path: Path, n: int, rng: random.Random) -> None:
    store = Store.open(path)
    batch = 2_000
    for lo in range(0, n, batch):
        sessions, turns = [], []
        for i in range(lo, min(n, lo + batch)):
            long_lived = i % 1_000 == 0  # one in a thousand spans a month
            t0 = NOW - rng.uniform(0, 730) * DAY
            step = 3 * DAY if long_lived else rng.uniform(20, 600)
            sid = f"s{i:07d}"
            sessions.append(
                {
                    "id": sid,
                    "agent": "bench",
                    "scope": "user",
                    "scope_id": "u1",
                    "title": sid,
                    "started_at": t0,
                    "last_seen_at": t0 + step * (TURNS_PER_SESSION - 1),
                    "status": "closed",
                    "retention": "keep_all",
                    "active_window": 100,
                    "meta": None,
                }
            )
            turns += [
                {
                    "id": f"{sid}-{j}",
                    "session_id": sid,
                    "episode_id": None,
                    "idx": j,
                    "role": "user" if j % 2 == 0 else "assistant",
                    "content": f"turn {j} of {sid}",
                    "timestamp": t0 + j * step,
                    "archived": False,
                    "is_compaction_summary": False,
                    "replaced_count": 0,
                    "tool_calls": None,
                    "tool_call_id": None,
                    "meta": None,
                }
                for j in range(TURNS_PER_SESSION)
            ]
        with store.write() as tx:
            for s in sessions:
                repos.insert_session(tx.conn, s)
            repos.insert_turns(tx.conn, turns)
    store.close()


def measure(path: Path, n: int, queries: int, rng: random.Random) -> dict[str, float]:
    store = Store.open(path, readonly=True)
    found, near, both = [], [], []
    hits = 0
    for q in range(queries):
        as_of = NOW - rng.uniform(0, 700) * DAY
        window = timeref.parse(f"what did I do {PHRASES[q % len(PHRASES)]}?", as_of)
        assert window is not None
        t0 = time.perf_counter()
        ids = sessions_in(store, ("user", "u1"), window)
        t1 = time.perf_counter()
        # Stage 1's candidates: ~60 from the retrievers plus those dated in the window
        candidates = ids + [f"s{rng.randrange(n):07d}" for _ in range(60)]
        scores = time_closeness(store, candidates, window)
        t2 = time.perf_counter()
        hits += sum(1 for v in scores.values() if v == 1.0)
        found.append((t1 - t0) * 1000)
        near.append((t2 - t1) * 1000)
        both.append((t2 - t0) * 1000)
    store.close()

    def p(xs: list[float], q: float) -> float:
        return round(harness.pct(xs, q), 2)

    return {
        "sessions": n,
        "turns": n * TURNS_PER_SESSION,
        "sessions_in p50": p(found, 50),
        "closeness p50": p(near, 50),
        "both p50": p(both, 50),
        "both p99": p(both, 99),
        "in-window hits/query": hits / queries,
    }


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--sessions", default="10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    args = harness.parse(ap, {"sessions": "300", "queries": 10})
    harness.header("bench_time_prior")
    print("| sessions | turns | sessions_in p50 ms | time_closeness p50 ms | both p50 ms | both p99 ms |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in args.sessions.split(",")):
        rng = random.Random(n)
        with tempfile.TemporaryDirectory(prefix="mv-time-") as tmp:
            db = Path(tmp) / "memviewer.db"
            t0 = time.perf_counter()
            build(db, n, rng)
            built = time.perf_counter() - t0
            r = measure(db, n, args.queries, rng)
        print(
            f"| {r['sessions']:,} | {r['turns']:,} | {r['sessions_in p50']} | {r['closeness p50']} | "
            f"{r['both p50']} | {r['both p99']} |  (built in {built:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
