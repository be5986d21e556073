"""Benchmark: acknowledged publish throughput through a real hub process.

Measures turns/s from the first ``add_turn`` call until ``flush()`` returns
(every turn durable in SQLite), for a ``Publisher`` sending batches of 1, 100
and the default 500, for 4 concurrent batch-1 publishers (group commit), and
the in-process ``apply_batch`` ceiling with no socket at all. Each hub runs in
its own process; ``--sync`` runs the same matrix with SQLite
``synchronous=NORMAL`` as well (set by this script's own hub launcher on top
of ``store/db.py``'s FULL, which stays the product default).

Run: ``/tmp/venv/bin/python -m bench bench_publish [--turns 6000] [--runs 3] [--sync FULL,NORMAL]``
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import harness
from memviewer.client import Publisher
from memviewer.wire.probe import hub_hello
from memviewer.wire.testing import hub_env

TURNS_PER_EPISODE = 100
TURNS_PER_SESSION = 1000  # agents rotate sessions; one endless session measures other things
CONTENT = "Reading tests/test_scheduler.py and the CI log to find why the job fires a second late. " * 2


def _set_sync(engine: Any, sync: str) -> None:
    """Add ``PRAGMA synchronous=<sync>`` after ``store/db.py``'s own connect hook."""
    from sqlalchemy import event

    engine.dispose()

    @event.listens_for(engine, "connect")
    def _sync(dbapi_conn: Any, _rec: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA synchronous = {sync}")
        cur.close()


# -- a hub process with a chosen synchronous mode ---------------------------------------------
def serve(home: str, sock: str, sync: str) -> None:
    """``--serve`` mode: a hub like ``memviewer serve --no-index``, with ``PRAGMA synchronous=<sync>``."""
    from memviewer.config import load_settings
    from memviewer.service import MemoryService
    from memviewer.wire.hub import Hub

    settings = load_settings(None, env={}, home=home, socket=sock)
    service = MemoryService(settings)
    _set_sync(service.store.engine, sync)

    async def run() -> None:
        hub = Hub(service, sock, start_indexer=False)
        await hub.start()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, hub.request_stop)
        await hub.serve_forever()

    asyncio.run(run())
    service.close()


class BenchHub:
    def __init__(self, sync: str) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="mvb-", dir="/tmp"))
        self.sock = self.dir / "hub.sock"
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(self.dir / "home"), str(self.sock), sync],
            env=hub_env(self.dir / "home", self.sock),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while hub_hello(self.sock) is None:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("bench hub did not start")
            time.sleep(0.05)

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        shutil.rmtree(self.dir, ignore_errors=True)


# -- workloads -------------------------------------------------------------------------------------
def publish_run(sock: Path, spool: Path, turns: int, max_batch: int, agent: str = "bench") -> float:
    """Turns/s acknowledged for one publisher (the hub's home is named by ``hello``)."""
    from memviewer.wire.probe import hub_hello

    home = (hub_hello(sock, timeout=5) or {}).get("home")
    with Publisher(sock, spool, home=home, max_batch=max_batch) as pub:
        assert pub.flush(30)
        t0 = time.perf_counter()
        sid = eid = None
        for i in range(turns):
            if i % TURNS_PER_SESSION == 0:
                sid = pub.open_session(agent=agent)
            if i % TURNS_PER_EPISODE == 0:
                if eid is not None:
                    pub.finalize_episode(eid)
                eid = pub.start_episode(sid, f"task {i // TURNS_PER_EPISODE}: fix the flaky scheduler test")
            else:
                pub.add_turn(eid, "tool" if i % 3 else "assistant", CONTENT, metadata={"tool": "read_file"})
        assert pub.flush(600), "flush timed out"
        elapsed = time.perf_counter() - t0
        assert pub.errors == 0, list(pub.error_log)[:3]
    return turns / elapsed


def concurrent_run(sock: Path, spool: Path, turns: int, publishers: int) -> float:
    """Aggregate turns/s for several batch-1 publishers at once (group commit at the hub)."""
    per = turns // publishers
    threads = [
        threading.Thread(target=publish_run, args=(sock, spool, per, 1, f"p{k}")) for k in range(publishers)
    ]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return per * publishers / (time.perf_counter() - t0)


def in_process_ceiling(turns: int, batch: int, sync: str) -> float:
    """``apply_batch`` alone (no socket, no JSON): what the hub's writer thread can do at best."""
    from memviewer.config import load_settings
    from memviewer.ids import new_id
    from memviewer.service import MemoryService

    d = tempfile.mkdtemp(prefix="mvc-", dir="/tmp")
    try:
        svc = MemoryService(load_settings(None, env={}, home=d, socket=d + "/s"))
        _set_sync(svc.store.engine, sync)
        cmds: list[dict[str, Any]] = []
        sid = eid = None
        for i in range(turns):
            if i % TURNS_PER_SESSION == 0:
                sid = new_id("s-")
                cmds.append({"op": "open_session", "session_id": sid, "agent": "ceiling"})
            if i % TURNS_PER_EPISODE == 0:
                eid = new_id("e-")
                cmds.append(
                    {
                        "op": "start_episode",
                        "session_id": sid,
                        "episode_id": eid,
                        "user_message": "fix the flaky scheduler test",
                    }
                )
            else:
                cmds.append(
                    {
                        "op": "add_turn",
                        "episode_id": eid,
                        "role": "tool",
                        "content": CONTENT,
                        "turn_id": new_id("t-"),
                        "metadata": {"tool": "read_file"},
                    }
                )
        t0 = time.perf_counter()
        for k in range(0, len(cmds), batch):
            svc.apply_batch(cmds[k : k + batch])
        rate = turns / (time.perf_counter() - t0)
        svc.close()
        return rate
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _report(sync: str, label: str, vals: list[float]) -> None:
    print(f"{sync:6} {label:44} {statistics.median(vals):8.0f}  {[round(v) for v in vals]}", flush=True)


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--turns", type=int, default=6000, help="turns per batched run")
    ap.add_argument("--turns-single", type=int, default=600, help="turns per batch-size-1 run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sync", default="FULL,NORMAL")
    args = harness.parse(ap, {"turns": 300, "turns_single": 30, "runs": 1, "sync": "NORMAL"})
    harness.header("bench_publish")
    spool = Path(tempfile.mkdtemp(prefix="mvs-", dir="/tmp"))
    print(
        f"# medians of {args.runs} runs; turns/s acknowledged (durable); {len(CONTENT)}-byte turns, "
        f"{TURNS_PER_SESSION} turns per session"
    )
    for sync in args.sync.split(","):
        _report(
            sync,
            "in-process apply_batch, batch 100 (ceiling)",
            [in_process_ceiling(args.turns, 100, sync) for _ in range(args.runs)],
        )
        for label, turns, batch, pubs in (
            ("Publisher batch 1", args.turns_single, 1, 1),
            ("Publisher batch 100", args.turns, 100, 1),
            ("Publisher batch 500 (default)", args.turns, 500, 1),
            ("4 Publishers batch 1 (group commit)", args.turns_single * 2, 1, 4),
        ):
            vals = []
            for _ in range(args.runs):
                hub = BenchHub(sync)
                try:
                    if pubs == 1:
                        vals.append(publish_run(hub.sock, spool, turns, batch))
                    else:
                        vals.append(concurrent_run(hub.sock, spool, turns, pubs))
                finally:
                    hub.close()
            _report(sync, label, vals)
    shutil.rmtree(spool, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--serve":
        serve(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main()
