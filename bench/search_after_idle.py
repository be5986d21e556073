"""What one in-process keyword search costs back to back and after the thread did something else.

A hub's thread meets each search after waiting for it (a wake-up), a benchmark's in-process
loop often runs them back to back. This times ``KeywordSearch.search`` on the planted phrases
(wall and the thread's CPU time, p50) back to back, after sleeping 1, 5 or 20 ms, after a
2 ms busy spin and after touching 32 MB, and counts the VM's steal ticks (``/proc/stat``)
meanwhile: if the thread's CPU time grows with the wall time while steal stays near zero,
the search itself runs slower (caches and branch predictors cold), not the scheduler.

    cd /tmp && PYTHONPATH=/path/to/tree python -m bench search_after_idle --home DIR/home-2000 \\
        --planted DIR/sessions-2000.planted.json
"""

from __future__ import annotations

import json
import logging
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from bench import harness
from memviewer.recall.keyword import KeywordSearch
from memviewer.store.db import Store


def _steal() -> int:
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--planted", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    args = harness.parse(
        ap,
        {"home": lambda: harness.search_home()[0], "planted": lambda: harness.search_home()[1], "rounds": 1},
    )
    harness.header("search_after_idle")
    logging.disable(logging.WARNING)
    store = Store.open(args.home / "memviewer.db", readonly=True)
    ks = KeywordSearch(store)
    queries = [p["query"] for p in json.loads(args.planted.read_text())]
    for q in queries:
        ks.search(q, limit=5, window=5)
    junk = bytearray(32 << 20)

    def spin() -> None:
        end = time.perf_counter() + 0.002
        while time.perf_counter() < end:
            pass

    def touch() -> None:
        junk[::64] = bytes(len(junk) // 64)

    before: dict[str, Callable[[], None] | None] = {
        "back to back": None,
        "after sleeping 1 ms": lambda: time.sleep(0.001),
        "after sleeping 5 ms": lambda: time.sleep(0.005),
        "after sleeping 20 ms": lambda: time.sleep(0.02),
        "after a 2 ms busy spin": spin,
        "after touching 32 MB": touch,
    }
    print(f"# {args.home}")
    print("| before each search | wall p50 µs | thread CPU p50 µs | steal ticks / s |")
    print("|---|---:|---:|---:|")
    for name, fn in before.items():
        wall: list[int] = []
        cpu: list[int] = []
        s0, t0 = _steal(), time.monotonic()
        for q in queries * args.rounds:
            if fn is not None:
                fn()
            c, w = time.thread_time_ns(), time.perf_counter_ns()
            ks.search(q, limit=5, window=5)
            wall.append(time.perf_counter_ns() - w)
            cpu.append(time.thread_time_ns() - c)
        rate = (_steal() - s0) / max(time.monotonic() - t0, 1e-9)
        w50, c50 = statistics.median(wall) / 1e3, statistics.median(cpu) / 1e3
        print(f"| {name} | {w50:.0f} | {c50:.0f} | {rate:.0f} |")
    harness.footer()
    ks.close()
    store.close()


if __name__ == "__main__":
    main()
