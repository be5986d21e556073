"""Benchmark: publish throughput of this checkout's hub against another revision's, side by side.

The hub of each revision runs as its own ``memviewer serve --no-index`` process
(``PYTHONPATH`` points at that revision's tree, extracted with ``git archive``); the
client is always this checkout's ``Publisher``, so only the hub differs. Runs alternate
A, B, A, B … in one session, because the machine is shared and its load drifts; the
table gives medians and the ratio B/A of throughput (turns/s acknowledged) and of the
hub process's own CPU time per 1,000 turns (``cpu``, ms; start-up excluded), which a
loaded machine disturbs far less than wall-clock throughput.

Run: ``python -m bench bench_hub_ab [--base REV] [--runs 5] [--turns 6000]``
(``REV`` defaults to the merge base of ``HEAD`` and ``main``; ``--head REV2`` measures
another revision instead of the checkout as it is, so the tree may change meanwhile).
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench import (
    baseline_tree,
    harness,
)
from bench.bench_publish import concurrent_run, publish_run
from memviewer.wire.probe import hub_hello
from memviewer.wire.testing import SERVE, hub_env

ROOT = harness.ROOT


def extract(rev: str) -> Path:
    """``rev``'s tree in a temporary folder (only ``memviewer/`` is needed to serve)."""
    return baseline_tree.extract(rev, Path(tempfile.mkdtemp(prefix="mv-ab-")))


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

    def cpu_s(self) -> float:
        """The hub process's CPU time so far (user + system): far less sensitive to the
        machine's load than wall-clock throughput."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        shutil.rmtree(self.dir, ignore_errors=True)


def measure(tree: Path, work: Callable[[Path, Path], float], turns: int) -> tuple[float, float]:
    """(turns/s, hub CPU ms per 1,000 turns) of one run on a fresh hub."""
    hub = TreeHub(tree)
    spool = Path(tempfile.mkdtemp(prefix="mvab-spool-", dir="/tmp"))
    try:
        cpu0 = hub.cpu_s()
        rate = work(hub.sock, spool)
        return rate, (hub.cpu_s() - cpu0) * 1000 * 1000 / turns
    finally:
        hub.close()
        shutil.rmtree(spool, ignore_errors=True)


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--base", default="", help="revision A (default: merge base of HEAD and main)")
    ap.add_argument("--head", default="", help="revision B (default: this checkout as it is)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--turns", type=int, default=6000)
    ap.add_argument("--turns-single", type=int, default=600)
    args = harness.parse(ap, {"base": "HEAD", "runs": 1, "turns": 300, "turns_single": 30})
    harness.header("bench_hub_ab")
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
    print(
        f"# A = {base[:10]} (git archive), B = {head}{' + changes' if dirty.stdout else ''}; "
        f"medians of {args.runs} alternating runs, turns/s acknowledged (durable)"
    )
    workloads: list[tuple[str, int, Callable[[Path, Path], float]]] = [
        ("Publisher batch 500 (default)", args.turns, lambda s, sp: publish_run(s, sp, args.turns, 500)),
        ("Publisher batch 100", args.turns, lambda s, sp: publish_run(s, sp, args.turns, 100)),
        ("Publisher batch 1", args.turns_single, lambda s, sp: publish_run(s, sp, args.turns_single, 1)),
        (
            "4 Publishers batch 1 (group commit)",
            args.turns_single * 2,
            lambda s, sp: concurrent_run(s, sp, args.turns_single * 2, 4),
        ),
    ]
    try:
        print(
            f"{'workload':38} {'A t/s':>7} {'B t/s':>7} {'B/A':>5}  "
            f"{'A cpu':>6} {'B cpu':>6} {'B/A':>5}  turns/s runs A | B"
        )
        for label, turns, work in workloads:
            a: list[tuple[float, float]] = []
            b: list[tuple[float, float]] = []
            for _ in range(args.runs):
                a.append(measure(tree_a, work, turns))
                b.append(measure(tree_b, work, turns))
            ra, rb = statistics.median(x for x, _ in a), statistics.median(x for x, _ in b)
            ca, cb = statistics.median(c for _, c in a), statistics.median(c for _, c in b)
            print(
                f"{label:38} {ra:7.0f} {rb:7.0f} {rb / ra:5.2f}  {ca:6.0f} {cb:6.0f} {cb / ca:5.2f}  "
                f"{[round(x) for x, _ in a]} | {[round(x) for x, _ in b]}",
                flush=True,
            )
    finally:
        shutil.rmtree(tree_a, ignore_errors=True)
        if tree_b != ROOT:
            shutil.rmtree(tree_b, ignore_errors=True)
    harness.footer()


if __name__ == "__main__":
    main()
