"""How long `recall --why` takes next to a plain recall, on a home with the real model.

    python -m bench bench_why HOME "QUERY" [--ranks 8,20,40] [--repeat 5] [--last]

Picks the turns at the given 0-based ranks of a flat top-50 recall (turns a hierarchical
run may miss), and with ``--last`` the last turn of the session Stage 1 ranks last (a search
that runs all 60 re-runs), runs the why-not (with its fix search) for each and prints medians,
the stage that eliminated the turn, the fix and how many re-runs the search took. Each target
is run twice in turn, side by side: re-runs sharing reads and stages (``RerunCache``, what
`recall --why` does) and independent re-runs (every stage again, as before the cache); the
two must report the same why. Reads only.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench import harness


def median_ms(fn: Any, repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), out


class Independent:
    """A ``RerunCache`` that shares nothing: every re-run reads and scores again."""

    def __init__(self) -> None:
        from collections import Counter

        self.stats: Counter[str] = Counter()

    def index(self, index: Any) -> Any:
        return index

    def stage2(self, key: str, compute: Any) -> Any:
        return compute()

    def stage1(self, key: str, compute: Any) -> Any:
        return compute()


def main() -> None:
    from memviewer.config import load_settings
    from memviewer.recall.why import why_not
    from memviewer.service import MemoryService

    ap = harness.parser(__doc__)
    ap.add_argument("home")
    ap.add_argument("query")
    ap.add_argument("--ranks", default="8,20,40")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--last", action="store_true", help="also the last turn of the last Stage-1 session")
    args = harness.parse(ap, needs="a home with the real model and a query")
    harness.header("bench_why")
    svc = MemoryService(load_settings(None, env={}, home=args.home), readonly=True)
    svc.recall(args.query)  # load LanceDB and the model
    flat = svc.recall(args.query, mode="flat", top_k=50)["results"]
    ms, _ = median_ms(lambda: svc.recall(args.query), args.repeat)
    print(f"plain recall: median {ms:.0f} ms")
    targets = [
        (f"flat rank {r + 1}", flat[r]["turn_id"]) for r in map(int, args.ranks.split(",")) if r < len(flat)
    ]
    if args.last:
        last = svc.recall(args.query, top_sessions=50)["diagnostics"]["stage1"][-1]["session_id"]
        targets.append(("last session's last turn", svc.session(last)["turns"][-1]["turn_id"]))
    as_of = {"as_of": time.time()}  # one moment: both ways answer the same question
    for label, tid in targets:
        times: dict[str, list[float]] = {"shared": [], "independent": []}
        whys: dict[str, Any] = {}
        for _ in range(args.repeat):  # alternate, so load swings hit both alike
            for way in ("shared", "independent"):
                cache = None if way == "shared" else Independent()
                start = time.perf_counter()
                _, whys[way] = why_not(svc.parts, args.query, tid, as_of, reranker=svc.reranker, cache=cache)
                times[way].append((time.perf_counter() - start) * 1000)
        why = whys["shared"]
        same = whys["shared"] == whys["independent"]
        print(
            f"{label}: eliminated at {why['eliminated_at']}, fix {why['fix']} (rank {why['fix_rank']}), "
            f"{why['reruns']} re-runs; median shared {statistics.median(times['shared']):.0f} ms, "
            f"independent {statistics.median(times['independent']):.0f} ms; same why: {same}"
        )
    svc.close()


if __name__ == "__main__":
    main()
