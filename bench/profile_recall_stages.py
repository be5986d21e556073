"""Where hierarchical recall's time goes at 10k turns: per-stage medians of
``diagnostics.timings_ms`` (embed, stage2, stage1, post_filter, rerank, hydrate, total).

    python -m bench profile_recall_stages build HOME [--turns 10000]
    PYTHONPATH=SRC python -m bench profile_recall_stages run HOME [--queries 40] [--rounds 3]

``build`` makes the synthetic home of ``bench_recall.py`` (random unit vectors, Zipf text,
one scope, 50 turns a session) once; ``run`` measures recall on it with whichever
``memviewer`` is on the path, so two source trees can be compared on the same home,
interleaved run by run. Exact vector search only (below ``ann_threshold``), as recall
uses it in a scope of this size. ``--cprofile`` adds the 25 costliest functions.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import memviewer
from bench import harness


def main() -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("what", choices=("build", "run"))
    ap.add_argument("home")
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mode", default="hierarchical")
    ap.add_argument("--cprofile", action="store_true")
    args = harness.parse(ap, needs="a home (build HOME first)")
    harness.header("profile_recall_stages")

    from bench.bench_recall import RandomEmbedder, build, queries
    from memviewer.config import load_settings
    from memviewer.service import MemoryService

    if args.what == "build":
        svc, info = build(args.home, args.turns)
        svc.close()
        print(info)
        return 0
    settings = load_settings(env={}, home=args.home, retention="keep_all", ann_threshold=10**12)
    svc = MemoryService(settings, embedder=RandomEmbedder())
    qs = queries(args.queries)
    for q in qs[:5]:  # warm caches
        svc.recall(q, scope="user", scope_id="bench", mode=args.mode)
    stages: dict[str, list[float]] = {}
    prof = None
    if args.cprofile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    for _ in range(args.rounds):
        for q in qs:
            out = svc.recall(q, scope="user", scope_id="bench", mode=args.mode)
            for k, v in out["diagnostics"]["timings_ms"].items():
                stages.setdefault(k, []).append(v)
    if prof is not None:
        import pstats

        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    svc.close()
    src = Path(memviewer.__file__).resolve().parents[1]
    row = " ".join(f"{k} {statistics.median(v):.1f}" for k, v in stages.items())
    print(f"{src} {args.mode} n={len(stages['total'])} p50 ms: {row}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
