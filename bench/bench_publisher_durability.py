"""Benchmark: what the Publisher's durability guarantee costs, and its caller-side latency.

One real hub process per run (``serve --no-index``, a fresh home), one Publisher fed
``--turns`` turns of ``--size`` bytes unpaced from one agent thread (episodes of 100
turns, a new session every 1,000). Two modes, alternated run by run so both see the
same machine load:

* ``sync``: ``sync_interval=0.05`` (the default): every command not acknowledged 50 ms
  after it was queued is written and fsync'd to the spool, hub or no hub;
* ``nosync``: ``sync_interval=None``: the spool is written only while no hub answers or
  the in-memory queue is half full (the behaviour before; a SIGKILL loses what the hub
  had not acknowledged).

Per run: ``add_turn`` latency on the agent's thread (p50, p99, max), the agent's rate
(turns/s until the last ``add_turn`` returned), the delivered rate (turns/s until
``flush()`` returned True: every turn committed by the hub), the worst time from a
call returning to its command being on disk (``stats()["durable_lag_max_s"]``), the
peak size of the spool folder (sampled every 20 ms), how often a call had to wait
for room in the queue, and the agent process's CPU time per 1,000 turns (agent thread
plus the publisher's threads: the cost that does not depend on the hub). ``--rate``
paces the agent (turns/s) below what the hub takes, where the guarantee's extra writes
show.

Run: ``python -m bench bench_publisher_durability [--turns 20000] [--size 2048]
[--runs 2] [--rate N]``
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import harness
from memviewer.client import Publisher
from memviewer.wire.testing import HubProcess

MODES = {"sync": 0.05, "nosync": None}


def spool_bytes(folder: Path) -> int:
    total = 0
    for path in folder.glob("*.ndjson"):
        try:
            total += path.stat().st_size
        except FileNotFoundError:
            pass
    return total


def one_run(mode: str, turns: int, size: int, rate: float | None = None) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="mvb-", dir="/tmp"))
    home, sock = root / "home", root / "hub.sock"
    spool = home / "spool"
    pad = "p" * max(0, size - 40)
    with HubProcess(home, sock):
        pub = Publisher(sock, home=home, sync_interval=MODES[mode])
        peak = 0
        sampling = threading.Event()

        def sampler() -> None:
            nonlocal peak
            while not sampling.is_set():
                peak = max(peak, spool_bytes(spool))
                time.sleep(0.02)

        threading.Thread(target=sampler, daemon=True).start()
        lat: list[int] = []
        clock = time.perf_counter_ns
        start = time.perf_counter()
        cpu0 = time.process_time()
        sid = eid = ""
        for i in range(turns):
            if rate:  # paced: the agent's i-th turn is due at i / rate
                ahead = start + i / rate - time.perf_counter()
                if ahead > 0:
                    time.sleep(ahead)
            if i % 1000 == 0:
                sid = pub.open_session(agent="bench", active_window=2000)
            if i % 100 == 0:
                eid = pub.start_episode(sid, f"task {i}")
            t0 = clock()
            pub.add_turn(eid, "tool", f"{i:08d} {pad}")
            lat.append(clock() - t0)
            if i % 100 == 99:
                pub.finalize_episode(eid)
        produced = time.perf_counter() - start
        ok = pub.flush(timeout=1800)
        delivered = time.perf_counter() - start
        cpu = time.process_time() - cpu0
        sampling.set()
        stats = pub.stats()
        pub.close(timeout=5)
    lat.sort()
    return {
        "mode": mode,
        "ok": ok,
        "agent_turns_s": turns / produced,
        "delivered_turns_s": turns / delivered,
        "cpu_ms_per_1k": cpu * 1e6 / turns,
        "p50_us": lat[len(lat) // 2] / 1000,
        "p99_us": lat[int(len(lat) * 0.99)] / 1000,
        "max_ms": lat[-1] / 1e6,
        "durable_lag_max_ms": stats["durable_lag_max_s"] * 1000,
        "spool_peak_mb": peak / 1e6,
        "spooled": stats["spooled_commands"],
        "caller_waits": stats["caller_waits"],
        "caller_wait_max_ms": stats["caller_wait_max_s"] * 1000,
    }


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--turns", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=2048)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--rate", type=float, default=None, help="turns/s (default: unpaced)")
    args = harness.parse(ap, {"turns": 300, "size": 256, "runs": 1})
    harness.header("bench_publisher_durability")
    print(
        f"# {args.turns} turns x {args.size} B, {args.runs} runs per mode, "
        f"{f'{args.rate:g} turns/s' if args.rate else 'unpaced'}"
    )
    results: list[dict[str, Any]] = []
    for r in range(args.runs):
        for mode in ("sync", "nosync") if r % 2 == 0 else ("nosync", "sync"):
            res = one_run(mode, args.turns, args.size, args.rate)
            results.append(res)
            print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in res.items()))
            sys.stdout.flush()
    harness.footer()
    keys = [k for k, v in results[0].items() if isinstance(v, float | int) and not isinstance(v, bool)]
    print("| median | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for mode in MODES:
        rows = [r for r in results if r["mode"] == mode]
        print(
            f"| {mode} | " + " | ".join(f"{statistics.median(r[k] for r in rows):.1f}" for k in keys) + " |"
        )


if __name__ == "__main__":
    main()
