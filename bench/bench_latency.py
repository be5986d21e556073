"""Benchmark: publish -> subscriber latency through a real hub, with 4 subscriber processes.

A paced ``Publisher`` calls ``add_turn`` at a fixed rate (events/s) for a few
seconds; 4 separate processes run ``Subscriber`` and record, for every
``episode.turn_added`` event, ``receive time - event ts`` where ``ts`` is the
publisher's call time. So the latency covers the publisher's batching, the
socket, the hub's group commit with fsync (SQLite synchronous=FULL) and the
fan-out. Everything runs on this one machine, so one clock.

Run: ``/tmp/venv/bin/python -m bench bench_latency [--rates 250,500,1000] [--seconds 8] [--subscribers 4]
[--session-turns 1000]``
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import harness
from memviewer.client import Publisher
from memviewer.wire.remote import RemoteService
from memviewer.wire.testing import HubProcess

CONTENT = "Reading tests/test_scheduler.py and the CI log to find why the job fires a second late."


def subscriber_main(sock: str, from_seq: int) -> None:
    """``--subscriber`` mode: stream until the seq given on stdin, print latencies (ms) as JSON."""
    from memviewer.wire.subscriber import Subscriber

    async def run() -> None:
        loop = asyncio.get_running_loop()
        until: list[int] = []
        lat: list[float] = []
        sub = Subscriber(sock, from_seq, client="bench")

        def got_until(fut: asyncio.Future[str]) -> None:
            until.append(int(fut.result() or 0))
            if sub.last_seq >= until[0]:
                sub.close()

        loop.run_in_executor(None, sys.stdin.readline).add_done_callback(got_until)
        print("ready", flush=True)
        async for ev in sub.stream():
            if ev.kind == "episode.turn_added":  # type: ignore[union-attr]
                lat.append((time.time() - ev.ts) * 1000.0)  # type: ignore[union-attr]
            if until and sub.last_seq >= until[0]:
                break
        print(json.dumps(lat), flush=True)

    asyncio.run(run())


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (Linux /proc), to report CPU per event independent of machine load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_rate(
    hub: HubProcess, rate: float, seconds: float, n_subs: int, spool: Path, session_turns: int = 1000
) -> dict[str, float]:
    with RemoteService(hub.socket_path) as remote:
        start_seq = remote.last_seq
    subs = [
        subprocess.Popen(
            [sys.executable, __file__, "--subscriber", str(hub.socket_path), str(start_seq)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(n_subs)
    ]
    for p in subs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    hub_cpu0 = cpu_seconds(hub.pid)
    total = int(rate * seconds)
    with Publisher(hub.socket_path, spool, home=hub.home) as pub:
        sid = pub.open_session(agent="latency-bench")
        eid = pub.start_episode(sid, "stream the build log")
        t0 = time.perf_counter()
        sent = 0
        while sent < total:
            due = min(total, int((time.perf_counter() - t0) * rate))
            while sent < due:
                if sent and sent % session_turns == 0:  # agents rotate sessions; keeps sessions realistic
                    pub.finalize_episode(eid)
                    pub.close_session(sid)
                    sid = pub.open_session(agent="latency-bench")
                    eid = pub.start_episode(sid, "stream the build log")
                elif sent and sent % 100 == 0:
                    pub.finalize_episode(eid)
                    eid = pub.start_episode(sid, f"stream the build log, part {sent // 100}")
                pub.add_turn(eid, "tool", CONTENT, metadata={"tool": "tail"})
                sent += 1
            time.sleep(0.002)
        pub.finalize_episode(eid)
        assert pub.flush(120)
        elapsed = time.perf_counter() - t0
    hub_cpu = cpu_seconds(hub.pid) - hub_cpu0
    with RemoteService(hub.socket_path) as remote:
        final = remote.last_seq
    lat: list[float] = []
    per_sub_p99: list[float] = []
    for p in subs:
        out, _ = p.communicate(f"{final}\n", timeout=120)
        values = json.loads(out.strip().splitlines()[-1])
        lat += values
        per_sub_p99.append(harness.pct(values, 99))
    return {
        "rate": rate,
        "achieved": total / elapsed,
        "events": len(lat) / n_subs,
        "p50": harness.pct(lat, 50),
        "p99": harness.pct(lat, 99),
        "max": max(lat),
        "p99_per_sub_median": statistics.median(per_sub_p99),
        "hub_cpu_ms_per_event": hub_cpu * 1000.0 / total,
    }


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--rates", default="250,500,1000")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--subscribers", type=int, default=4)
    ap.add_argument("--session-turns", type=int, default=1000, help="turns per session before rotating")
    args = harness.parse(ap, {"rates": "100", "seconds": 1.0, "subscribers": 1, "session_turns": 50})
    harness.header("bench_latency")
    base = Path(tempfile.mkdtemp(prefix="mvl-", dir="/tmp"))
    print(
        f"# {args.subscribers} subscriber processes, {args.seconds:.0f} s per rate, SQLite synchronous=FULL"
    )
    print(
        f"{'target ev/s':>11} {'achieved':>9} {'events':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
        f"{'hub CPU ms/event':>16}"
    )
    try:
        for rate in [float(r) for r in args.rates.split(",")]:
            with HubProcess(base / "home", base / "hub.sock", log_level="WARNING") as hub:
                r = run_rate(hub, rate, args.seconds, args.subscribers, base / "spool", args.session_turns)
            print(
                f"{r['rate']:11.0f} {r['achieved']:9.0f} {r['events']:7.0f} {r['p50']:8.1f} "
                f"{r['p99']:8.1f} {r['max']:8.1f} {r['hub_cpu_ms_per_event']:16.2f}",
                flush=True,
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--subscriber":
        subscriber_main(sys.argv[2], int(sys.argv[3]))
    else:
        main()
