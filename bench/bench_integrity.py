"""Benchmark: what the vector index's integrity checks cost (``memviewer.index.integrity``).

Builds a home of SESSIONS × TURNS turns with the hash embedder (the check never embeds, so
the model does not matter), one indexer pass per batch of sessions, then times, as medians
of interleaved runs: the quick check (counts), recall's cached check on a hit, the exact
check (ids), and a whole ``recall`` with and without the check (the check is what
``MemoryService.recall`` adds after answering). Then it deletes the turns table's newest
manifest and times the heal (the next indexer pass).

    python -m bench bench_integrity [--sessions 200] [--turns 100] [--runs 7]

Results: ``docs/benchmarks.md`` ("Index integrity").
"""

from __future__ import annotations

import statistics
import tempfile
import time

from bench import harness
from memviewer import paths
from memviewer.config import load_settings
from memviewer.index import integrity
from memviewer.index.embedder import HashEmbedder
from memviewer.index.lance import TURNS
from memviewer.recall.hierarchical import recall as run_recall
from memviewer.service import MemoryService

WORDS = "heron walrus ocelot narwhal axolotl lettuce dentist kayak violin sourdough".split()


def _ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--sessions", type=int, default=200)
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--runs", type=int, default=7)
    args = harness.parse(ap, {"sessions": 5, "turns": 10, "runs": 1})
    harness.header("bench_integrity")
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(env={}, home=f"{tmp}/home", socket=f"{tmp}/none.sock")
        svc = MemoryService(settings, embedder=HashEmbedder())
        batch = max(1, args.sessions // 10)
        for k in range(args.sessions):
            svc.import_session(
                {"id": f"s{k}", "title": f"s{k}", "started_at": 1.7e9 + k * 1e4},
                [
                    {
                        "id": f"s{k}-t{i}",
                        "role": "user",
                        "content": f"{WORDS[k % 10]} {WORDS[i % 10]} note {i} of session {k}",
                        "timestamp": 1.7e9 + k * 1e4 + i,
                    }
                    for i in range(args.turns)
                ],
            )
            if (k + 1) % batch == 0:
                svc.sync_index()
        svc.sync_index()
        index, store = svc.parts.lance, svc.store
        n = index.count(TURNS)
        quick = _ms(lambda: integrity.quick_check(index, store), args.runs)
        integrity.recall_check(index, store)
        cached = _ms(lambda: integrity.recall_check(index, store), args.runs)
        exact = _ms(lambda: integrity.exact_check(index, store), max(3, args.runs // 2))
        plain, guarded = [], []
        for _ in range(args.runs):  # interleaved: the machine is shared and noisy
            t = time.perf_counter()
            run_recall(svc.parts, "walrus note")
            plain.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            svc.recall("walrus note")
            guarded.append((time.perf_counter() - t) * 1000)
        svc.close()
        versions = list(
            (paths.lance_dir(settings.home_path) / f"{TURNS}.lance" / "_versions").glob("*.manifest")
        )
        stems = [int(p.stem) for p in versions]
        newest = min(stems) if min(stems) > 2**63 else max(stems)
        next(p for p in versions if int(p.stem) == newest).unlink()
        svc = MemoryService(settings, embedder=HashEmbedder())
        lost = n - svc.parts.lance.count(TURNS)
        t = time.perf_counter()
        report = svc.sync_index()
        heal_s = time.perf_counter() - t
        healed = svc.parts.lance.count(TURNS)
        svc.close()
    harness.footer()
    print(f"{n:,} turns in {args.sessions} sessions")
    print(f"quick check (counts)          median {quick:8.1f} ms")
    print(f"recall's check, cache hit     median {cached:8.1f} ms")
    print(f"exact check (ids)             median {exact:8.1f} ms")
    print(
        f"recall without / with guard   median {statistics.median(plain):8.1f} / "
        f"{statistics.median(guarded):.1f} ms"
    )
    print(
        f"heal after a lost manifest: {lost:,} turns lost, "
        f"{report.get('healed', {}).get('turns', 0):,} re-embedded "
        f"in {heal_s:.2f} s (hash embedder), {healed:,} turns after"
    )


if __name__ == "__main__":
    main()
