"""Peak RSS of a real hub with the indexer on, while publishers stream turns into it.

Each run starts ``memviewer serve`` (the real ONNX model, real LanceDB) on a fresh home,
has ``--publishers`` Publishers (threads of this process) each publish ``--turns`` turns
into its own session (episodes of 10 turns, chat-like texts of 5–300 words, so sequence
lengths vary), waits until the index has caught up, and samples the hub's ``VmRSS``
from ``/proc`` every 0.1 s (``VmHWM`` at the end is the kernel's own peak).

Before/after in one run: ``--baseline REV`` (default ``main``) is exported with
``git archive`` into a temporary folder and the hub of the baseline runs from it
(``PYTHONPATH``); runs alternate baseline, this tree, baseline, … so machine noise hits
both.

    .venv/bin/python bench/bench_indexer_memory.py [--publishers 8] [--turns 2000] [--runs 1]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memviewer.client import Publisher  # noqa: E402
from memviewer.wire.testing import HubProcess  # noqa: E402

WORDS = (
    "the build deploy cache index query agent memory session turn user assistant tool release "
    "docker image cron job login page api database migration schema test suite flaky timeout "
    "error warning latency throughput benchmark vector search keyword ranking summary archive "
    "yesterday tomorrow monday friday meeting dentist flight hotel lisbon tokyo budget invoice"
).split()


def texts(n: int, seed: int) -> list[str]:
    """Chat-like turns, mostly short, some long answers (varied token counts)."""
    rng = random.Random(seed)
    sizes = [5, 8, 12, 20, 30, 45, 60, 90, 150, 300]
    return [" ".join(rng.choice(WORDS) for _ in range(rng.choice(sizes))) + "." for _ in range(n)]


def status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def publish(home: Path, sock: Path, n: int, seed: int) -> None:
    items = texts(n, seed)
    with Publisher(sock, home=home, max_batch=200) as pub:
        sid = pub.open_session(agent=f"bench-{seed}", scope="user", scope_id=f"u{seed}")
        for start in range(0, n, 10):
            eid = pub.start_episode(sid, items[start])
            for text in items[start + 1 : start + 10]:
                pub.add_turn(eid, "assistant", text)
            pub.finalize_episode(eid, r_task=1.0)
        assert pub.flush(timeout=300.0), "publisher did not flush"


def caught_up(home: Path) -> tuple[int, int]:
    """(turns in SQLite, turns the index watermark covers)."""
    db = sqlite3.connect(f"file:{home / 'memviewer.db'}?mode=ro", uri=True)
    try:
        total = db.execute("SELECT COALESCE(MAX(num), 0) FROM turns").fetchone()[0]
    finally:
        db.close()
    try:
        state = json.loads((home / "lance" / "state.json").read_text())
    except (OSError, ValueError):
        state = {}
    return int(total), int(state.get("turn_num", 0) or 0)


def one_run(label: str, pythonpath: str | None, publishers: int, turns: int, tmp: Path) -> dict:
    home, sock = tmp / f"{label}-home", tmp / f"{label}.sock"
    env = {"PYTHONPATH": pythonpath} if pythonpath else {}
    hub = HubProcess(home, sock, args=(), extra_env=env).start(timeout=60)
    samples: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(status_kb(hub.pid, "VmRSS"))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.monotonic()
    try:
        workers = [
            threading.Thread(target=publish, args=(home, sock, turns, seed)) for seed in range(publishers)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        published = time.monotonic() - started
        deadline = time.monotonic() + 1800
        while time.monotonic() < deadline:
            total, done = caught_up(home)
            if total >= publishers * turns and done >= total:
                break
            time.sleep(0.5)
        indexed = time.monotonic() - started
        time.sleep(1.0)  # the pass that saved the watermark finishes its summaries
        hwm = status_kb(hub.pid, "VmHWM")
    finally:
        stop.set()
        sampler.join()
        hub.stop(timeout=60)
    return {
        "label": label,
        "published_s": round(published, 1),
        "indexed_s": round(indexed, 1),
        "peak_rss_mb": round(max(samples) / 1024, 1),
        "vmhwm_mb": round(hwm / 1024, 1),
        "end_rss_mb": round(samples[-1] / 1024, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--publishers", type=int, default=8)
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--baseline", default="main", help="git revision to compare with ('' to skip)")
    args = ap.parse_args()
    print(
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.1f}; {args.publishers} publishers x {args.turns} turns"
    )
    results: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        variants: list[tuple[str, str | None]] = []
        if args.baseline:
            base = tmp / "baseline"
            base.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.baseline, "memviewer"],
                check=True,
                capture_output=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
            variants.append((f"baseline({args.baseline})", str(base)))
        variants.append(("this tree", str(ROOT)))
        for run in range(args.runs):
            for label, path in variants:
                r = one_run(
                    f"{label.split('(')[0].replace(' ', '')}{run}", path, args.publishers, args.turns, tmp
                )
                r["label"] = label
                results.setdefault(label, []).append(r)
                print(json.dumps(r), f"load {os.getloadavg()[0]:.1f}", flush=True)
    for label, rows in results.items():
        print(
            f"{label:18} peak RSS median {statistics.median(r['peak_rss_mb'] for r in rows):7.1f} MB, "
            f"VmHWM median {statistics.median(r['vmhwm_mb'] for r in rows):7.1f} MB, "
            f"indexed in {statistics.median(r['indexed_s'] for r in rows):6.1f} s"
        )


if __name__ == "__main__":
    main()
