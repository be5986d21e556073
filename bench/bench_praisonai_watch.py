"""Peak RSS and time of the hub's PraisonAI folder watcher on one big file, before/after.

A generated PraisonAI file (``tests/praisonai_big.py``: many short messages, the worst case
of objects per byte) sits in a watched folder; ``memviewer serve --no-index
--watch-praisonai DIR`` of ``--baseline REV`` (default ``main``, exported with ``git
archive`` and run through ``PYTHONPATH``) and of this tree each start on a fresh home and
import it from their first scan. The bench polls the store (read-only SQLite) until the
session holds every message and its last ``session.imported`` event is final, then touches
the file (same bytes: this tree hashes it and stops) and, after a settle, stops the hub.
Peak RSS is ``ru_maxrss`` of the hub (``RUSAGE_CHILDREN`` of a wrapper that runs only it).
Child processes run with their cwd in a temporary folder outside the repository.

    python -m bench bench_praisonai_watch [--mb 100] [--baseline main]
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import baseline_tree, harness

ROOT = harness.ROOT

write_big_session = harness.test_module("praisonai_big").write_big_session

WRAPPER = """
import resource, signal, subprocess, sys
p = subprocess.Popen(sys.argv[1:])
signal.signal(signal.SIGTERM, lambda *_: p.terminate())
p.wait()
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, flush=True)
"""


def imported(db: Path, n: int) -> bool:
    """The session holds ``n`` turns and its last import event is not partial."""
    if not db.exists():
        return False
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            (count,) = conn.execute("SELECT count(*) FROM turns WHERE session_id = 'big'").fetchone()
            row = conn.execute(
                "SELECT payload FROM events WHERE kind = 'session.imported' AND session_id = 'big' "
                "ORDER BY seq DESC LIMIT 1"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return False
    return count == n and row is not None and not json.loads(row[0]).get("partial")


def run(tree: Path, tmp: Path, label: str, folder: Path, n: int, timeout: float) -> tuple[float, float]:
    home = tmp / f"home-{label}"
    sock = Path(tempfile.mkdtemp(prefix="mvb-", dir="/tmp")) / "hub.sock"
    env = {**os.environ, "PYTHONPATH": str(tree), "MEMVIEWER_CONFIG": os.devnull}
    cmd = [sys.executable, "-m", "memviewer.cli", "--home", str(home), "--socket", str(sock)]
    cmd += ["serve", "--no-index", "--watch-praisonai", str(folder)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", WRAPPER, *cmd],
        cwd=tmp,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    db = home / "memviewer.db"
    try:
        while not imported(db, n):
            if proc.poll() is not None:
                raise SystemExit(f"{label}: the hub exited early")
            if time.perf_counter() - t0 > timeout:
                raise SystemExit(f"{label}: not imported within {timeout} s")
            time.sleep(0.5)
        secs = time.perf_counter() - t0
        os.utime(folder / "big.json")  # a change event, same bytes
        time.sleep(5)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=120)
    return secs, float(out.split()[-1])


def main() -> None:
    ap = harness.parser(__doc__)
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--baseline", default="main", help="git revision to compare with ('' to skip)")
    ap.add_argument("--timeout", type=float, default=3600)
    args = harness.parse(ap, {"mb": 1, "baseline": "", "timeout": 120.0})
    harness.header("bench_praisonai_watch")
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        folder = tmp / "sessions"
        folder.mkdir()
        path = folder / "big.json"
        n = write_big_session(path, args.mb * 1_000_000)
        size = path.stat().st_size / 1e6
        print(
            f"# file {size:.0f} MB, {n} messages",
            flush=True,
        )
        trees: list[tuple[str, Path]] = []
        if args.baseline:
            base = baseline_tree.extract(args.baseline, tmp / "baseline")
            trees.append((f"baseline ({args.baseline})", base))
        trees.append(("this tree", ROOT))
        for label, tree in trees:
            secs, rss = run(tree, tmp, label[:4], folder, n, args.timeout)
            print(
                f"  {label:18} watcher import: {secs:6.1f} s, hub peak RSS {rss:6.0f} MB "
                f"({rss / size:.2f}x), load {harness.load()}",
                flush=True,
            )


if __name__ == "__main__":
    main()
