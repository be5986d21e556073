"""Benchmark: publish throughput of this checkout's hub against another revision's, side by side.

The hub of each revision runs as its own ``memviewer serve --no-index`` process
(``PYTHONPATH`` points at that revision's tree, extracted with ``git archive``); the
client is always this checkout's ``Publisher``, so only the hub differs. Runs alternate
A, B, A, B … in one session, because the machine is shared and its load drifts; the
table gives medians and the ratio B/A.

Run: ``.venv/bin/python bench/bench_hub_ab.py [--base REV] [--runs 5] [--turns 6000]``
(``REV`` defaults to the merge base of ``HEAD`` and ``main``; ``--head REV2`` measures
another revision instead of the checkout as it is, so the tree may change meanwhile).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_publish import concurrent_run, publish_run  # noqa: E402

from memviewer.wire.probe import hub_hello  # noqa: E402
from memviewer.wire.testing import SERVE, hub_env  # noqa: E402


def extract(rev: str) -> Path:
    """``rev``'s tree in a temporary folder (only ``memviewer/`` is needed to serve)."""
    out = Path(tempfile.mkdtemp(prefix="mv-ab-"))
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "memviewer"], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out


class TreeHub:
    """A hub process serving a fresh home from the code in ``tree``."""

    def __init__(self, tree: Path) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="mvab-", dir="/tmp"))
        self.sock = self.dir / "hub.sock"
        env = hub_env(self.dir / "home", self.sock)
        env["PYTHONPATH"] = str(tree)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVE, "serve", "--no-index"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while hub_hello(self.sock) is None:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"hub from {tree} did not start")
            time.sleep(0.05)

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        shutil.rmtree(self.dir, ignore_errors=True)


def measure(tree: Path, work: Callable[[Path, Path], float]) -> float:
    hub = TreeHub(tree)
    spool = Path(tempfile.mkdtemp(prefix="mvab-spool-", dir="/tmp"))
    try:
        return work(hub.sock, spool)
    finally:
        hub.close()
        shutil.rmtree(spool, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="", help="revision A (default: merge base of HEAD and main)")
    ap.add_argument("--head", default="", help="revision B (default: this checkout as it is)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--turns", type=int, default=6000)
    ap.add_argument("--turns-single", type=int, default=600)
    args = ap.parse_args()
    base = (
        args.base
        or subprocess.run(
            ["git", "-C", str(ROOT), "merge-base", "HEAD", "main"], check=True, capture_output=True, text=True
        ).stdout.strip()
    )
    head = (
        "this checkout at "
        + subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "memviewer"], capture_output=True, text=True
    )
    tree_a = extract(base)
    tree_b = extract(args.head) if args.head else ROOT
    if args.head:
        head, dirty.stdout = f"{args.head} (git archive)", ""
    load = os.getloadavg()
    print(
        f"# bench_hub_ab {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')} on {platform.node()}: "
        f"{os.cpu_count()} cpus, Python {platform.python_version()}, "
        f"load {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}"
    )
    print(
        f"# A = {base[:10]} (git archive), B = {head}{' + changes' if dirty.stdout else ''}; "
        f"medians of {args.runs} alternating runs, turns/s acknowledged (durable)"
    )
    workloads: list[tuple[str, Callable[[Path, Path], float]]] = [
        ("Publisher batch 500 (default)", lambda s, sp: publish_run(s, sp, args.turns, 500)),
        ("Publisher batch 100", lambda s, sp: publish_run(s, sp, args.turns, 100)),
        ("Publisher batch 1", lambda s, sp: publish_run(s, sp, args.turns_single, 1)),
        (
            "4 Publishers batch 1 (group commit)",
            lambda s, sp: concurrent_run(s, sp, args.turns_single * 2, 4),
        ),
    ]
    try:
        print(f"{'workload':40} {'A':>8} {'B':>8} {'B/A':>6}  runs A | B")
        for label, work in workloads:
            a: list[float] = []
            b: list[float] = []
            for _ in range(args.runs):
                a.append(measure(tree_a, work))
                b.append(measure(tree_b, work))
            ma, mb = statistics.median(a), statistics.median(b)
            print(
                f"{label:40} {ma:8.0f} {mb:8.0f} {mb / ma:6.2f}  "
                f"{[round(v) for v in a]} | {[round(v) for v in b]}",
                flush=True,
            )
    finally:
        shutil.rmtree(tree_a, ignore_errors=True)
        if tree_b != ROOT:
            shutil.rmtree(tree_b, ignore_errors=True)
    load = os.getloadavg()
    print(f"# load at the end {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}")


if __name__ == "__main__":
    main()
