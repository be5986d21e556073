"""Benchmark: recall latency at 10k / 100k / 1M turns, LanceDB disk size, and the
exact-vs-IVF_PQ crossover that sets ``ann_threshold``.

Turns are synthetic chat text (Zipf-distributed vocabulary, so BM25 posting
lists look like real ones) with *random unit vectors* from a seeded
``RandomEmbedder`` instead of the ONNX model: building 1M real embeddings
would take hours on 2 cores, and latency does not depend on what the vectors
mean. Query embedding (the real model: a few ms for one short query) is
therefore not in these numbers. Everything else is the real path: SQLite import,
``Indexer.sync`` (extractive summaries, LanceDB writes, optimize), then
``MemoryService.recall`` with hydration from SQLite.

All turns sit in one scope (the worst case: every query searches the whole
table). For each size, recall runs with exact (brute-force) vector search and,
when the table has an IVF_PQ index, with ANN; their overlap@10 says what ANN
costs in quality (random vectors are the hardest case for PQ).

Run: ``/tmp/venv/bin/python -m bench bench_recall [--sizes 10000,100000,1000000] [--queries 100]``
"""

from __future__ import annotations

import hashlib
import random
import statistics
import tempfile
import time
from collections.abc import Sequence

import numpy as np

from bench import harness
from memviewer.config import load_settings
from memviewer.service import MemoryService

PER_SESSION = 50
DIM = 384


class RandomEmbedder:
    """Seeded random unit vectors (same text → same vector); stands in for the model."""

    name = "random-384"
    dim = DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little")
            out[i] = np.random.default_rng(seed).standard_normal(DIM)
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


def vocabulary(n: int = 20_000, seed: int = 3) -> tuple[list[str], list[float]]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(n)]
    weights = [1.0 / (r + 1) for r in range(n)]
    return words, weights


def make_turns(n: int, seed: int = 11) -> list[str]:
    import itertools

    words, weights = vocabulary()
    cum = list(itertools.accumulate(weights))  # once, not per call
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.choice((6, 10, 16, 24, 40))
        out.append(" ".join(rng.choices(words, cum_weights=cum, k=k)))
    return out


def build(home: str, n: int) -> tuple[MemoryService, dict[str, float]]:
    # no IVF_PQ during sync: it is built (and timed) separately below
    settings = load_settings(env={}, home=home, retention="keep_all", ann_threshold=10**12)
    svc = MemoryService(settings, embedder=RandomEmbedder())
    texts = make_turns(n)
    t0 = time.perf_counter()
    for s in range(0, n, PER_SESSION):
        svc.import_session(
            {"id": f"s{s}", "scope": "user", "scope_id": "bench", "started_at": 1.7e9 + s},
            [
                {
                    "id": f"t{s + i}",
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": t,
                    "timestamp": 1.7e9 + s + i,
                }
                for i, t in enumerate(texts[s : s + PER_SESSION])
            ],
        )
    t_sql = time.perf_counter() - t0
    t0 = time.perf_counter()
    svc.sync_index()
    t_sync = time.perf_counter() - t0
    index = svc.parts.lance
    t0 = time.perf_counter()
    index.optimize(keep_versions_s=0)
    t_opt = time.perf_counter() - t0
    t0 = time.perf_counter()
    built = index.build_ann(force=True) if n >= 1000 else False
    t_ann = time.perf_counter() - t0 if built else 0.0
    index.optimize(keep_versions_s=0)
    return svc, {
        "sqlite_import_s": t_sql,
        "index_sync_s": t_sync,
        "optimize_s": t_opt,
        "ivf_pq_build_s": t_ann,
        "disk_bytes": index.disk_bytes(),
    }


def queries(k: int, seed: int = 5) -> list[str]:
    words, weights = vocabulary()
    rng = random.Random(seed)
    # mid-frequency words: neither stop-word-like nor unseen
    return [" ".join(rng.choices(words[50:2000], k=rng.randint(2, 5))) for _ in range(k)]


def measure(
    svc: MemoryService, qs: list[str], *, mode: str, ann: bool
) -> tuple[list[float], list[list[str]]]:
    threshold = 0 if ann else 10**12
    svc.settings = svc.parts.settings = svc.settings.with_overrides(ann_threshold=threshold)
    times, ids = [], []
    for q in qs:
        out = svc.recall(q, scope="user", scope_id="bench", mode=mode)
        path = out["diagnostics"]["index"]["vector_search"]
        assert path == ("ivf_pq" if ann else "exact"), f"asked for {'IVF_PQ' if ann else 'exact'}, ran {path}"
        times.append(out["diagnostics"]["timings_ms"]["total"])
        ids.append([r["turn_id"] for r in out["results"]])
    return times, ids


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--queries", type=int, default=100)
    args = harness.parse(ap, {"sizes": "500", "queries": 5})
    harness.header("bench_recall")
    sizes = [int(x) for x in args.sizes.split(",")]
    qs = queries(args.queries)
    print(
        f"# {args.queries} queries per cell; latency = MemoryService.recall total (ms), "
        "query embedding excluded"
    )
    print("| turns | mode | vector search | p50 ms | p99 ms | overlap@10 vs exact |")
    print("|---:|---|---|---:|---:|---:|")
    builds = {}
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="mv-bench-recall-") as home:
            svc, info = build(home, n)
            builds[n] = info
            for mode in ("hierarchical", "flat"):
                measure(svc, qs[:5], mode=mode, ann=False)  # warm caches
                exact_t, exact_ids = measure(svc, qs, mode=mode, ann=False)
                print(
                    f"| {n:,} | {mode} | exact | {statistics.median(exact_t):.1f} | "
                    f"{harness.pct(exact_t, 99):.1f} | 1.00 |",
                    flush=True,
                )
                if svc.parts.lance.has_vector_index():
                    measure(svc, qs[:5], mode=mode, ann=True)
                    ann_t, ann_ids = measure(svc, qs, mode=mode, ann=True)
                    overlap = statistics.fmean(
                        len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(ann_ids, exact_ids, strict=True)
                    )
                    print(
                        f"| {n:,} | {mode} | IVF_PQ | {statistics.median(ann_t):.1f} | "
                        f"{harness.pct(ann_t, 99):.1f} | {overlap:.2f} |",
                        flush=True,
                    )
            svc.close()
    print(
        "\n| turns | SQLite import s | index sync s | optimize s | IVF_PQ build s | LanceDB MB "
        "| MB per 100k turns |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, i in builds.items():
        mb = i["disk_bytes"] / 1e6
        print(
            f"| {n:,} | {i['sqlite_import_s']:.1f} | {i['index_sync_s']:.1f} | {i['optimize_s']:.1f} | "
            f"{i['ivf_pq_build_s']:.1f} | {mb:.1f} | {mb / n * 100_000:.1f} |"
        )


if __name__ == "__main__":
    main()
