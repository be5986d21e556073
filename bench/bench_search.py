"""Benchmark: keyword session search — memviewer vs PraisonAI's own stores, same files, one run.

For each corpus size it generates PraisonAI session files (``search_corpus.py``:
~40 messages each, a third compacted, 5 % CJK, planted unique phrases), imports
them with memviewer's PraisonAI importer, and times discovery search for

* memviewer ``KeywordSearch.search`` (FTS5 turn index, ``memviewer.store.fts``),
* ``praisonaiagents.session.SqliteSessionStore.search`` (its FTS5 session index),
* ``praisonaiagents.session.store.DefaultSessionStore.search`` (its file scan),

on the planted queries (the right answer is known: top-hit agreement is
reported) and on a few common queries (latency only). ``--tokenizers`` adds
the word-level vs trigram comparison behind the index design.

Setup (once) — PraisonAI lives only in a separate venv, never in memviewer's
dependencies::

    python3 -m venv /tmp/benchvenv
    /tmp/benchvenv/bin/pip install praisonaiagents sqlmodel click
    /tmp/benchvenv/bin/pip install --no-deps -e .      # memviewer itself (or rely on the
                                                       # sys.path line below)

Run (corpora and databases go under --work, not the repo; they are reused)::

    /tmp/benchvenv/bin/python -m bench bench_search --sizes 1000 10000 --queries 30
    /tmp/benchvenv/bin/python -m bench bench_search --sizes 100000 --queries 30 --default-queries 3 \
        --skip-praisonai-sqlite        # its first search indexes every file: ~1 h at 100k here

Results: ``docs/benchmarks.md``.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import memviewer.store.fts as fts
from bench import (
    harness,
    search_corpus,
)
from memviewer.praisonai.format import iter_session_files, load_file
from memviewer.recall.keyword import KeywordSearch
from memviewer.session.manager import SessionManager
from memviewer.store.db import Store


def _time(fn: Callable[[str], str | None], queries: list[str]) -> tuple[list[float], list[str | None]]:
    times, tops = [], []
    for q in queries:
        t = time.perf_counter()
        top = fn(q)
        times.append((time.perf_counter() - t) * 1000)
        tops.append(top)
    return times, tops


def _corpus(work: Path, n: int, planted: int) -> tuple[Path, list[dict]]:
    folder = work / f"sessions-{n}"
    meta = work / f"sessions-{n}.planted.json"
    if meta.exists():
        return folder, json.loads(meta.read_text())
    t = time.perf_counter()
    search_corpus.generate(folder, n, planted)
    print(f"  generated {n} sessions in {time.perf_counter() - t:.1f}s", flush=True)
    return folder, json.loads(meta.read_text())


def _import(db: Path, folder: Path, batch: int) -> float:
    """Import every file of ``folder``; ``batch`` sessions per transaction (1 = like the CLI)."""
    store = Store.open(db)
    mgr = SessionManager(store)
    files = sorted(iter_session_files([folder]))
    t = time.perf_counter()
    for i in range(0, len(files), batch):
        with store.write():
            for path in files[i : i + batch]:
                mgr.import_session(*load_file(path))
    secs = time.perf_counter() - t
    store.close()
    return secs


def _write_overhead(work: Path, folder: Path, n: int) -> str:
    """Import the same files with and without the FTS triggers, one transaction per session."""
    out = {}
    for label, env in (("with FTS", None), ("without FTS", "1")):
        db = work / f"overhead-{n}.db"
        for p in work.glob(f"overhead-{n}.db*"):
            p.unlink()
        if env:
            os.environ[fts.FORCE_ENV] = env
        try:
            out[label] = _import(db, folder, 1)
        finally:
            os.environ.pop(fts.FORCE_ENV, None)
        size = sum(p.stat().st_size for p in work.glob(f"overhead-{n}.db*")) / 2**20
        out[label + " MB"] = size
        for p in work.glob(f"overhead-{n}.db*"):
            p.unlink()
    return (
        f"- write cost of the index ({n} sessions, one transaction per session as `memviewer import` "
        f"does): {n / out['with FTS']:.0f} sessions/s with the FTS triggers vs "
        f"{n / out['without FTS']:.0f} without; database {out['with FTS MB']:.0f} MB vs "
        f"{out['without FTS MB']:.0f} MB"
    )


def _memviewer_db(work: Path, folder: Path, n: int) -> tuple[Path, dict]:
    db = work / f"memviewer-{n}.db"
    info_path = work / f"memviewer-{n}.import.json"
    if db.exists() and info_path.exists():
        return db, json.loads(info_path.read_text())
    for p in work.glob(f"memviewer-{n}.db*"):
        p.unlink()
    secs = _import(db, folder, 500)
    store = Store.open(db, readonly=True)
    with store.read() as conn:
        counts = fts.counts(conn)
        sessions = int(conn.exec_driver_sql("SELECT COUNT(*) FROM sessions").scalar())
    store.close()
    info = {
        "seconds": secs,
        "sessions": sessions,
        **counts,
        "db_mb": sum(p.stat().st_size for p in work.glob(f"memviewer-{n}.db*")) / 2**20,
    }
    info_path.write_text(json.dumps(info))
    return db, info


def _tokenizer_comparison(db: Path, work: Path, queries: list[str], common: list[str]) -> list[str]:
    """Build a word-level and a trigram-only index over the same turns; compare size, build, latency."""
    lines = [
        "| index | build s | size MB | planted p50 ms | common p50 ms | common p99 ms "
        "| 'migration' finds 'migrating' |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, tok in (("porter unicode61", fts.WORD_TOKENIZER), ("trigram", "trigram")):
        path = work / f"tok-{name.replace(' ', '-')}.db"
        if path.exists():
            path.unlink()
        conn = sqlite3.connect(path)
        conn.execute(f"ATTACH DATABASE 'file:{db}?mode=ro' AS src")
        t = time.perf_counter()
        conn.execute(f"CREATE VIRTUAL TABLE f USING fts5(content, content='', tokenize='{tok}')")
        conn.execute("INSERT INTO f(rowid, content) SELECT num, content FROM src.turns")
        conn.execute("INSERT INTO f(f) VALUES ('optimize')")
        conn.commit()
        build = time.perf_counter() - t

        def run(q: str, conn: sqlite3.Connection = conn) -> str | None:
            from memviewer.recall import fts_query

            match = fts_query.word_match(fts_query.parse(q)) or '""'
            sql = "SELECT rowid FROM f WHERE f MATCH ? ORDER BY rank LIMIT 400"
            rows = conn.execute(sql, (match,)).fetchall()
            return str(rows[0][0]) if rows else None

        for q in queries[:3]:
            run(q)
        pt, _ = _time(run, queries)
        ct, _ = _time(run, [q for q in common if q.isascii()] * 3)
        stem = bool(
            conn.execute(
                "SELECT count(*) FROM f WHERE f MATCH '\"migration\"' AND rowid IN "
                "(SELECT num FROM src.turns WHERE content LIKE '%migrating%' LIMIT 50)"
            ).fetchone()[0]
        )
        conn.close()
        size = path.stat().st_size / 2**20
        lines.append(
            f"| {name} | {build:.1f} | {size:.0f} | {statistics.median(pt):.2f} | "
            f"{statistics.median(ct):.2f} | {harness.pct(ct, 99):.2f} | {'yes' if stem else 'no'} |"
        )
        path.unlink()
    return lines


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--queries", type=int, default=30, help="planted queries per size")
    ap.add_argument(
        "--default-queries",
        type=int,
        default=None,
        help="cap on queries for DefaultSessionStore (it scans every file per query)",
    )
    ap.add_argument("--work", type=Path, default=Path("/tmp/mvbench"))
    ap.add_argument("--tokenizers", action="store_true", help="also compare word-level vs trigram indexes")
    ap.add_argument("--skip-praisonai", action="store_true")
    ap.add_argument(
        "--skip-praisonai-sqlite",
        action="store_true",
        help="skip SqliteSessionStore (its first search indexes every file: ~1 h at 100k here)",
    )
    ap.add_argument(
        "--write-overhead",
        action="store_true",
        help="also import each corpus with and without the FTS triggers (slow: one commit each)",
    )
    args = harness.parse(ap, {"sizes": [60], "queries": 3, "work": harness.scratch})
    harness.header("bench_search")
    logging.disable(logging.WARNING)
    args.work.mkdir(parents=True, exist_ok=True)
    print(
        f"# SQLite {sqlite3.sqlite_version}",
        flush=True,
    )
    table = [
        "| sessions | engine | queries | p50 ms | p99 ms | top hit = planted |",
        "|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for n in args.sizes:
        print(f"\n## {n} sessions", flush=True)
        folder, planted = _corpus(args.work, n, min(args.queries, n))
        phrases = [p["query"] for p in planted]
        questions = [f"What did we decide about the {q}?" for q in phrases]
        truth = [p["session_id"] for p in planted]
        common = search_corpus.COMMON_QUERIES
        db, info = _memviewer_db(args.work, folder, n)
        notes.append(
            f"- {n} sessions: {info['sessions']} sessions / {info['turns']} turns imported in "
            f"{info['seconds']:.1f}s (500 sessions per transaction); "
            f"database {info['db_mb']:.0f} MB; "
            f"{info.get('cjk', 0)} turns in the CJK index"
        )
        if args.write_overhead:
            notes.append(_write_overhead(args.work, folder, n))
        store = Store.open(db, readonly=True)
        ks = KeywordSearch(store)

        def mv(q: str, ks: KeywordSearch = ks) -> str | None:
            r = ks.search(q, limit=5, window=5)
            return r["results"][0]["session_id"] if r.get("results") else None

        engines: list[tuple[str, Callable[[str], str | None], int | None]] = [
            ("memviewer (FTS5 turns)", mv, None)
        ]
        if not args.skip_praisonai:
            from praisonaiagents.session import SqliteSessionStore
            from praisonaiagents.session.store import DefaultSessionStore

            if not args.skip_praisonai_sqlite:
                pa_db = args.work / f"praisonai-{n}.db"
                sq = SqliteSessionStore(session_dir=str(folder), db_path=str(pa_db))
                t = time.perf_counter()
                sq.search("warm up the index")  # builds (or opens) its FTS index from the files
                notes.append(
                    f"- {n} sessions: SqliteSessionStore first search (index build/open) "
                    f"{time.perf_counter() - t:.1f}s"
                )

                def pa_sqlite(q: str, sq: SqliteSessionStore = sq) -> str | None:
                    hits = sq.search(q, limit=5, window=5)
                    return hits[0].session_id if hits else None

                engines.append(("PraisonAI SqliteSessionStore", pa_sqlite, None))

            df = DefaultSessionStore(session_dir=str(folder))

            def pa_default(q: str, df: DefaultSessionStore = df) -> str | None:
                hits = df.search(q, limit=5, window=5)
                return hits[0].session_id if hits else None

            engines.append(("PraisonAI DefaultSessionStore", pa_default, args.default_queries))
        for name, fn, cap in engines:
            tr = truth[:cap] if cap else truth
            for qset, qs in (("phrase", phrases[: len(tr)]), ("question", questions[: len(tr)])):
                for q in qs[:2]:
                    fn(q)  # warm caches (page cache, statement cache)
                pt, tops = _time(fn, qs)
                agree = sum(1 for a, b in zip(tops, tr, strict=True) if a == b)
                row = (
                    f"| {n} | {name} | {qset} | {statistics.median(pt):.2f} | {harness.pct(pt, 99):.2f} | "
                    f"{agree}/{len(qs)} |"
                )
                table.append(row)
                print(row, flush=True)
            ct, _ = _time(fn, common[: max(2, len(tr) // 4)] if cap else common)
            p99 = harness.pct(ct, 99)
            row = f"| {n} | {name} | common words | {statistics.median(ct):.2f} | {p99:.2f} | – |"
            table.append(row)
            print(row, flush=True)
        store.close()
        if args.tokenizers:
            print("\n### tokenizers", flush=True)
            for line in _tokenizer_comparison(db, args.work, phrases, common):
                print(line, flush=True)
    print("\n" + "\n".join(table))
    print("\n" + "\n".join(notes))


if __name__ == "__main__":
    main()
