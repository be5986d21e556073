"""What a chat rule costs a recall: the same questions with the defaults and with the rule off,
interleaved in one process on one evaluation home (``eval realtalk --keep-home``).

    python -m bench ab_chat_windows FILE HOME --cache-dir DIR [--questions 200] [--rounds 3] \
        [--off chat_window_share=0] [--off chat_question_penalty=0 --off chat_flat_pool=0]

Each question runs twice per round, once with the defaults ("on") and once with the ``--off``
tuning (default ``chat_window_share=0``: Stage 1's windows, whose query it skips), alternating
which goes first. Latency is the recall's
own ``timings_ms.total`` (the query embedding, answered by the cache, excluded); the table
gives p50 / p99 of each and the ratio of the p50s, hierarchical mode.
"""

from __future__ import annotations

import statistics

from bench import harness


def main() -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("file")
    ap.add_argument("home")
    ap.add_argument("--cache-dir", required=True)
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--off", action="append", default=None, help="KEY=VALUE tuning of the off arm")
    args = harness.parse(ap, needs="an evaluation file and a home kept by eval realtalk --keep-home")
    harness.header("ab_chat_windows")
    off = {k: float(v) for k, _, v in (o.partition("=") for o in args.off or ["chat_window_share=0"])}

    from memviewer.config import load_settings
    from memviewer.eval import conversations as ev
    from memviewer.eval.embed_cache import CachedEmbedder
    from memviewer.index.embedder import OnnxEmbedder
    from memviewer.service import MemoryService

    settings = load_settings(env={}, home=args.home, retention="keep_all")
    cache = CachedEmbedder(OnnxEmbedder(settings.model_dir), args.cache_dir)
    service = MemoryService(settings, embedder=cache)
    asks = [(c.id, q.question) for c in ev.load_conversations(args.file) for q in c.questions]
    asks = asks[:: max(1, len(asks) // args.questions)][: args.questions]
    times: dict[str, list[float]] = {"on": [], "off": []}
    stage1: dict[str, list[float]] = {"on": [], "off": []}
    try:
        for r in range(args.rounds):
            for i, (cid, q) in enumerate(asks):
                order = ("on", "off") if (i + r) % 2 == 0 else ("off", "on")
                for name in order:
                    tuning = None if name == "on" else off
                    out = service.recall(q, scope=ev.SCOPE, scope_id=cid, tuning=tuning)
                    t = out["diagnostics"]["timings_ms"]
                    times[name].append(float(t["total"]))
                    stage1[name].append(float(t.get("stage1", 0.0)))
    finally:
        cache.save()
        service.close()
    harness.footer()
    print(f"{len(asks)} questions x {args.rounds} rounds per arm, hierarchical; off = {off}")
    for name in ("on", "off"):
        v = sorted(times[name])
        print(
            f"{name:8s} total p50 {statistics.median(v):.2f} ms p99 {v[int(0.99 * (len(v) - 1))]:.2f} ms"
            f"  stage1 p50 {statistics.median(stage1[name]):.2f} ms"
        )
    ratio = statistics.median(times["on"]) / statistics.median(times["off"])
    print(f"ratio of p50s on/off: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
