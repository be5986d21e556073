"""The physical limits of memviewer's two read paths, and how close each path is to them.

1. One embedding of a typical turn: ``OnnxEmbedder.embed`` (int8 all-MiniLM-L6-v2, the real
   packaged model) on batches of 32 turns from LongMemEval-S and RealTalk (LoCoMo-like chat),
   texts read from the shared data folder (``harness.data_dir``, see ``bench_index.dataset_texts``);
   median wall and
   CPU milliseconds per turn over ``--batches`` batches. Also one query alone (batch 1): what
   a recall pays before it searches anything.
2. On one home built here (``--sessions`` sessions of RealTalk turns, embedded with the same
   model), interleaved per query, ``--rounds`` times: one query embedding, one bare FTS5
   ``MATCH … ORDER BY rank LIMIT 400`` on the turn index in SQLite alone (``sqlite3`` module),
   ``MemoryService.search`` (keyword search, in-process) and ``MemoryService.recall``
   (hierarchical recall, in-process). Each path's p50 is then given as a multiple of its floor
   (search: the bare MATCH; recall: one query embedding).

The keyword floor at 2k/10k sessions is also the "bare MATCH" column of
``bench_search_hub.py``.

    python -m bench bench_limits [--batches 10] [--sessions 100] [--rounds 3]
"""

from __future__ import annotations

import logging
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench import harness
from bench.bench_index import dataset_texts
from memviewer.config import load_settings
from memviewer.index.embedder import OnnxEmbedder
from memviewer.recall import fts_query
from memviewer.service import MemoryService


def _load() -> str:
    return harness.load()


def embeddings(model: OnnxEmbedder, batches: int) -> None:
    for name in ("realtalk", "longmemeval"):
        texts = dataset_texts(name, 32 * batches)
        wall, cpu = [], []
        for b in range(batches):
            batch = texts[b * 32 : (b + 1) * 32]
            t, c = time.perf_counter(), time.process_time()
            model.embed(batch)
            wall.append((time.perf_counter() - t) * 1000 / 32)
            cpu.append((time.process_time() - c) * 1000 / 32)
        chars = statistics.median(len(x) for x in texts)
        print(
            f"{name}: median {chars:.0f} chars/turn; per turn {statistics.median(wall):.2f} ms wall, "
            f"{statistics.median(cpu):.2f} ms CPU (batch 32) -> {1000 / statistics.median(wall):.0f} "
            f"turns/s (load {_load()})",
            flush=True,
        )


def paths(model: OnnxEmbedder, sessions: int, rounds: int) -> None:
    texts = dataset_texts("realtalk", sessions * 10)
    with tempfile.TemporaryDirectory(prefix="mv-limits-") as tmp:
        settings = load_settings(
            Path(tmp) / "no-config.toml", env={}, home=str(Path(tmp) / "home"), socket=str(Path(tmp) / "s")
        )
        svc = MemoryService(settings, embedder=model)
        t = time.perf_counter()
        for s in range(sessions):
            sid = f"s{s}"
            chunk = texts[s * 10 : (s + 1) * 10]
            svc.open_session(session_id=sid, agent="bench", scope="user", scope_id="u1")
            ep = svc.start_episode(sid, chunk[0])
            for i, text in enumerate(chunk[1:]):
                svc.add_turn(ep["episode_id"], "assistant" if i % 2 == 0 else "user", text)
            svc.finalize_episode(ep["episode_id"])
        svc.sync_index()
        print(f"home: {sessions} sessions, {len(texts)} turns, embedded in {time.perf_counter() - t:.1f}s")
        queries = [" ".join(x.split()[:5]) for x in texts[3 :: max(1, len(texts) // 20)]][:20]
        raw = sqlite3.connect(f"file:{settings.home_path / 'memviewer.db'}?mode=ro", uri=True)

        def embed(q: str) -> None:
            model.embed([q])

        def bare(q: str) -> None:
            match = fts_query.word_match(fts_query.parse(q)) or '""'
            sql = "SELECT rowid FROM turns_fts WHERE turns_fts MATCH ? ORDER BY rank LIMIT 400"
            raw.execute(sql, (match,)).fetchall()

        def search(q: str) -> None:
            assert svc.search(q, limit=5, window=5)["success"]

        def recall(q: str) -> None:
            svc.recall(q, scope="user", scope_id="u1")

        engines: dict[str, Callable[[str], None]] = {
            "embed": embed,
            "bare": bare,
            "search": search,
            "recall": recall,
        }
        for fn in engines.values():
            fn(queries[0])
        times: dict[str, list[float]] = {k: [] for k in engines}
        for rnd in range(rounds):
            for i, q in enumerate(queries):
                order = list(engines.items())
                if (rnd + i) % 2:
                    order.reverse()
                for key, fn in order:
                    t0 = time.perf_counter()
                    fn(q)
                    times[key].append((time.perf_counter() - t0) * 1000)
        med = {k: statistics.median(v) for k, v in times.items()}
        print(f"paths ({len(queries)} queries x {rounds} rounds, load {_load()}), p50 ms:")
        print(f"  one query embedding (batch 1) {med['embed']:.2f}")
        print(f"  bare FTS5 MATCH ORDER BY rank {med['bare']:.3f}")
        print(f"  search in-process {med['search']:.2f} ({med['search'] / med['bare']:.1f}x the bare MATCH)")
        print(
            f"  recall in-process {med['recall']:.2f} "
            f"({med['recall'] / med['embed']:.1f}x one query embedding)"
        )
        raw.close()
        svc.close()


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    args = harness.parse(ap, {"batches": 1, "sessions": 4, "rounds": 1})
    harness.header("bench_limits")
    logging.disable(logging.WARNING)
    model = OnnxEmbedder()
    model.embed(["warm up"])
    embeddings(model, args.batches)
    paths(model, args.sessions, args.rounds)


if __name__ == "__main__":
    main()
