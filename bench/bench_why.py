"""How long `recall --why` takes next to a plain recall, on a home with the real model.

    .venv/bin/python bench/bench_why.py HOME "QUERY" [--ranks 8,20,40] [--repeat 5]

Picks the turns at the given 0-based ranks of a flat top-50 recall (turns a hierarchical
run may miss), runs the why-not (with its fix search) for each and prints medians, the
stage that eliminated the turn, the fix and how many re-runs the search took. Reads only.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any


def median_ms(fn: Any, repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), out


def main() -> None:
    from memviewer.config import load_settings
    from memviewer.recall.why import why_not
    from memviewer.service import MemoryService

    ap = argparse.ArgumentParser()
    ap.add_argument("home")
    ap.add_argument("query")
    ap.add_argument("--ranks", default="8,20,40")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    svc = MemoryService(load_settings(None, env={}, home=args.home), readonly=True)
    svc.recall(args.query)  # load LanceDB and the model
    flat = svc.recall(args.query, mode="flat", top_k=50)["results"]
    ms, _ = median_ms(lambda: svc.recall(args.query), args.repeat)
    print(f"plain recall: median {ms:.0f} ms")
    for rank in (int(r) for r in args.ranks.split(",")):
        if rank >= len(flat):
            continue
        tid = flat[rank]["turn_id"]
        ms, (_, why) = median_ms(lambda tid=tid: why_not(svc, args.query, tid, {}), args.repeat)
        print(
            f"flat rank {rank + 1}: eliminated at {why['eliminated_at']}, fix {why['fix']} "
            f"(rank {why['fix_rank']}), {why['reruns']} re-runs, median {ms:.0f} ms"
        )
    svc.close()


if __name__ == "__main__":
    main()
