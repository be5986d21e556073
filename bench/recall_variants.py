"""Recall variants side by side on an evaluation home kept by ``eval ... --keep-home``.

    python -m bench recall_variants realtalk FILE HOME --half tune \\
        --variant base --variant 'name=tuning.name_prior=0' --variant 'stw=tuning.session_turn_weight=0.4'

Each ``--variant NAME=KEY=VALUE[,KEY=VALUE]`` sets ``weights.<w>`` or ``tuning.<t>`` (or
``top_sessions`` / ``chunks_per_session``) on top of the defaults; ``base`` is the defaults. The
home must hold the set already (ingested and indexed), so only recall runs. The embedding cache
given with ``--cache-dir`` answers the query embeddings.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from bench import harness


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    name, _, spec = text.partition("=")
    kw: dict[str, Any] = {}
    for item in filter(None, spec.split(",")):
        key, _, value = item.partition("=")
        v: Any = float(value)
        if key in ("top_sessions", "chunks_per_session", "top_k"):
            kw[key] = int(v)
            continue
        group, _, field = key.partition(".")
        kw.setdefault(group, {})[field] = v
    return name, kw


def main() -> int:
    ap = harness.parser(__doc__)
    ap.add_argument("kind", choices=("realtalk", "longmemeval"))
    ap.add_argument("file")
    ap.add_argument("home")
    ap.add_argument("--cache-dir", required=True)
    ap.add_argument("--half", choices=("tune", "holdout", "all"), default="tune")
    ap.add_argument("--system", action="append", default=None)
    ap.add_argument("--variant", action="append", default=None)
    ap.add_argument("--split", type=int, default=None)
    args = harness.parse(ap, needs="an evaluation file and a kept home")
    harness.header("recall_variants")

    from memviewer.config import load_settings
    from memviewer.eval.embed_cache import CachedEmbedder
    from memviewer.index.embedder import OnnxEmbedder
    from memviewer.service import MemoryService

    settings = load_settings(env={}, home=args.home, retention="keep_all")
    cache = CachedEmbedder(OnnxEmbedder(settings.model_dir), args.cache_dir)
    service = MemoryService(settings, embedder=cache)
    variants = [parse_variant(v) for v in (args.variant or ["base"])]
    out: dict[str, Any] = {}
    try:
        if args.kind == "realtalk":
            from memviewer.eval import conversations as ev

            data = ev.load_conversations(args.file)
            split = args.split or (len(data) + 1) // 2
            data = {"tune": data[:split], "holdout": data[split:], "all": data}[args.half]
            systems = args.system or ["hierarchical", "flat"]
            for name, kw in variants:
                t0 = time.perf_counter()
                rep = ev.evaluate(service, data, systems=systems, **kw)
                out[name] = {s: rep["systems"][s] for s in systems}
                row = " ".join(
                    f"{s}: R@5 {g['all']['turn_r@5']:.3f} R@10 {g['all']['turn_r@10']:.3f} "
                    f"sR@5 {g['all']['session_r@5']:.3f} MRR {g['all']['mrr']:.3f}"
                    for s, g in out[name].items()
                )
                print(f"{name:24s} {row}  ({time.perf_counter() - t0:.0f}s)", flush=True)
        else:
            from memviewer.eval import longmemeval as ev

            qs = ev.load_questions(args.file)
            split = args.split or 50
            qs = {"tune": qs[:split], "holdout": qs[split:], "all": qs}[args.half]
            systems = args.system or ["hierarchical", "flat"]
            for name, kw in variants:
                t0 = time.perf_counter()
                rep = ev.evaluate(service, qs, ev.gold_of(qs), systems=systems, **kw)
                out[name] = {s: rep["systems"][s] for s in systems}
                row = " ".join(
                    f"{s}: any@5 {g['all']['session_any@5']:.3f} all@5 {g['all']['session_all@5']:.3f} "
                    f"R@10 {g['all']['turn_recall@10']:.3f}"
                    for s, g in out[name].items()
                )
                print(f"{name:24s} {row}  ({time.perf_counter() - t0:.0f}s)", flush=True)
    finally:
        cache.save()
        service.close()
    json.dump(out, sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
